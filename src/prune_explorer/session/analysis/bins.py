"""The bins of every importance histogram (the magnitudes view's, the why view's input norms).

Examples
--------
>>> log_edges(0.01, 1.0, 2).tolist()
[0.01, 0.1, 1.0]
"""

from __future__ import annotations

import numpy as np

__all__ = ["log_edges"]


def log_edges(low: float, high: float, bins: int) -> np.ndarray:
    """``bins + 1`` log-spaced edges from ``low`` to ``high`` (positive), widened around a
    single value: the bins of every importance histogram.

    Examples
    --------
    >>> log_edges(0.01, 1.0, 2).tolist()
    [0.01, 0.1, 1.0]
    >>> log_edges(2.0, 2.0, 1).round(3).tolist()
    [1.333, 3.0]
    """
    if high <= low:
        low, high = low / 1.5, high * 1.5
    return np.geomspace(low, high, bins + 1)
