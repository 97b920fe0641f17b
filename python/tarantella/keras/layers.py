"""tnt.keras.layers: every layer class of libtarantella under its Keras name, with Keras's
constructor arguments and defaults.

A layer object records its class name and the arguments it was given; a model turns its layers
into a Keras JSON architecture that the C library reads (the same reader as for Keras files), so
each class here is exactly the C layer of that Keras class, and to_json round trips. Arguments left
at their defaults are not written: the reader applies Keras's defaults.

Layers are called on symbolic tensors (tnt.keras.Input) to build Functional models:

    inputs = tnt.keras.Input(shape=(28, 28, 1))
    x = tnt.keras.layers.Conv2D(20, 5, padding="same", activation="relu")(inputs)
    ...
    model = tnt.keras.Model(inputs, outputs)
"""
import inspect
import itertools
import re
import sys
import weakref

import numpy as np

from tarantella.keras import mixed_precision

# ---- Keras names -----------------------------------------------------------------------------

_name_counts = {}


def _snake(name):
    """Keras 2's to_snake_case: Conv2D -> conv2d, MaxPooling2D -> max_pooling2d, ReLU -> re_lu."""
    s = re.sub("(.)([A-Z][a-z0-9]+)", r"\1_\2", name)
    return re.sub("([a-z])([A-Z])", r"\1_\2", s).lower()


def unique_name(base):
    """Keras's automatic names: "dense", "dense_1", "dense_2", ..."""
    n = _name_counts.get(base, 0)
    _name_counts[base] = n + 1
    return base if n == 0 else f"{base}_{n}"


_creation = itertools.count()


def serialize(v):
    """A constructor argument as Keras JSON writes it."""
    if isinstance(v, Layer):
        return {"class_name": v.class_name, "config": v._json_config()}
    if hasattr(v, "get_config") and hasattr(v, "class_name"):  # initializers, regularizers, constraints
        return {"class_name": v.class_name, "config": {k: serialize(x) for k, x in v.get_config().items()}}
    if isinstance(v, (list, tuple)):
        return [serialize(x) for x in v]
    if isinstance(v, dict):
        return {k: serialize(x) for k, x in v.items()}
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (np.floating,)):
        return float(v)
    if isinstance(v, np.ndarray):
        return v.tolist()
    if callable(v) and hasattr(v, "__name__"):  # activations given as functions
        return v.__name__
    return v


# ---- symbolic tensors ------------------------------------------------------------------------

class KerasTensor:
    """The output of an Input or of a layer call: (layer, node, index). Its shape (without the
    batch axis, as (None, ...)) is computed by the library on first use."""

    def __init__(self, layer, node_index, tensor_index=0, shape=None):
        self._layer = layer
        self._node_index = node_index
        self._tensor_index = tensor_index
        self._shape = shape

    @property
    def node(self):
        return self._layer._nodes[self._node_index]

    @property
    def shape(self):
        if self._shape is None:
            from tarantella.keras.engine import tensor_shape
            self._shape = tensor_shape(self)
        return (None,) + tuple(self._shape)

    @property
    def dtype(self):
        return "float32"

    @property
    def _keras_mask(self):
        from tarantella.keras import _custom
        return _custom.keras_mask(self)

    @property
    def name(self):
        return f"{self._layer.name}/{self._node_index}/{self._tensor_index}"

    def __repr__(self):
        shape = (None,) + tuple(self._shape) if self._shape is not None else "?"
        return f"<KerasTensor shape={shape} from {self._layer.name!r}>"


class _Node:
    """One call of a layer: its input tensors and keyword arguments (MultiHeadAttention)."""

    def __init__(self, inputs, kwargs):
        self.inputs = inputs  # list of KerasTensor
        self.kwargs = kwargs  # name -> KerasTensor | bool | ...
        self.order = next(_creation)


def _is_tensor(v):
    return isinstance(v, KerasTensor)


# ---- the base class --------------------------------------------------------------------------

def _dims(shape):
    """A shape without the batch axis: ints, and None where any size goes (Keras's None)."""
    return tuple(None if d is None else int(d) for d in shape)


# Keras 3's names of Keras 2 arguments: {class: {new name: the name the library reads}}
_RENAMED = {"LeakyReLU": {"negative_slope": "alpha"}}

_BASE_KWARGS = ("name", "trainable", "dtype", "input_shape", "batch_input_shape", "batch_size", "input_dim",
                "weights", "dynamic", "autocast")


