"""Tables that travel between processes (a rank's part, parts.py) and come back together:
text columns sent as categoricals (each distinct text once) and concatenated again, in
their own types or as categoricals of every frame's categories."""

from __future__ import annotations

import numpy as np
import pandas as pd
from pandas.api.types import union_categoricals


def compact(t: pd.DataFrame) -> pd.DataFrame:
    """``t`` (index reset) with its text columns as categoricals: each distinct name is
    sent once, not once per row (expand restores the columns' types after the merge)."""
    t = t.reset_index(drop=True)
    text = {c: str(d) for c, d in t.dtypes.items()
            if d is np.dtype(object) or isinstance(d, pd.StringDtype)}  # fmt: skip
    if not text or t.empty:
        return t
    out = t.astype({c: "category" for c in text})
    out.attrs["text_columns"] = text
    return out


def expand(t: pd.DataFrame) -> pd.DataFrame:
    """The text columns that compact made categoricals, back in their own types."""
    text = t.attrs.get("text_columns")
    if not text:
        return t
    out = t.astype({c: (object if d == "object" else d) for c, d in text.items() if c in t})
    out.attrs = {}
    return out


def concatenated(frames: list[pd.DataFrame], categorical: bool = False) -> pd.DataFrame:
    """The frames one after another (the empty ones only give their columns), text
    columns in their own types again (expand), or with ``categorical`` as categoricals
    of all the frames' categories (the comm ops: millions of rows in a large job)."""
    if categorical:
        return _concatenated_categoricals(frames)
    frames = [expand(f) for f in frames]
    full = [f for f in frames if len(f)]
    if not full:
        return frames[0] if frames else pd.DataFrame()
    return pd.concat(full, ignore_index=True) if len(full) > 1 else full[0].reset_index(drop=True)


def _concatenated_categoricals(frames: list[pd.DataFrame]) -> pd.DataFrame:
    full = [f for f in frames if len(f)]
    if len(full) < 2:
        return concatenated(frames)
    cats = [c for c in full[0] if isinstance(full[0][c].dtype, pd.CategoricalDtype)]
    out = pd.concat([f.drop(columns=cats) for f in full], ignore_index=True)
    for c in cats:
        columns = [f[c] for f in full]
        if len({str(x.cat.categories.dtype) for x in columns}) > 1:
            # (a frame whose column is all missing has object categories, the others str:
            # union_categoricals needs one dtype)
            columns = [pd.Series(pd.Categorical.from_codes(x.cat.codes, pd.Index(
                x.cat.categories, dtype=object))) for x in columns]  # fmt: skip
        out[c] = union_categoricals(columns)
    out.attrs = {}
    return out[list(full[0].columns)]
