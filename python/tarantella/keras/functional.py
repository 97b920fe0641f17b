"""Functional graphs: the Keras 2 JSON of a graph of layer calls (tnt.keras.Input and layer
calls), which the C library builds models from, and the shapes of symbolic tensors."""
import json

from tarantella._core import C, ensure_init
from tarantella.keras import layers as L


# ---- Functional graphs -------------------------------------------------------------------------

def _tensor_refs(v):
    """The KerasTensors in a node's kwargs value."""
    if isinstance(v, L.KerasTensor):
        return [v]
    if isinstance(v, (list, tuple)):
        return [t for x in v for t in _tensor_refs(x)]
    return []


def _walk(outputs):
    """The (layer, node index) pairs the outputs depend on, and the InputLayers reached."""
    seen, order, inputs = set(), [], []
    stack = list(outputs)
    while stack:
        t = stack.pop()
        key = (id(t._layer), t._node_index)
        if key in seen:
            continue
        seen.add(key)
        order.append((t._layer, t._node_index))
        node = t._layer._nodes[t._node_index]
        if isinstance(t._layer, L.InputLayer):
            inputs.append(t)
            continue
        stack.extend(node.inputs)
        for v in node.kwargs.values():
            stack.extend(_tensor_refs(v))
    return order, inputs


def _layer_entry(layer):
    from tarantella.keras.engine import Model
    if isinstance(layer, Model):  # a model called as a layer
        cfg = json.loads(layer.to_json())
        return {"class_name": cfg["class_name"], "config": cfg["config"], "name": layer.name}
    return {"class_name": layer.class_name, "config": layer._json_config(), "name": layer.name}


def functional_json(inputs, outputs, name):
    """Keras 2 Functional JSON of the graph from inputs to outputs."""
    pairs, reached = _walk(outputs)
    declared = {id(t._layer) for t in inputs}
    for t in reached:
        if id(t._layer) not in declared:
            raise ValueError(f"Graph disconnected: the outputs depend on input {t._layer.name!r}, which is not "
                             f"among the model's inputs {[t._layer.name for t in inputs]}")
    # per layer, its nodes in this graph in call order, renumbered (a model counts its own node first)
    nodes = {}
    for layer, ni in pairs:
        nodes.setdefault(id(layer), (layer, []))[1].append(ni)
    renum = {}
    from tarantella.keras.engine import Model
    for layer, nis in nodes.values():
        base = 1 if isinstance(layer, Model) else 0
        for k, ni in enumerate(sorted(nis, key=lambda i: layer._nodes[i].order)):
            renum[(id(layer), ni)] = base + k

    def ref(t):
        return [t._layer.name, renum[(id(t._layer), t._node_index)], t._tensor_index]

    names = {}
    entries = []
    for layer, nis in sorted(nodes.values(), key=lambda e: min(e[0]._nodes[i].order for i in e[1])):
        if names.setdefault(layer.name, id(layer)) != id(layer):
            raise ValueError(f"two layers of the model are named {layer.name!r}")
        e = _layer_entry(layer)
        inbound = []
        if not isinstance(layer, L.InputLayer):
            for ni in sorted(nis, key=lambda i: layer._nodes[i].order):
                node = layer._nodes[ni]
                refs = [ref(t) + [{}] for t in node.inputs]
                for k, v in node.kwargs.items():
                    refs[0][3][k] = ref(v) if isinstance(v, L.KerasTensor) else v
                inbound.append(refs)
        e["inbound_nodes"] = inbound
        entries.append(e)
    return json.dumps({"class_name": "Functional", "config": {
        "name": name, "layers": entries, "input_layers": [ref(t) for t in inputs],
        "output_layers": [ref(t) for t in outputs]}})


def tensor_shape(t):
    """Shape of a symbolic tensor (without batch), from the library's build of its subgraph."""
    _, reached = _walk([t])
    ensure_init()
    h = C.model_from_json(functional_json(reached[::-1], [t], "shape_probe"))
    return h.output_shapes()[0]