class Layer:
    """Base of the layer classes. class_name: the Keras class; get_config(): its Keras config."""

    class_name = None
    _signature = None  # inspect.Signature of the Keras arguments (without the base keywords)
    _nested = ()       # arguments holding layers (Bidirectional, TimeDistributed)

    def __init__(self, *args, **kwargs):
        if self.class_name is None and type(self) is not Layer:  # a subclass of the user's own, traced
            from tarantella.keras import _custom
            return _custom.init_layer(self, kwargs)
        if self.class_name is None:
            raise TypeError("tnt.keras.layers.Layer is abstract: custom Python layers are not supported "
                            "(the layers run in C); use a layer class of tnt.keras.layers")
        # a base keyword that is also the layer's own argument (Embedding's input_dim) stays its own
        own = self._signature.parameters if self._signature is not None else {}
        base = {k: kwargs.pop(k) for k in list(kwargs) if k in _BASE_KWARGS and k not in own}
        for new_name, old_name in _RENAMED.get(self.class_name, {}).items():  # Keras 3's names
            if new_name in kwargs:
                kwargs[old_name] = kwargs.pop(new_name)
        try:
            bound = self._signature.bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError(f"{self.class_name}: {e}") from None
        self._args = dict(bound.arguments)  # what was given explicitly
        if "data_format" in own and self._args.get("data_format") is None and own["data_format"].default is None:
            from tarantella.keras import backend as _K  # Keras: K.image_data_format() when the layer is made
            if _K.image_data_format() != "channels_last":
                self._args["data_format"] = _K.image_data_format()
        self._input_shape = None
        if base.get("batch_input_shape") is not None:
            self._input_shape = tuple(base["batch_input_shape"])[1:]
        elif base.get("input_shape") is not None:
            self._input_shape = tuple(base["input_shape"])
        elif base.get("input_dim") is not None:
            self._input_shape = (int(base["input_dim"]),)
        elif self.class_name == "Embedding":  # Keras 2: (input_length,), else (None,) (any length)
            n = self._args.get("input_length")
            self._input_shape = (int(n),) if n is not None else (None,)
        if self._input_shape is not None:
            self._input_shape = _dims(self._input_shape)
        self.name = base.get("name") or unique_name(_snake(self.class_name))
        self.trainable = base.get("trainable", True)
        dtype = base.get("dtype")  # Keras: the global policy when the layer is made, unless given
        self._dtype_policy = mixed_precision.policy_name(
            dtype if dtype is not None else mixed_precision.global_policy(), integers=self.class_name == "Embedding")
        self._initial_weights = base.get("weights")
        self._nodes = []
        self._model = None  # weakref to the model whose weights this layer reads
        self._config = None  # a layer read from a model's JSON: its config as the library wrote it

    @classmethod
    def _from_config_entry(cls, class_name, config):
        """A layer of a model read by the library: the config as written, no argument binding."""
        obj = cls.__new__(cls)
        obj.class_name = class_name
        obj._args = {}
        obj._input_shape = None
        obj.name = config.get("name")
        obj.trainable = config.get("trainable", True)
        obj._dtype_policy = mixed_precision.policy_name(config.get("dtype") or "float32", integers=True)
        obj._initial_weights = None
        obj._nodes = []
        obj._model = None
        obj._config = config
        return obj

    # ---- dtype policy (tnt.keras.mixed_precision) ----
    @property
    def dtype_policy(self):
        return mixed_precision.Policy(self._dtype_policy)

    @property
    def compute_dtype(self):
        return self.dtype_policy.compute_dtype

    @property
    def dtype(self):
        """The variables' dtype, as in Keras."""
        return "float32"

    # ---- config ----
    def get_config(self):
        """The Keras config: the library's, once the layer is part of a built model; before that the
        arguments given, with Keras's defaults for the rest."""
        if self._config is not None:
            return dict(self._config)
        cfg = {"name": self.name, "trainable": self.trainable, "dtype": self._dtype_policy}
        if self._signature is not None:
            b = self._signature.bind_partial(**self._args)
            b.apply_defaults()
            cfg.update({k: serialize(v) for k, v in b.arguments.items()})
        if self._input_shape is not None:
            cfg["batch_input_shape"] = [None] + list(self._input_shape)
        return cfg

    def _json_config(self):
        """The config written into a model's JSON: the explicit arguments only."""
        if getattr(self, "_custom", False):
            from tarantella.keras import _custom
            return _custom.custom_config(self)
        if self._config is not None:
            return dict(self._config)
        cfg = {"name": self.name}
        if not self.trainable:
            cfg["trainable"] = False
        if self._dtype_policy != "float32":
            cfg["dtype"] = self._dtype_policy
        cfg.update({k: serialize(v) for k, v in self._args.items()})
        if self.class_name == "Normalization" and isinstance(cfg.get("axis"), int):
            cfg["axis"] = [cfg["axis"]]  # Keras writes its tuple of axes
        if self._input_shape is not None:
            cfg["batch_input_shape"] = [None] + list(self._input_shape)
        return cfg

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config.pop("trainable", None)
        if "batch_input_shape" in config:
            config["input_shape"] = tuple(config.pop("batch_input_shape"))[1:]
        return cls(**{k: v for k, v in config.items()})

    # ---- calls (Functional API) ----
    def __call__(self, *args, **kwargs):
        from tarantella.keras import _custom  # the user's layers and Lambda: traced first
        traced = _custom.intercept(self, args, kwargs)
        if traced is not _custom.PASS:
            return traced
        inputs = args[0] if args else kwargs.pop("inputs", None)
        flat = inputs if isinstance(inputs, (list, tuple)) else [inputs]
        if not flat or not all(_is_tensor(t) for t in flat):
            raise TypeError(f"{self.name} ({self.class_name}): layers are called on symbolic tensors "
                            f"(tnt.keras.Input or another layer's output); to run a model on data use "
                            f"model.predict or model(x)")
        call_kwargs = {}
        if self.class_name == "MultiHeadAttention":  # (query, value, key=None, attention_mask=None, ...)
            names = ("value", "key", "attention_mask")
            for n, v in zip(names, args[1:]):
                kwargs[n] = v
            for n in names:
                if kwargs.get(n) is not None:
                    call_kwargs[n] = kwargs.pop(n)
            if kwargs.pop("use_causal_mask", False):
                call_kwargs["use_causal_mask"] = True
            if kwargs.pop("return_attention_scores", False):
                raise NotImplementedError("MultiHeadAttention: return_attention_scores is not supported")
            if "value" not in call_kwargs:
                raise TypeError("MultiHeadAttention: call it as layer(query, value[, key])")
        init = kwargs.pop("initial_state", None) if self.class_name in _STATES or \
            self.class_name == "Bidirectional" else None
        if init is not None:  # Keras 2: the initial states follow the sequence among the inputs
            init = list(init) if isinstance(init, (list, tuple)) else [init]
            if not all(_is_tensor(t) for t in init):
                raise TypeError(f"{self.name} ({self.class_name}): initial_state must be symbolic tensors")
            flat = list(flat) + init
        kwargs.pop("training", None)
        kwargs.pop("mask", None)
        if kwargs:
            raise TypeError(f"{self.name} ({self.class_name}): unsupported call arguments {sorted(kwargs)}")
        self._nodes.append(_Node(list(flat), call_kwargs))
        n = self._n_outputs()
        if n > 1:  # return_state, merge_mode=None: a list, as Keras
            return [KerasTensor(self, len(self._nodes) - 1, k) for k in range(n)]
        return KerasTensor(self, len(self._nodes) - 1)

    def _n_outputs(self):
        """Outputs of a call: recurrent layers with return_state add their states (h, and c for the
        LSTMs); Bidirectional with merge_mode=None has two outputs, then both directions' states."""
        if getattr(self, "_custom", False):  # the user's layer: what its traced call returned
            return getattr(self, "_n_traced_outputs", 1)
        cfg = self._config if self._config is not None else {**self._args}
        if self.class_name in _STATES:
            return 1 + (_STATES[self.class_name] if cfg.get("return_state") else 0)
        if self.class_name != "Bidirectional":
            return 1
        inner = cfg.get("layer")
        if isinstance(inner, Layer):
            cls, icfg = inner.class_name, (inner._config if inner._config is not None else inner._args)
        else:
            cls, icfg = (inner or {}).get("class_name"), (inner or {}).get("config", {})
        merged = 2 if "merge_mode" in cfg and cfg["merge_mode"] is None else 1
        return merged + (2 * _STATES.get(cls, 0) if icfg.get("return_state") else 0)

    # ---- weights (through the model that holds the layer) ----
    def _owner(self):
        m = self._model() if self._model is not None else None
        if m is None:
            raise ValueError(f"layer {self.name!r} is not part of a built model: its weights exist once the "
                             f"model is built (compile, fit, or model.build)")
        return m

    def _weight_indices(self, m):
        prefix = self.name + "/"
        return [i for i, (n, _) in enumerate(m._handle().weights_info()) if n.startswith(prefix)]

    def get_weights(self):
        m = self._owner()
        ws = m._handle().get_weights()
        return [ws[i] for i in self._weight_indices(m)]

    def set_weights(self, weights):
        m = self._owner()
        idx = self._weight_indices(m)
        if len(weights) != len(idx):
            raise ValueError(f"layer {self.name!r}: {len(weights)} arrays given, the layer has {len(idx)} "
                             f"weights")
        ws = m._handle().get_weights()
        for i, w in zip(idx, weights):
            ws[i] = w
        m._handle().set_weights(ws)

    @property
    def weights(self):
        try:
            m = self._owner()
        except ValueError:
            return []
        info = m._handle().weights_info()
        return [Weight(m, i, info[i][0], info[i][1]) for i in self._weight_indices(m)]

    @property
    def trainable_weights(self):
        from tarantella._core import C
        ws = self.weights
        flags = C.trainable_flags(ws[0]._model._handle()) if ws else []
        return [w for w in ws if flags[w._index]]

    def count_params(self):
        return int(sum(np.prod(w.shape) for w in self.weights))

    def reset_states(self, states=None):
        """Keras's layer.reset_states() of a stateful recurrent layer: its states back to zeros."""
        if states is not None:
            raise NotImplementedError(f"{self.name}: reset_states(states=...) is not supported (zeros only)")
        m = self._model() if getattr(self, "_model", None) is not None else None
        if m is not None and m._h is not None:
            m._h.reset_states(self.name)

    def _called(self):
        """The layer's calls; a layer of a loaded or Sequential model is called when the model's graph
        is made (as Keras has it from the start)."""
        m = self._model() if getattr(self, "_model", None) is not None else None
        if not self._nodes and m is not None and getattr(m, "_kind", None) in ("loaded", "sequential"):
            m.inputs
        if not self._nodes:
            raise AttributeError(f"layer {self.name!r} has not been called")
        return self._nodes

    @property
    def input(self):
        ins = self._called()[0].inputs
        return ins[0] if len(ins) == 1 else ins

    @property
    def output(self):
        self._called()
        n = self._n_outputs()
        return [KerasTensor(self, 0, k) for k in range(n)] if n > 1 else KerasTensor(self, 0)

    @property
    def output_shape(self):
        """Keras's output_shape: the shape of the layer's output (batch axis None), a list for several."""
        from tarantella.keras._layer_attributes import shape_of
        return shape_of(self, self.output, "output")

    @property
    def input_shape(self):
        from tarantella.keras._layer_attributes import shape_of
        return shape_of(self, self.input, "input")

    def __getattr__(self, name):
        """Keras's constructor arguments as attributes (Dense.units, Conv2D.kernel_size as a tuple,
        activation as the function): given, Keras's default, or from the config the layer was read with."""
        d = self.__dict__
        if name.startswith("_") or "_args" not in d or d.get("_custom"):
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        sig = type(self)._signature
        if name in d["_args"]:
            value = d["_args"][name]
        elif d.get("_config") is not None and name in d["_config"]:
            value = d["_config"][name]
        elif sig is not None and name in sig.parameters and sig.parameters[name].default is not inspect.Parameter.empty:
            value = sig.parameters[name].default
        else:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        from tarantella.keras._layer_attributes import keras_attribute
        return keras_attribute(self.class_name, name, value)

    def __repr__(self):
        return f"<tnt.keras.layers.{self.class_name} name={self.name!r}>"


