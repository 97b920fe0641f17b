"""KerasHub's layers that libtarantella runs (keras_hub.layers; formerly keras_nlp.layers):

    from tarantella import keras_hub
    x = keras.layers.Add()([x, keras_hub.layers.PositionEmbedding(sequence_length=128)(x)])
"""
import types

from tarantella.keras import layers as _layers

layers = types.SimpleNamespace(PositionEmbedding=_layers.PositionEmbedding)

__all__ = ["layers"]
