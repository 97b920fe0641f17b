"""keras.utils.model_to_dot and plot_model on pydot and Graphviz (Debian's python3-pydot and
graphviz): one node per layer ("name: ClassName", with shapes and activations on request), an
edge per connection of the model's Keras config."""
import os
import re


def _pydot():
    try:
        import pydot
    except ImportError:
        raise ImportError("plot_model needs pydot and Graphviz: apt-get install python3-pydot graphviz") from None
    return pydot


def _output_shapes(model):
    """Layer name -> output shape text, read from the model's summary table."""
    try:
        text = model._handle().summary()
    except Exception:  # an unbuilt model: no shapes to show
        return {}
    shapes = {}
    for line in text.splitlines():
        m = re.match(r"^\s*(\S+) \((\w+)\)\s*(\[.*?\]|\(.*?\))", line)
        if m:
            shapes[m.group(1)] = m.group(3)
    return shapes


def _layers_and_edges(config, class_name):
    layers = config["layers"]
    if class_name == "Sequential":
        nodes = [(e["config"]["name"], e["class_name"], e["config"]) for e in layers]
        return nodes, [(a[0], b[0]) for a, b in zip(nodes, nodes[1:])]
    nodes, edges = [], []
    for e in layers:
        name = e.get("name", e["config"].get("name"))
        nodes.append((name, e["class_name"], e["config"]))
        for node in e.get("inbound_nodes", []):
            refs = node.get("args", node) if isinstance(node, dict) else node
            for ref in _refs(refs):
                edges.append((ref, name))
    return nodes, edges


def _refs(v):
    """Names of the inbound layers in a Keras 2 node ([[name, node, tensor, kwargs], ...]) or a
    Keras 3 one ({"args": [{"class_name": "__keras_tensor__", "config": {"keras_history": ...}}]})."""
    if isinstance(v, dict):
        if v.get("class_name") == "__keras_tensor__":
            return [v["config"]["keras_history"][0]]
        return [r for x in v.values() for r in _refs(x)]
    if isinstance(v, (list, tuple)):
        if len(v) >= 3 and isinstance(v[0], str) and isinstance(v[1], int):
            return [v[0]]
        return [r for x in v for r in _refs(x)]
    return []


def model_to_dot(model, show_shapes=False, show_dtype=False, show_layer_names=True, rankdir="TB",
                 expand_nested=False, dpi=96, subgraph=False, layer_range=None, show_layer_activations=False,
                 show_trainable=False):
    """A pydot.Dot graph of the model."""
    pydot = _pydot()
    class_name = model.class_name() if callable(getattr(model, "class_name", None)) else type(model).__name__
    nodes, edges = _layers_and_edges(model.get_config(), class_name)
    if layer_range is not None:
        names = [n for n, _, _ in nodes]
        lo, hi = (names.index(layer_range[0]), names.index(layer_range[1])) if all(
            r in names for r in layer_range) else (None, None)
        if lo is None:
            raise ValueError(f"plot_model: layer_range {layer_range} names layers the model does not have")
        keep = set(names[lo:hi + 1])
        nodes = [n for n in nodes if n[0] in keep]
        edges = [e for e in edges if e[0] in keep and e[1] in keep]
    shapes = _output_shapes(model) if show_shapes else {}
    dot = pydot.Dot()
    dot.set("rankdir", rankdir)
    dot.set("concentrate", True)
    dot.set("dpi", dpi)
    dot.set_node_defaults(shape="record")
    for name, cls, cfg in nodes:
        label = f"{name}: {cls}" if show_layer_names else cls
        if show_layer_activations and "activation" in cfg:
            label += f"|{cfg['activation']}"
        if show_dtype:
            label += f"|{cfg.get('dtype', 'float32')}"
        if show_shapes:
            shape = shapes.get(name, "?")
            label += "|output: " + shape.replace("(", "\\(").replace(")", "\\)").replace("[", "\\[").replace("]", "\\]")
        if show_trainable:
            label += f"|trainable: {'T' if cfg.get('trainable', True) else 'F'}"
        dot.add_node(pydot.Node(_node_id(name), label=label))
    for a, b in edges:
        dot.add_edge(pydot.Edge(_node_id(a), _node_id(b)))
    return dot


def _node_id(name):
    return '"' + str(name).replace('"', "'") + '"'


def plot_model(model, to_file="model.png", show_shapes=False, show_dtype=False, show_layer_names=True, rankdir="TB",
               expand_nested=False, dpi=96, layer_range=None, show_layer_activations=False, show_trainable=False):
    """Writes the model's graph to to_file (the format from its extension: png, svg, pdf, ...)."""
    dot = model_to_dot(model, show_shapes=show_shapes, show_dtype=show_dtype, show_layer_names=show_layer_names,
                       rankdir=rankdir, expand_nested=expand_nested, dpi=dpi, layer_range=layer_range,
                       show_layer_activations=show_layer_activations, show_trainable=show_trainable)
    to_file = os.fspath(to_file)
    extension = os.path.splitext(to_file)[1][1:] or "png"
    try:
        dot.write(to_file, format=extension)
    except FileNotFoundError as e:  # pydot reports a missing `dot` program so
        raise ImportError(f"plot_model: Graphviz's `dot` program is missing (apt-get install graphviz): {e}") from e
    return None