class Weight:
    """A model weight, as a tf.Variable's few useful methods: name, shape, numpy(), assign()."""

    def __init__(self, model, index, name, shape):
        self._model, self._index, self.name, self.shape = model, index, name, tuple(shape)

    def numpy(self):
        return self._model._handle().get_weights()[self._index]

    def assign(self, value):
        ws = self._model._handle().get_weights()
        ws[self._index] = np.asarray(value, dtype=np.float32).reshape(self.shape)
        self._model._handle().set_weights(ws)

    def __array__(self, dtype=None):
        a = self.numpy()
        return a if dtype is None else a.astype(dtype)

    def __repr__(self):
        return f"<Weight {self.name!r} shape={self.shape}>"


# ---- Input -----------------------------------------------------------------------------------

class InputLayer(Layer):
    class_name = "InputLayer"
    _signature = inspect.Signature()

    def __init__(self, input_shape=None, batch_size=None, name=None, dtype=None, batch_input_shape=None, **kw):
        if batch_input_shape is not None:
            input_shape = tuple(batch_input_shape)[1:]
        if input_shape is None:
            raise ValueError("InputLayer: give input_shape (the shape without the batch axis)")
        self.name = name or unique_name("input")
        self.trainable = True
        self._dtype_policy = "float32"  # the inputs are float32 under every policy
        self._args = {}
        self._input_shape = _dims(input_shape)
        self._initial_weights = None
        self._model = None
        self._config = None
        self._nodes = [_Node([], {})]

    def _json_config(self):
        return {"batch_input_shape": [None] + list(self._input_shape), "dtype": "float32", "sparse": False,
                "ragged": False, "name": self.name}

    get_config = _json_config

    def __call__(self, *a, **k):
        raise TypeError("an InputLayer is not called; use tnt.keras.Input(shape) for a symbolic input")


