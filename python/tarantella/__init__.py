"""Tarantella: data-parallel training of Keras models, on libtarantella (C, oneDNN, MPI).

    import tarantella as tnt
    tnt.init()
    model = tnt.Model(keras_model)       # data-parallel
    model.compile(...); model.fit(train_dataset, epochs=5)

Run it with `tarantella -n 4 -- python3 train.py`; without the launcher it runs as one rank.
TensorFlow's names are ours: tnt.keras (layers, models, optimizers, losses, metrics, callbacks,
datasets, utils, preprocessing, backend, config) and tnt.data.Dataset; a Keras program migrates by
its imports: `from tarantella import keras`, `import tarantella.tensorflow as tf`.
"""
from tarantella._core import init, get_rank, get_size, get_master_rank, is_master_rank, gpu_status, gpu_device_count
from tarantella._core import C as _C
from tarantella import data
from tarantella import keras
from tarantella import keras_hub  # KerasHub's layers: keras_hub.layers.PositionEmbedding
from tarantella.model import Model, ParallelStrategy
from tarantella import models
from tarantella import tensorflow  # import tarantella.tensorflow as tf

__version__ = _C.__version__

def DistributedGradientTape(tape):
    """Horovod's wrapper, for programs that use it: a tape's gradients of a tnt.Model are averaged
    over the ranks already (tape.gradient does it), so the tape is returned as it is."""
    return tape


# Tarantella's names of the rank API
def get_comm_size():
    return get_size()


__all__ = ["init", "get_rank", "get_size", "get_master_rank", "is_master_rank", "gpu_status", "gpu_device_count",
           "get_comm_size", "data", "DistributedGradientTape",
           "keras", "keras_hub", "Model", "ParallelStrategy", "models", "__version__"]
