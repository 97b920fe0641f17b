"""keras.preprocessing.sequence: pad_sequences and TimeseriesGenerator (Keras 2's formulas)."""
import numpy as np

from tarantella.keras.utils._arrays import pad_sequences  # noqa: F401
from tarantella.keras.utils._sequence import Sequence


class TimeseriesGenerator(Sequence):
    """Batches of windows data[row - length : row : sampling_rate] with the targets targets[row],
    rows start_index + length, + stride, ... up to end_index."""

    def __init__(self, data, targets, length, sampling_rate=1, stride=1, start_index=0, end_index=None,
                 shuffle=False, reverse=False, batch_size=128):
        if len(data) != len(targets):
            raise ValueError(f"TimeseriesGenerator: data and targets have different lengths ({len(data)} and "
                             f"{len(targets)})")
        self.data, self.targets = data, targets
        self.length, self.sampling_rate, self.stride = int(length), int(sampling_rate), int(stride)
        self.start_index = int(start_index) + self.length
        self.end_index = len(data) - 1 if end_index is None else int(end_index)
        self.shuffle, self.reverse, self.batch_size = shuffle, reverse, int(batch_size)
        if self.start_index > self.end_index:
            raise ValueError(f"TimeseriesGenerator: start_index + length ({self.start_index}) is after end_index "
                             f"({self.end_index}): no window fits")

    def __len__(self):
        return (self.end_index - self.start_index + self.batch_size * self.stride) // (self.batch_size * self.stride)

    def __getitem__(self, index):
        if self.shuffle:
            rows = np.random.randint(self.start_index, self.end_index + 1, size=self.batch_size)
        else:
            i = self.start_index + self.batch_size * self.stride * index
            rows = np.arange(i, min(i + self.batch_size * self.stride, self.end_index + 1), self.stride)
        samples = np.array([self.data[row - self.length:row:self.sampling_rate] for row in rows])
        targets = np.array([self.targets[row] for row in rows])
        return (samples[:, ::-1, ...], targets) if self.reverse else (samples, targets)


def make_sampling_table(size, sampling_factor=1e-5):
    """Keras's word2vec-style sampling probabilities of the size most frequent words (Zipf)."""
    gamma = 0.577
    rank = np.arange(size)
    rank[0] = 1
    inv_fq = rank * (np.log(rank) + gamma) + 0.5 - 1.0 / (12.0 * rank)
    f = sampling_factor * inv_fq
    return np.minimum(1.0, f / np.sqrt(f))