def Input(shape=None, batch_size=None, name=None, dtype=None, sparse=None, tensor=None, ragged=None,
          batch_shape=None, **kwargs):
    """A symbolic input of shape (without the batch axis), as keras.Input."""
    if batch_shape is not None:
        shape = tuple(batch_shape)[1:]
    if shape is None:
        raise ValueError("Input: give shape (without the batch axis)")
    if isinstance(shape, int):
        shape = (shape,)
    layer = InputLayer(input_shape=tuple(shape), name=name)
    return KerasTensor(layer, 0, 0, shape=layer._input_shape)


# ---- the classes -----------------------------------------------------------------------------

_REG = ("kernel_regularizer=None, bias_regularizer=None, activity_regularizer=None, kernel_constraint=None, "
        "bias_constraint=None")
_KB = "kernel_initializer='glorot_uniform', bias_initializer='zeros', " + _REG
_RNN_REG = ("kernel_regularizer=None, recurrent_regularizer=None, bias_regularizer=None, activity_regularizer=None, "
            "kernel_constraint=None, recurrent_constraint=None, bias_constraint=None")
_BN = ("axis=-1, momentum=0.99, epsilon=0.001, center=True, scale=True, beta_initializer='zeros', "
       "gamma_initializer='ones', moving_mean_initializer='zeros', moving_variance_initializer='ones', "
       "beta_regularizer=None, gamma_regularizer=None, beta_constraint=None, gamma_constraint=None")

