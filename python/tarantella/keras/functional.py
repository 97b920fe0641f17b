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
        if not layer.trainable:  # frozen in the model that calls it (Keras 3's key; Keras 2 its layers')
            cfg["config"]["trainable"] = False
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




def _loaded_graph(model):
    """The graph of a model read by the library (a file, JSON, a config): its layers called on new
    Inputs as the Keras JSON's inbound nodes say, so that model.input and layer.output make new
    Functional models (feature extractors) as in Keras. Cached on the model."""
    g = model.__dict__.get("_loaded_graph_cache")
    if g is not None:
        return g
    cfg = json.loads(model._handle().to_json())["config"]
    entries = [e for e in cfg.get("layers", []) if e.get("class_name") != "InputLayer"]
    if any(e.get("class_name") in ("Functional", "Model", "Sequential") for e in entries):
        raise NotImplementedError(f"model {model.name!r}: inputs/outputs of a loaded model with nested models are "
                                  f"not supported")
    by_name = {layer.name: layer for layer in model._layers}
    tensors = {}
    for (name, ni, ti), shape in zip(cfg["input_layers"], model._handle().input_shapes()):
        tensors[(name, ni, ti)] = L.Input(shape=tuple(shape), name=name)

    def resolve(v):
        if isinstance(v, list) and len(v) >= 3 and isinstance(v[0], str) and (v[0], v[1], v[2]) in tensors:
            return tensors[(v[0], v[1], v[2])]
        if isinstance(v, list) and v and all(isinstance(x, list) for x in v):
            return [resolve(x) for x in v]
        return v

    done, progress = set(), True
    while progress:
        progress = False
        for e in entries:
            name = e.get("name") or e["config"]["name"]
            for ni, node in enumerate(e.get("inbound_nodes", [])):
                if (name, ni) in done or not all((r[0], r[1], r[2]) in tensors for r in node):
                    continue
                ins = [tensors[(r[0], r[1], r[2])] for r in node]
                kwargs = {k: resolve(v) for k, v in (node[0][3] if len(node[0]) > 3 else {}).items()}
                out = by_name[name](ins if len(ins) > 1 else ins[0], **kwargs)
                for ti, t in enumerate(out if isinstance(out, list) else [out]):
                    tensors[(name, ni, ti)] = t
                done.add((name, ni))
                progress = True
    outs = [tensors[(n, ni, ti)] for n, ni, ti in cfg["output_layers"]]
    g = model.__dict__["_loaded_graph_cache"] = ([tensors[tuple(r[:3])] for r in cfg["input_layers"]], outs)
    return g
