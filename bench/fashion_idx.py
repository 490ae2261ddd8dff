"""Debian's Fashion-MNIST IDX files as numpy arrays, for the PyTorch reference
scripts beside this one (train_pytorch.py, eval_pytorch.py)."""
import gzip

import numpy as np

ROOT = "/usr/share/datasets/fashion-mnist"


def read_idx(name):
    """The array in ROOT/name.gz (uint8, its IDX dimensions)."""
    with gzip.open(f"{ROOT}/{name}.gz", "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)
