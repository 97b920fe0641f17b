"""tnt.keras.wrappers: Keras 2's scikit-learn wrappers (keras.wrappers.scikit_learn)."""
from tarantella.keras.wrappers import scikit_learn  # noqa: F401
