"""Models that override train_step / compute_loss (Keras's "customizing what happens in fit"):
fit runs Keras's loop in Python around the user's step, whose tape, model call and update run in
C. Reference: the built-in fit of the same model, data and seed."""
import numpy as np

import tarantella.tensorflow as tf
from tarantella import keras
from tarantella.keras import layers

RNG = np.random.default_rng(11)
X = RNG.normal(size=(48, 5)).astype(np.float32)
Y = RNG.integers(0, 4, size=(48,))


class StepModel(keras.Model):
    def train_step(self, data):  # Keras 2's guide, as written
        x, y = data
        with tf.GradientTape() as tape:
            y_pred = self(x, training=True)
            loss = self.compiled_loss(y, y_pred, regularization_losses=self.losses)
        gradients = tape.gradient(loss, self.trainable_variables)
        self.optimizer.apply_gradients(zip(gradients, self.trainable_variables))
        self.compiled_metrics.update_state(y, y_pred)
        return {m.name: m.result() for m in self.metrics}


class LossModel(keras.Model):
    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        return super().compute_loss(x, y, y_pred, sample_weight) + 0.0 * tf.reduce_sum(y_pred)


def build(cls, w0=None):
    keras.utils.set_random_seed(2)
    inp = keras.Input(shape=(5,))
    h = layers.Dense(8, activation="relu", kernel_regularizer=keras.regularizers.L2(0.01))(inp)
    m = cls(inp, layers.Dense(4, activation="softmax")(h))
    if w0 is not None:
        m.set_weights(w0)
    m.compile(optimizer=keras.optimizers.Adam(0.01), loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    return m


def test_train_step_and_compute_loss_equal_the_builtin_fit():
    ref = build(keras.Model)
    w0 = ref.get_weights()
    h_ref = ref.fit(X, Y, batch_size=12, epochs=2, shuffle=False, verbose=0)
    for cls in (StepModel, LossModel):
        m = build(cls, w0)
        h = m.fit(X, Y, batch_size=12, epochs=2, shuffle=False, verbose=0)
        assert sorted(h.history) == ["accuracy", "loss"]
        for a, b in zip(m.get_weights(), ref.get_weights()):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
        # the loss tracker's mean over the epoch's batches (equal batches: the sample mean)
        np.testing.assert_allclose(h.history["loss"], h_ref.history["loss"], rtol=1e-5)
        np.testing.assert_allclose(h.history["accuracy"], h_ref.history["accuracy"], rtol=1e-6)
        logs = m.evaluate(X, Y, batch_size=12, verbose=0, return_dict=True)
        want = ref.evaluate(X, Y, batch_size=12, verbose=0, return_dict=True)
        np.testing.assert_allclose(logs["loss"], want["loss"], rtol=1e-5)
        np.testing.assert_allclose(logs["accuracy"], want["accuracy"], rtol=1e-6)
        assert int(m.optimizer.iterations) == 8
