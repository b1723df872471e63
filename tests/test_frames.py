"""Tables sent between processes and concatenated back (frames.py)."""

import numpy as np
import pandas as pd

from advisor.frames import compact, concatenated


def test_a_rank_whose_column_is_all_missing_joins_the_others():
    # the comm ops of a rank without NVTX ranges have no region at all (object categories
    # once compacted), another rank's have texts (str categories): concatenated as
    # categoricals, each row keeps its value (this raised a TypeError in union_categoricals)
    # (as compact sends them in a library user's session, where pandas 3 keeps texts in its
    # own str dtype; the command line makes texts Python objects, advisor.launch)
    step = pd.Index(["step"], dtype=pd.StringDtype(na_value=np.nan))
    empty = pd.Index([], dtype=object)
    with_ranges = pd.DataFrame({"region": pd.Categorical.from_codes([0, -1, 0], step),
                                "device": [0, 0, 0]})  # fmt: skip
    without = pd.DataFrame({"region": pd.Categorical.from_codes([-1, -1], empty),
                            "device": [1, 1]})  # fmt: skip
    assert str(with_ranges["region"].cat.categories.dtype) != str(
        without["region"].cat.categories.dtype
    )
    out = concatenated([with_ranges, without], categorical=True)
    assert isinstance(out["region"].dtype, pd.CategoricalDtype)
    assert out["region"].astype(object).tolist() == ["step", np.nan, "step", np.nan, np.nan]
    assert out["device"].tolist() == [0, 0, 0, 1, 1]


def test_texts_come_back_in_their_own_types():
    sent = [
        pd.DataFrame({"name": ["a", "b"], "n": [1, 2]}),
        pd.DataFrame({"name": pd.Series(["b", "c"], dtype=object), "n": [3, 4]}),
    ]
    frames = [compact(f) for f in sent]
    assert all(isinstance(f["name"].dtype, pd.CategoricalDtype) for f in frames)
    out = concatenated(frames[:1])
    assert out["name"].dtype == sent[0]["name"].dtype and out["name"].tolist() == ["a", "b"]
    out = concatenated(frames[1:])
    assert out["name"].dtype == object and out["name"].tolist() == ["b", "c"]
    out = concatenated(frames)
    assert out["name"].tolist() == ["a", "b", "b", "c"]
    both = concatenated(frames, categorical=True)
    assert list(both["name"].cat.categories) == ["a", "b", "c"]
    assert both["name"].astype(object).tolist() == ["a", "b", "b", "c"]
