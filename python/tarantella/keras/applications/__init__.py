"""keras.applications: the ImageNet architectures with Keras's signatures, layer names and weight
order (a Keras weight file of the same architecture loads into them). weights="imagenet" reads
Keras's file from its cache folder (~/.keras/models, the same file names); Tarantella does not
download, and names the file and where it goes when it is absent."""
import sys

from tarantella.keras.applications import imagenet_utils, resnet, vgg, mobilenet_v2, densenet, efficientnet  # noqa: F401,E501
from tarantella.keras.applications.resnet import ResNet50, ResNet101, ResNet152  # noqa: F401
from tarantella.keras.applications.vgg import VGG16, VGG19  # noqa: F401
from tarantella.keras.applications.mobilenet_v2 import MobileNetV2  # noqa: F401
from tarantella.keras.applications.densenet import DenseNet121, DenseNet169, DenseNet201  # noqa: F401
from tarantella.keras.applications.efficientnet import (EfficientNetB0, EfficientNetB1, EfficientNetB2,  # noqa: F401
                                                        EfficientNetB3, EfficientNetB4, EfficientNetB5,
                                                        EfficientNetB6, EfficientNetB7)

# Keras's module names: keras.applications.resnet50, vgg16, vgg19 (each with its preprocess_input)
resnet50 = resnet
vgg16 = vgg19 = vgg
for _alias, _module in (("resnet50", resnet), ("vgg16", vgg), ("vgg19", vgg)):
    sys.modules[f"{__name__}.{_alias}"] = _module
del _alias, _module
