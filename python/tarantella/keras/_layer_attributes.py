"""Keras's layer attributes that Tarantella's layers read from their arguments (layers.Layer's
output_shape, input_shape and __getattr__): shapes of a layer's calls, constructor arguments in
the types Keras keeps them."""
from tarantella.keras import layers


def shape_of(layer, tensors, what):
    if isinstance(tensors, list):
        return [tuple(t.shape) for t in tensors]
    if len(layer._nodes) > 1:  # Keras: defined when every call has the same shape
        shapes = {tuple((n.inputs[0] if what == "input" else layers.KerasTensor(layer, i)).shape)
                  for i, n in enumerate(layer._nodes)}
        if len(shapes) > 1:
            raise AttributeError(f"the layer {layer.name!r} has several inbound nodes with different {what} shapes, so "
                                 f"its {what}_shape is ill-defined (as Keras says)")
    return tuple(tensors.shape)


def keras_attribute(class_name, name, value):
    """An argument as Keras's layer attribute: activations as functions, sizes as tuples of the rank."""
    if name in ("activation", "recurrent_activation"):
        from tarantella.keras import activations
        return activations.get(value)
    if name in ("kernel_size", "strides", "pool_size", "dilation_rate", "size") and isinstance(value, int):
        rank = next((int(c) for c in ("1", "2", "3") if f"{c}D" in (class_name or "")), 1)
        return (value,) * rank
    if isinstance(value, list):
        return tuple(value)
    if name == "padding" and isinstance(value, str):
        return value.lower()
    return value
