"""numpy/pandas values -> plain Python values (for JSON and message templates)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd


def plain(value):
    """numpy/pandas scalars -> plain Python, recursively through dicts, lists and tuples;
    NaN, NA and None -> None."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, (np.floating, float)):
        f = float(value)
        return None if math.isnan(f) else f
    if isinstance(value, np.bool_):
        return bool(value)
    if value is pd.NA or value is None:
        return None
    return value
