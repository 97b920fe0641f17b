"""Issue 21, item 1: a Keras program migrates by its import lines only. `from tarantella import
keras` stands for keras/tensorflow.keras, `import tarantella.tensorflow as tf` for TensorFlow's
calls around the model (tf.data, tf.random.set_seed, tf.constant, dtypes, ...)."""
import importlib

import numpy as np
import pytest


def test_import_forms(tnt):
    from tarantella import keras
    from tarantella.keras import layers, utils, backend, preprocessing, datasets, callbacks, config  # noqa: F401
    import tarantella.keras.utils as ku
    import tarantella.tensorflow as tf
    from tarantella.keras.preprocessing.image import ImageDataGenerator  # noqa: F401
    from tarantella.keras.preprocessing.sequence import pad_sequences  # noqa: F401
    from tarantella.keras.preprocessing.text import Tokenizer  # noqa: F401
    from tarantella.keras.utils import to_categorical  # noqa: F401
    from tarantella.keras.utils.np_utils import to_categorical as old  # Keras 2's module names
    from tarantella.keras.utils.vis_utils import plot_model  # noqa: F401
    from tarantella.keras.utils.generic_utils import get_custom_objects  # noqa: F401
    from tarantella.keras.utils.data_utils import get_file  # noqa: F401
    assert old is to_categorical
    assert tf.keras is keras and ku is keras.utils and tf.data is tnt.data
    assert tf.__version__ == keras.__version__ == "2.11.0"
    assert tf.data.AUTOTUNE == tf.data.experimental.AUTOTUNE == -1
    assert importlib.import_module("tarantella.keras.backend").image_data_format() == "channels_last"


def test_dtypes_and_constants(tnt):
    import tarantella.tensorflow as tf
    assert tf.float32 == "float32" and tf.float32 == np.float32 and tf.float32 != tf.int32
    assert tf.float32.as_numpy_dtype is np.float32 and tf.int64.is_integer and tf.float16.is_floating
    assert tf.float32.size == 4 and tf.dtypes.as_dtype("int8") is tf.int8 and tf.uint8.max == 255
    assert np.zeros(2, dtype=tf.float64).dtype == np.float64  # NumPy takes them as dtypes
    c = tf.constant([[1, 2], [3, 4]])
    assert c.dtype == np.int64 and c.shape == (2, 2)
    assert tf.constant(1.5).dtype == np.float32  # Python floats become float32, as in TensorFlow
    np.testing.assert_array_equal(tf.constant(7, shape=(2, 3)), np.full((2, 3), 7))
    np.testing.assert_array_equal(tf.constant([1, 2, 3, 4], shape=(2, 2), dtype=tf.float32),
                                  np.array([[1, 2], [3, 4]], np.float32))
    with pytest.raises(TypeError, match="shape"):
        tf.constant([1, 2, 3], shape=(2, 2))
    assert tf.convert_to_tensor([1.0, 2.0]).dtype == np.float32
    assert tf.convert_to_tensor([1, 2], dtype=tf.float64).dtype == np.float64
    assert tf.convert_to_tensor([1, 2], dtype_hint=tf.float32).dtype == np.float32
    spec = tf.TensorSpec((None, 3), tf.float32)
    assert spec.shape == (None, 3) and spec.dtype == tf.float32 and spec == (None, 3)
    assert tf.config.list_physical_devices("GPU") == [] and tf.config.list_physical_devices("CPU")[0].device_type == "CPU"
    tf.config.experimental.set_memory_growth(None, True)  # accepted
    assert tf.executing_eagerly() and tf.get_logger().name == "tensorflow"


def test_set_seed_makes_runs_repeat(tnt):
    """tf.random.set_seed: a model compiled without a seed and a dataset shuffled without one take
    the global seed, so two runs give the same weights; another seed other weights."""
    import tarantella.tensorflow as tf
    k = tf.keras
    x = np.random.default_rng(0).standard_normal((32, 4)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.float32)

    def run(seed):
        tf.random.set_seed(seed)
        m = k.Sequential([k.layers.Dense(3, activation="softmax", input_shape=(4,))])
        m.compile("sgd", "sparse_categorical_crossentropy")
        ds = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(32).batch(8)
        m.fit(ds, epochs=1, verbose=0)
        return m.get_weights()[0], [float(v) for _, v in ds.unbatch()]
    try:
        a, order_a = run(7)
        b, order_b = run(7)
        c, order_c = run(8)
    finally:
        tf.random.set_seed(None)
    np.testing.assert_array_equal(a, b)
    assert order_a == order_b and order_a != order_c and not np.array_equal(a, c)