# The states of the recurrent classes (return_state outputs, initial_state inputs)
_STATES = {"LSTM": 2, "CuDNNLSTM": 2, "ConvLSTM2D": 2, "GRU": 1, "CuDNNGRU": 1, "SimpleRNN": 1}

# Keras class -> its constructor's arguments (Keras 2.11), without the base keywords
_SPECS = {
    "Dense": "units, activation=None, use_bias=True, " + _KB,
    "Conv2D": "filters, kernel_size, strides=(1, 1), padding='valid', data_format=None, dilation_rate=(1, 1), "
              "groups=1, activation=None, use_bias=True, " + _KB,
    "Conv1D": "filters, kernel_size, strides=1, padding='valid', data_format='channels_last', dilation_rate=1, "
              "groups=1, activation=None, use_bias=True, " + _KB,
    "DepthwiseConv2D": "kernel_size, strides=(1, 1), padding='valid', depth_multiplier=1, data_format=None, "
                       "dilation_rate=(1, 1), activation=None, use_bias=True, depthwise_initializer='glorot_uniform', "
                       "bias_initializer='zeros', depthwise_regularizer=None, bias_regularizer=None, "
                       "activity_regularizer=None, depthwise_constraint=None, bias_constraint=None",
    "SeparableConv2D": "filters, kernel_size, strides=(1, 1), padding='valid', data_format=None, "
                       "dilation_rate=(1, 1), depth_multiplier=1, activation=None, use_bias=True, "
                       "depthwise_initializer='glorot_uniform', pointwise_initializer='glorot_uniform', "
                       "bias_initializer='zeros', depthwise_regularizer=None, pointwise_regularizer=None, "
                       "bias_regularizer=None, activity_regularizer=None, depthwise_constraint=None, "
                       "pointwise_constraint=None, bias_constraint=None",
    "Conv2DTranspose": "filters, kernel_size, strides=(1, 1), padding='valid', output_padding=None, "
                       "data_format=None, dilation_rate=(1, 1), activation=None, use_bias=True, " + _KB,
    "Conv1DTranspose": "filters, kernel_size, strides=1, padding='valid', output_padding=None, data_format=None, "
                       "dilation_rate=1, activation=None, use_bias=True, " + _KB,
    "MaxPooling2D": "pool_size=(2, 2), strides=None, padding='valid', data_format=None",
    "AveragePooling2D": "pool_size=(2, 2), strides=None, padding='valid', data_format=None",
    "MaxPooling1D": "pool_size=2, strides=None, padding='valid', data_format='channels_last'",
    "AveragePooling1D": "pool_size=2, strides=None, padding='valid', data_format='channels_last'",
    "GlobalAveragePooling2D": "data_format=None, keepdims=False",
    "GlobalMaxPooling2D": "data_format=None, keepdims=False",
    "GlobalAveragePooling1D": "data_format='channels_last', keepdims=False",
    "GlobalMaxPooling1D": "data_format='channels_last', keepdims=False",
    "GlobalAveragePooling3D": "data_format=None, keepdims=False",
    "GlobalMaxPooling3D": "data_format=None, keepdims=False",
    "ZeroPadding2D": "padding=(1, 1), data_format=None",
    "Cropping2D": "cropping=((0, 0), (0, 0)), data_format=None",
    "UpSampling2D": "size=(2, 2), data_format=None, interpolation='nearest'",
    "ZeroPadding1D": "padding=1",
    "Cropping1D": "cropping=(1, 1)",
    "UpSampling1D": "size=2",
    "Flatten": "data_format=None",
    "Reshape": "target_shape",
    "Permute": "dims",
    "RepeatVector": "n",
    "Dropout": "rate, noise_shape=None, seed=None",
    "SpatialDropout1D": "rate",
    "SpatialDropout2D": "rate, data_format=None",
    "GaussianNoise": "stddev, seed=None",
    "GaussianDropout": "rate, seed=None",
    "AlphaDropout": "rate, noise_shape=None, seed=None",
    "ActivityRegularization": "l1=0.0, l2=0.0",
    "Activation": "activation",
    "ReLU": "max_value=None, negative_slope=0.0, threshold=0.0",
    "LeakyReLU": "alpha=0.3",
    "ELU": "alpha=1.0",
    "ThresholdedReLU": "theta=1.0",
    "PReLU": "alpha_initializer='zeros', alpha_regularizer=None, alpha_constraint=None, shared_axes=None",
    "Softmax": "axis=-1",
    "BatchNormalization": _BN,
    "SyncBatchNormalization": _BN,
    "LayerNormalization": "axis=-1, epsilon=0.001, center=True, scale=True, beta_initializer='zeros', "
                          "gamma_initializer='ones', beta_regularizer=None, gamma_regularizer=None, "
                          "beta_constraint=None, gamma_constraint=None",
    "Embedding": "input_dim, output_dim, embeddings_initializer='uniform', embeddings_regularizer=None, "
                 "activity_regularizer=None, embeddings_constraint=None, mask_zero=False, input_length=None",
    "Masking": "mask_value=0.0",
    "Rescaling": "scale, offset=0.0",
    "Resizing": "height, width, interpolation='bilinear', crop_to_aspect_ratio=False, data_format=None",
    "CenterCrop": "height, width, data_format=None",
    "RandomFlip": "mode='horizontal_and_vertical', seed=None, data_format=None",
    "RandomTranslation": "height_factor, width_factor, fill_mode='reflect', interpolation='bilinear', seed=None, "
                         "fill_value=0.0, data_format=None",
    "RandomRotation": "factor, fill_mode='reflect', interpolation='bilinear', seed=None, fill_value=0.0, "
                      "data_format=None",
    "RandomCrop": "height, width, seed=None, data_format=None",
    "RandomContrast": "factor, seed=None, value_range=(0, 255), data_format=None",
    "RandomBrightness": "factor, value_range=(0, 255), seed=None, data_format=None",
    "RandomZoom": "height_factor, width_factor=None, fill_mode='reflect', interpolation='bilinear', seed=None, "
                  "fill_value=0.0, data_format=None",
    "MultiHeadAttention": "num_heads, key_dim, value_dim=None, dropout=0.0, use_bias=True, output_shape=None, "
                          "attention_axes=None, " + _KB,
    "Add": "",
    "Subtract": "",
    "Multiply": "",
    "Average": "",
    "Maximum": "",
    "Minimum": "",
    "Concatenate": "axis=-1",
    "Dot": "axes, normalize=False",
    "LSTM": "units, activation='tanh', recurrent_activation='sigmoid', use_bias=True, "
            "kernel_initializer='glorot_uniform', recurrent_initializer='orthogonal', bias_initializer='zeros', "
            "unit_forget_bias=True, " + _RNN_REG + ", dropout=0.0, recurrent_dropout=0.0, return_sequences=False, "
            "return_state=False, go_backwards=False, stateful=False, time_major=False, unroll=False, seed=None, "
            "use_cudnn='auto'",
    "GRU": "units, activation='tanh', recurrent_activation='sigmoid', use_bias=True, "
           "kernel_initializer='glorot_uniform', recurrent_initializer='orthogonal', bias_initializer='zeros', "
           + _RNN_REG + ", dropout=0.0, recurrent_dropout=0.0, return_sequences=False, return_state=False, "
           "go_backwards=False, stateful=False, unroll=False, time_major=False, reset_after=True, seed=None, "
           "use_cudnn='auto'",
    "SimpleRNN": "units, activation='tanh', use_bias=True, kernel_initializer='glorot_uniform', "
                 "recurrent_initializer='orthogonal', bias_initializer='zeros', " + _RNN_REG + ", dropout=0.0, "
                 "recurrent_dropout=0.0, return_sequences=False, return_state=False, go_backwards=False, "
                 "stateful=False, unroll=False, seed=None",
    "CuDNNLSTM": "units, kernel_initializer='glorot_uniform', recurrent_initializer='orthogonal', "
                 "bias_initializer='zeros', unit_forget_bias=True, " + _RNN_REG + ", return_sequences=False, "
                 "return_state=False, go_backwards=False, stateful=False",
    "CuDNNGRU": "units, kernel_initializer='glorot_uniform', recurrent_initializer='orthogonal', "
                "bias_initializer='zeros', " + _RNN_REG + ", return_sequences=False, return_state=False, "
                "go_backwards=False, stateful=False",
    "Bidirectional": "layer, merge_mode='concat', backward_layer=None",
    "TimeDistributed": "layer",
    "Conv3D": "filters, kernel_size, strides=(1, 1, 1), padding='valid', data_format=None, "
              "dilation_rate=(1, 1, 1), groups=1, activation=None, use_bias=True, " + _KB,
    "MaxPooling3D": "pool_size=(2, 2, 2), strides=None, padding='valid', data_format=None",
    "AveragePooling3D": "pool_size=(2, 2, 2), strides=None, padding='valid', data_format=None",
    "ZeroPadding3D": "padding=(1, 1, 1), data_format=None",
    "Cropping3D": "cropping=((1, 1), (1, 1), (1, 1)), data_format=None",
    "UpSampling3D": "size=(2, 2, 2), data_format=None",
    "SpatialDropout3D": "rate, data_format=None",
    "Normalization": "axis=-1, mean=None, variance=None, invert=False",
    "LocallyConnected1D": "filters, kernel_size, strides=1, padding='valid', data_format=None, activation=None, "
                          "use_bias=True, " + _KB + ", implementation=1",
    "LocallyConnected2D": "filters, kernel_size, strides=(1, 1), padding='valid', data_format=None, activation=None, "
                          "use_bias=True, " + _KB + ", implementation=1",
    "Conv3DTranspose": "filters, kernel_size, strides=(1, 1, 1), padding='valid', output_padding=None, "
                       "data_format=None, dilation_rate=(1, 1, 1), activation=None, use_bias=True, " + _KB,
    # KerasHub's (keras_hub.layers; formerly keras_nlp): also tarantella.keras_hub.layers
    "PositionEmbedding": "sequence_length, initializer='glorot_uniform'",
    "ConvLSTM2D": "filters, kernel_size, strides=(1, 1), padding='valid', data_format=None, dilation_rate=(1, 1), "
                  "activation='tanh', recurrent_activation='hard_sigmoid', use_bias=True, "
                  "kernel_initializer='glorot_uniform', recurrent_initializer='orthogonal', bias_initializer='zeros', "
                  "unit_forget_bias=True, " + _RNN_REG + ", return_sequences=False, return_state=False, "
                  "go_backwards=False, stateful=False, dropout=0.0, recurrent_dropout=0.0",
}

