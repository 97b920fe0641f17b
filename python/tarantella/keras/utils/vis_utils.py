"""keras.utils.vis_utils (Keras 2's module name)."""
from tarantella.keras.utils._plot import model_to_dot, plot_model  # noqa: F401
