"""tnt.keras.datasets: Keras's load_data() for the data sets Debian packages (no downloads)."""
from tarantella.keras.datasets import fashion_mnist, mnist  # noqa: F401