# Keras's other names of the same classes
_ALIASES = {
    "Convolution2D": "Conv2D", "Convolution1D": "Conv1D", "SeparableConvolution2D": "SeparableConv2D",
    "Convolution2DTranspose": "Conv2DTranspose", "Convolution1DTranspose": "Conv1DTranspose",
    "MaxPool2D": "MaxPooling2D", "AvgPool2D": "AveragePooling2D", "MaxPool1D": "MaxPooling1D",
    "AvgPool1D": "AveragePooling1D", "GlobalAvgPool2D": "GlobalAveragePooling2D",
    "GlobalMaxPool2D": "GlobalMaxPooling2D", "GlobalAvgPool1D": "GlobalAveragePooling1D",
    "GlobalMaxPool1D": "GlobalMaxPooling1D", "GlobalAvgPool3D": "GlobalAveragePooling3D",
    "GlobalMaxPool3D": "GlobalMaxPooling3D", "MaxPool3D": "MaxPooling3D", "AvgPool3D": "AveragePooling3D",
    "Convolution3D": "Conv3D", "Convolution3DTranspose": "Conv3DTranspose",
}


def _signature(spec):
    return inspect.signature(eval(f"lambda {spec}: None"))  # noqa: S307 (our own constant strings)


def _make_class(class_name, spec):
    sig = _signature(spec)
    doc = (f"Keras's {class_name}({spec}), run by libtarantella. Also the base keywords name, trainable, "
           f"input_shape, batch_input_shape, input_dim.")
    cls = type(class_name, (Layer,), {"class_name": class_name, "_signature": sig, "__doc__": doc,
                                      "__module__": __name__})
    cls.__signature__ = sig
    return cls


