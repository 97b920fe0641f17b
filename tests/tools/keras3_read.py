#!/usr/bin/env python3
"""keras3_read.py FILE.keras OUT.txt: an independent reader of the Keras 3 .keras layout (zipfile +
h5py, no Tarantella code), run by test_keras_zip.c on the files Tarantella writes.

Follows keras/src/saving/saving_lib.py: each layer of model.layers (Sequential: without its
InputLayer) has its variables under layers/<to_snake_case(class)>[_N]/vars/<i>, N counting the
earlier siblings of the same class; recurrent layers in their cell, Bidirectional in
forward_layer/backward_layer, TimeDistributed in layer. Writes one line per variable:
"<layer name> <index> <h5 path> <shape as d1xd2...> <sum>", in layer order. Exit status 2 when a
path the rules give is missing or holds other variables than expected; 77 without h5py."""
import io
import json
import re
import sys
import zipfile

try:
    import h5py
except ImportError:
    sys.exit(77)

RECURRENT = {"LSTM", "GRU", "SimpleRNN"}


def to_snake_case(name):  # keras/src/utils/naming.py
    name = re.sub(r"\W+", "", name)
    name = re.sub("(.)([A-Z][a-z]+)", r"\1_\2", name)
    return re.sub("([a-z])([A-Z])", r"\1_\2", name).lower()


def var_groups(layer):
    """The groups (relative to the layer's) holding its variables, in the order they come."""
    cls = layer["class_name"]
    if cls == "Bidirectional":
        inner = layer["config"]["layer"]["class_name"]
        cell = "/cell" if inner in RECURRENT else ""
        return ["forward_layer" + cell, "backward_layer" + cell]
    if cls == "TimeDistributed":
        inner = layer["config"]["layer"]["class_name"]
        return ["layer/cell" if inner in RECURRENT else "layer"]
    return ["cell"] if cls in RECURRENT else [""]


def main(path, out):
    with zipfile.ZipFile(path) as z:
        names = set(z.namelist())
        for required in ("metadata.json", "config.json", "model.weights.h5"):
            if required not in names:
                print(f"{path}: no {required}", file=sys.stderr)
                return 2
        meta = json.loads(z.read("metadata.json"))
        config = json.loads(z.read("config.json"))
        weights = h5py.File(io.BytesIO(z.read("model.weights.h5")), "r")
    if not meta.get("keras_version", "").startswith("3."):
        print(f"{path}: metadata keras_version {meta.get('keras_version')!r}", file=sys.stderr)
        return 2
    layers = config["config"]["layers"]
    if config["class_name"] == "Sequential":
        layers = [l for l in layers if l["class_name"] != "InputLayer"]
    used = {}
    lines = []
    for layer in layers:
        base = to_snake_case(layer["class_name"])
        used[base] = used.get(base, -1) + 1
        group = "layers/" + (base if used[base] == 0 else f"{base}_{used[base]}")
        if group not in weights or "vars" not in weights[group]:
            print(f"{path}: no {group}/vars for layer {layer['config']['name']}", file=sys.stderr)
            return 2
        index = 0
        for sub in var_groups(layer):
            vars_path = f"{group}/{sub}/vars" if sub else f"{group}/vars"
            if vars_path not in weights:
                print(f"{path}: no {vars_path}", file=sys.stderr)
                return 2
            v = weights[vars_path]
            keys = sorted(v.keys(), key=int)
            if keys != [str(i) for i in range(len(keys))]:
                print(f"{path}: {vars_path} holds {keys}", file=sys.stderr)
                return 2
            for k in keys:
                a = v[k][()]
                shape = "x".join(str(d) for d in a.shape) or "scalar"
                lines.append(f"{layer['config']['name']} {index} {vars_path}/{k} {shape} {float(a.sum()):.9g}")
                index += 1
    if config.get("compile_config") and "optimizer/vars/0" not in weights:
        print(f"{path}: compiled, but no optimizer/vars/0", file=sys.stderr)
        return 2
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
