#!/usr/bin/env python3
"""The Tarantella quick start in Python: LeNet-5 on Fashion-MNIST, data-parallel.

    tarantella -n 2 -- python3 examples/python/quick_start.py --batch_size=64 --number_epochs=5

It is the quick start of the Tarantella documentation with the TensorFlow imports replaced by
tarantella's (tnt.keras for keras, tnt.data for tf.data), and it takes the flags of the C example
(build/bin/lenet5 --help): on the same flags both print the same figures. The data are the IDX files
of Debian's dataset-fashion-mnist.
"""
import argparse
import time

import numpy as np

import tarantella as tnt
from tarantella import keras

tnt.init()


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batch_size", type=int, default=64, help="the global batch size")
    p.add_argument("--learning_rate", type=float, default=0.01)
    p.add_argument("--number_epochs", type=int, default=1)
    p.add_argument("--train_size", type=int, default=60000)
    p.add_argument("--val_size", type=int, default=0)
    p.add_argument("--test_size", type=int, default=10000)
    p.add_argument("--shuffle_seed", type=int, default=42)
    p.add_argument("--data_dir", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--optimizer", default="sgd", help="sgd, adam, rmsprop, ...")
    p.add_argument("--momentum", type=float, default=0.0)
    p.add_argument("--verbose", type=int, default=1)
    p.add_argument("--history_file", help="write every epoch's figures and the test figures, as lenet5 does")
    args = p.parse_args()
    if args.train_size + args.val_size > 60000:
        p.error(f"--train_size {args.train_size} + --val_size {args.val_size} exceeds the 60000 training images")
    return args


def lenet5_model_generator():
    """The user's existing Keras model."""
    layers = keras.layers
    return keras.Sequential([
        keras.Input(shape=(28, 28, 1), name="input"),
        layers.Conv2D(20, 5, padding="same", activation="relu"),
        layers.MaxPooling2D(pool_size=(2, 2)),
        layers.Conv2D(50, 5, padding="same", activation="relu"),
        layers.MaxPooling2D(pool_size=(2, 2)),
        layers.Flatten(),
        layers.Dense(500, activation="relu"),
        layers.Dense(10, activation="softmax"),
    ], name="lenet5")


def fashion_mnist_as_np_arrays(args):
    (x_train, y_train), (x_test, y_test) = keras.datasets.fashion_mnist.load_data(args.data_dir)
    scale = np.float32(1.0) / np.float32(255.0)  # pixels in [0, 1], as lenet5 scales them

    def prepare(x, y):
        return x.reshape(-1, 28, 28, 1).astype(np.float32) * scale, y.astype(np.float32)

    n, v = args.train_size, args.val_size
    return (prepare(x_train[:n], y_train[:n]), prepare(x_train[n:n + v], y_train[n:n + v]),
            prepare(x_test[:args.test_size], y_test[:args.test_size]))


def optimizer(args):
    cls = type(keras.optimizers.get(args.optimizer))
    if "momentum" in cls._defaults:
        return cls(learning_rate=args.learning_rate, momentum=args.momentum)
    return cls(learning_rate=args.learning_rate)


def main():
    args = parse_args()

    # Create the Tarantella model from a Keras model: the line that makes it data-parallel
    model = tnt.Model(lenet5_model_generator())

    # Compile the Tarantella model (as with Keras)
    model.compile(optimizer=optimizer(args),
                  loss=keras.losses.SparseCategoricalCrossentropy(),
                  metrics=[keras.metrics.SparseCategoricalAccuracy()])
    if args.verbose and tnt.is_master_rank():
        model.summary()

    # Load Fashion-MNIST (as with Keras)
    (x_train, y_train), (x_val, y_val), (x_test, y_test) = fashion_mnist_as_np_arrays(args)

    train_dataset = tnt.data.Dataset.from_tensor_slices((x_train, y_train))
    train_dataset = train_dataset.shuffle(len(x_train), args.shuffle_seed)
    train_dataset = train_dataset.batch(args.batch_size)  # the global batch size
    train_dataset = train_dataset.prefetch(tnt.data.experimental.AUTOTUNE)
    val_dataset = None
    if args.val_size > 0:
        val_dataset = tnt.data.Dataset.from_tensor_slices((x_val, y_val)).batch(args.batch_size)
    test_dataset = tnt.data.Dataset.from_tensor_slices((x_test, y_test)).batch(args.batch_size)

    # Train the Tarantella model (as with Keras)
    start, cpu_start = time.perf_counter(), time.process_time()
    history = model.fit(train_dataset, validation_data=val_dataset, epochs=args.number_epochs,
                        verbose=args.verbose)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu_start

    # Evaluate the Tarantella model (as with Keras)
    test = {}
    if args.test_size > 0:
        test = model.evaluate(test_dataset, verbose=args.verbose, return_dict=True)
        if tnt.is_master_rank():
            print(f"test loss {test['loss']:.4f}, test accuracy {100 * test['sparse_categorical_accuracy']:.2f}% "
                  f"({args.test_size} images, {tnt.get_size()} rank(s))")
    if tnt.is_master_rank():
        samples = args.number_epochs * args.train_size
        print(f"training: {samples / seconds:.1f} samples/s, {samples / cpu:.1f} samples per CPU second")
    if args.history_file and tnt.is_master_rank():
        with open(args.history_file, "w") as f:
            for name, values in history.history.items():
                for epoch, value in enumerate(values):
                    f.write(f"{name} {epoch} {value!r}\n")
            for name, value in test.items():
                f.write(f"{name} -1 {value!r}\n")


if __name__ == "__main__":
    main()