for _cls, _spec in _SPECS.items():
    globals()[_cls] = _make_class(_cls, _spec)
for _alias, _cls in _ALIASES.items():
    globals()[_alias] = globals()[_cls]



def _adapt_values(data, steps):
    """adapt()'s data as one float64 array: an array, a list, or a dataset of batches (the features
    of (x, y) elements), at most `steps` batches of a dataset."""
    if hasattr(data, "numpy") and not isinstance(data, np.ndarray):
        data = data.numpy()
    if isinstance(data, (np.ndarray, list, tuple)):
        return np.asarray(data, dtype=np.float64)
    parts = []
    for i, batch in enumerate(data):
        if steps is not None and i >= steps:
            break
        if isinstance(batch, tuple):
            batch = batch[0]
        parts.append(np.asarray(batch.numpy() if hasattr(batch, "numpy") else batch, dtype=np.float64))
    if not parts:
        raise ValueError("Normalization.adapt: the dataset gave no batch")
    return np.concatenate(parts)


def _normalization_adapt(self, data, batch_size=None, steps=None):
    """Keras's Normalization.adapt: the mean and variance of `data` over every axis but the kept
    ones (`axis`, counting the batch axis; None: one value), as the layer's statistics. Before the
    layer is in a model they become its mean and variance arguments (so its config carries them);
    in a built model they are written into its mean, variance and count weights."""
    del batch_size  # Keras reads the data in batches of this size; the statistics are the same
    x = _adapt_values(data, steps)
    if x.ndim < 1 or x.shape[0] == 0:
        raise ValueError(f"Normalization.adapt: data of shape {x.shape} (expected at least one sample)")
    axis = self._args.get("axis", -1)
    kept = () if axis is None else tuple(axis) if isinstance(axis, (list, tuple)) else (axis,)
    kept = tuple(a + x.ndim if a < 0 else a for a in kept)
    if any(a < 1 or a >= x.ndim for a in kept):
        raise ValueError(f"Normalization.adapt: axis {axis} of data of shape {x.shape} (expected axes 1.."
                         f"{x.ndim - 1}, or negative, not the batch axis)")
    reduce = tuple(i for i in range(x.ndim) if i not in kept)
    mean, var = x.mean(axis=reduce).ravel(), x.var(axis=reduce).ravel()
    m = self._model() if self._model is not None else None
    if m is not None and self._weight_indices(m):
        count = np.array(x.size // max(mean.size, 1), dtype=np.int64)
        ws = self.get_weights()
        self.set_weights([mean.reshape(ws[0].shape), var.reshape(ws[1].shape)] +
                         ([count.astype(ws[2].dtype)] if len(ws) > 2 else []))
        return
    if m is not None or self._config is not None:
        raise ValueError(f"Normalization {self.name!r}: adapt before the layer is used in a model, or on a "
                         f"layer whose statistics are weights (made without mean and variance)")
    self._args["mean"], self._args["variance"] = mean.tolist(), var.tolist()


globals()["Normalization"].adapt = _normalization_adapt

# Layer classes by Keras class name, aliases included: what model_from_json and layers.deserialize use
CLASSES = {name: globals()[name] for name in list(_SPECS) + list(_ALIASES)}
CLASSES["InputLayer"] = InputLayer


def deserialize(config):
    """A layer from {"class_name", "config"}, as keras.layers.deserialize."""
    cls = CLASSES.get(config["class_name"])
    if cls is None:
        raise ValueError(f"unknown layer class {config['class_name']!r}")
    return cls.from_config(config["config"])


def get_layer_class(name):
    return CLASSES[name]


del _cls, _spec, _alias


# Keras's functional forms of the merge layers: keras.layers.add([a, b]) is Add()([a, b])
def add(inputs, **kwargs):
    return Add(**kwargs)(inputs)  # noqa: F821 (made above from _SPECS)


def subtract(inputs, **kwargs):
    return Subtract(**kwargs)(inputs)  # noqa: F821


def multiply(inputs, **kwargs):
    return Multiply(**kwargs)(inputs)  # noqa: F821


def average(inputs, **kwargs):
    return Average(**kwargs)(inputs)  # noqa: F821


def maximum(inputs, **kwargs):
    return Maximum(**kwargs)(inputs)  # noqa: F821


def minimum(inputs, **kwargs):
    return Minimum(**kwargs)(inputs)  # noqa: F821


def concatenate(inputs, axis=-1, **kwargs):
    return Concatenate(axis=axis, **kwargs)(inputs)  # noqa: F821


def dot(inputs, axes, normalize=False, **kwargs):
    return Dot(axes=axes, normalize=normalize, **kwargs)(inputs)  # noqa: F821


# Keras 2's submodules of keras.layers (from keras.layers.embeddings import Embedding, from
# keras.layers import recurrent; recurrent.LSTM): each is this module under the old name.
for _sub in ("core", "convolutional", "pooling", "local", "recurrent", "cudnn_recurrent", "normalization",
             "embeddings", "merge", "noise", "advanced_activations", "wrappers", "convolutional_recurrent"):
    sys.modules[f"{__name__}.{_sub}"] = sys.modules[__name__]
    globals()[_sub] = sys.modules[__name__]
del _sub

from tarantella.keras._text_vectorization import TextVectorization  # noqa: E402  (data-side, in NumPy)


class _Namespace:
    """A module-like namespace of classes of this module."""

    def __init__(self, **names):
        self.__dict__.update(names)


# Keras 2's keras.layers.experimental.preprocessing.<Layer> (TensorFlow 2.3-2.5 tutorials): the same classes
experimental = _Namespace(preprocessing=_Namespace(**{
    n: globals()[n] for n in ("CenterCrop", "Normalization", "RandomContrast", "RandomCrop", "RandomFlip",
                              "RandomHeight", "RandomRotation", "RandomTranslation", "RandomWidth", "RandomZoom",
                              "RandomBrightness", "Rescaling", "Resizing", "TextVectorization", "StringLookup",
                              "IntegerLookup", "CategoryEncoding", "Discretization", "Hashing") if n in globals()}))
