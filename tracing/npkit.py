"""Small numpy helpers the analysis uses on every span.

Keys here are small non-negative integers (dense ids combined), so counting them with
``bincount`` beats ``np.unique`` (a hash table or a sort) by 5-40x; past ``DENSE_LIMIT``
possible keys the sort is used instead.
"""

from __future__ import annotations

import numpy as np

DENSE_LIMIT = 1 << 22


def distinct(keys: np.ndarray, size: int) -> np.ndarray:
    """The distinct values of ``keys`` (all in ``0..size-1``), sorted."""
    if not len(keys):
        return np.zeros(0, np.int64)
    if size <= DENSE_LIMIT:
        return np.flatnonzero(np.bincount(keys, minlength=size))
    return np.unique(keys, return_inverse=True)[0]


def grouped(keys: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """The distinct values of ``keys`` (sorted) and each key's index among them."""
    if not len(keys):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    if size <= DENSE_LIMIT:
        present = np.flatnonzero(np.bincount(keys, minlength=size))
        index = np.zeros(size, np.int64)
        index[present] = np.arange(len(present))
        return present, index[keys]
    unique, inverse = np.unique(keys, return_inverse=True)
    return unique, inverse.reshape(-1)
