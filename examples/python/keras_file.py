#!/usr/bin/env python3
"""Load a model saved by Keras (.h5 or .keras), train it data-parallel, save it again.

    tarantella -n 2 -- python3 examples/python/keras_file.py MODEL.h5 --x X.npy --y Y.npy \
        --epochs 2 --batch_size 32 --save trained.keras

A model saved compiled trains with its own loss, optimizer (and optimizer state) and metrics, as
Keras's load_model(MODEL).fit does; one saved without a training configuration needs --loss and
--optimizer. Without --x the data are synthetic: inputs in [-1, 1) and targets of the output's
shape and of the loss's kind. The saved file is a Keras 3 zip when the name ends in .keras, else
Keras 2 HDF5; Keras reads both.
"""
import argparse

import numpy as np

import tarantella as tnt
from tarantella import keras

tnt.init()


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", help="a Keras .h5 or .keras file (model.save)")
    p.add_argument("--x", help="inputs, NPY (samples first)")
    p.add_argument("--y", help="targets, NPY")
    p.add_argument("--samples", type=int, default=256, help="synthetic samples without --x")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch_size", type=int, default=32, help="the global batch size")
    p.add_argument("--loss", help="for a model saved without a training configuration")
    p.add_argument("--optimizer", default=None, help="for a model saved without a training configuration")
    p.add_argument("--learning_rate", type=float, default=None)
    p.add_argument("--validation_split", type=float, default=0.0)
    p.add_argument("--save", help="where to save the trained model (.keras or .h5)")
    p.add_argument("--verbose", type=int, default=1)
    return p.parse_args()


def synthetic(model, loss, n):
    """Inputs in [-1, 1) and targets that fit the loss, the same on every rank (seeded)."""
    rng = np.random.default_rng(42)
    shapes = [s[1:] for s in (model.input_shape if isinstance(model.input_shape, list) else [model.input_shape])]
    xs = [rng.uniform(-1, 1, (n,) + tuple(s)).astype(np.float32) for s in shapes]
    out = model.output_shape[1:]
    if loss == "sparse_categorical_crossentropy":
        y = rng.integers(0, out[-1], (n,) + tuple(out[:-1])).astype(np.float32)
    elif loss == "categorical_crossentropy":
        y = np.eye(out[-1], dtype=np.float32)[rng.integers(0, out[-1], (n,) + tuple(out[:-1]))]
    elif loss == "binary_crossentropy":
        y = rng.integers(0, 2, (n,) + tuple(out)).astype(np.float32)
    else:
        y = rng.standard_normal((n,) + tuple(out)).astype(np.float32)
    return (xs if len(xs) > 1 else xs[0]), y


def main():
    args = parse_args()
    model = tnt.Model(keras.models.load_model(args.model))  # data-parallel
    if model.optimizer is None or args.loss or args.optimizer:
        if not (args.loss and (args.optimizer or model.optimizer)):
            raise SystemExit(f"{args.model} has no training configuration: give --loss and --optimizer")
        opt = keras.optimizers.get(args.optimizer) if args.optimizer else model.optimizer
        model.compile(optimizer=opt, loss=args.loss or model.loss, metrics=model.metrics_names[1:])
    if args.learning_rate is not None:
        model.optimizer.learning_rate = args.learning_rate
    if args.verbose and tnt.is_master_rank():
        model.summary()
        print(f"loss {model.loss}, optimizer {type(model.optimizer).__name__} (learning rate "
              f"{model.optimizer.learning_rate:g}, iteration {model.optimizer.iterations}), "
              f"{tnt.get_size()} rank(s), global batch {args.batch_size}")

    if args.x:
        x = np.load(args.x)
        y = np.load(args.y) if args.y else None
    else:
        x, y = synthetic(model, model.loss, args.samples)
    history = model.fit(x, y, batch_size=args.batch_size, epochs=args.epochs,
                        validation_split=args.validation_split, verbose=args.verbose)
    if tnt.is_master_rank():
        print("history:", {k: [round(v, 6) for v in vs] for k, vs in history.history.items()})
    if args.save:
        model.save(args.save)  # the master writes; every rank calls it
        if tnt.is_master_rank():
            print(f"saved {args.save}")


if __name__ == "__main__":
    main()
