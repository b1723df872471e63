"""The range instances of a job held in files (advisor/regionstore.py): read back in the
job's (start_ns, device) order a stretch at a time, narrowed, and their comm waits filled,
as the concatenated and sorted table gives them."""

import numpy as np
import pandas as pd
import pytest

from advisor.regionstore import RegionFiles, RegionView


def _files(tmp_path, ranks: list[pd.DataFrame]) -> RegionFiles:
    files = RegionFiles(tmp_path / "regions", pd.concat([r.iloc[:1] for r in ranks]).dtypes)
    for r in ranks:
        files.add(r)
    files.close()
    return files


def _rank(device, start, names, range_ids, waits=None):
    start = np.asarray(start, np.int64)
    t = pd.DataFrame({"range_id": np.asarray(range_ids, np.int64), "device": device,
                      "start_ns": start, "end_ns": start + 10, "name": names,
                      "idle_ns": np.arange(len(start), dtype=np.float64) * 0.5})  # fmt: skip
    t["comm_wait_ns"] = np.nan if waits is None else waits
    return t


def _concatenated_sorted(ranks):
    t = pd.concat(ranks, ignore_index=True)
    return t.sort_values(["start_ns", "device"], ignore_index=True, kind="stable")


def test_by_hand_order_ties_and_missing_names(tmp_path):
    # rank 0 on device 0: starts 30, 10, 10 (a tie kept in its order: ids 1 then 2);
    # rank 1 on device 1: starts 10, 20, with a missing name; rank 2: none.
    # The job's order (start, device): 10/d0 id1, 10/d0 id2, 10/d1 id3, 20/d1 id4, 30/d0 id0
    r0 = _rank(0, [30, 10, 10], pd.Series(["a", "b", "a"], dtype=object), [0, 1, 2])
    r1 = _rank(1, [10, 20], pd.Series(["c", None], dtype=object), [3, 4])
    r2 = _rank(2, [], pd.Series([], dtype=object), [])
    files = _files(tmp_path, [r0, r1, r2])
    assert files.order.tolist() == [0, 0, 1, 1, 0] and files.order.dtype == np.int16
    view = RegionView(files)
    got = view.frame()
    assert got["range_id"].tolist() == [1, 2, 3, 4, 0]
    assert got["name"].tolist() == ["b", "a", "c", None, "a"] and got["name"].dtype == object
    pd.testing.assert_frame_equal(got, _concatenated_sorted([r0, r1, r2]))
    for rows in (1, 2, 4):
        chunks = list(view.chunks(rows=rows))
        assert [len(c) for c in chunks] == [rows] * (5 // rows) + ([5 % rows] if 5 % rows else [])
        pd.testing.assert_frame_equal(pd.concat(chunks, ignore_index=True), got)
    assert len(view) == 5 and view.span() == (10, 40)
    d1 = view.narrowed(1)
    assert len(d1) == 2 and d1.span() == (10, 30)
    assert d1.frame(["range_id"])["range_id"].tolist() == [3, 4]
    assert view.frame(["range_id"], names=["a", "z"])["range_id"].tolist() == [2, 0]
    assert view.narrowed(1).frame(names=["a"]).empty
    assert view.narrowed(5).frame(["device"]).columns.tolist() == ["device"]


def test_categories_kept(tmp_path):
    dtype = pd.CategoricalDtype(["fwd", "bwd", "unused"])
    r0 = _rank(0, [1, 5], pd.Series(["bwd", "fwd"], dtype=dtype), [0, 1])
    r1 = _rank(1, [3], pd.Series(["fwd"], dtype=dtype), [2])
    got = RegionView(_files(tmp_path, [r0, r1])).frame()
    assert got["name"].dtype == dtype and got["name"].tolist() == ["bwd", "fwd", "fwd"]


def test_fill_waits_by_hand(tmp_path):
    # waits per (range id, device): (1, 0) 7, (3, 1) 5, (9, 9) 100 (no such instance);
    # instances: id0/d0 'a', id1/d0 'b', id2/d0 'a', id3/d1 'c', id4/d1 'a'
    r0 = _rank(0, [30, 10, 20], pd.Series(["a", "b", "a"], dtype=object), [0, 1, 2])
    r1 = _rank(1, [10, 20], pd.Series(["c", "a"], dtype=object), [3, 4])
    files = _files(tmp_path, [r0, r1])
    index = pd.MultiIndex.from_tuples([(1, 0), (3, 1), (9, 9)], names=["range_id", "device"])
    per_name = files.fill_waits(pd.Series([7.0, 5.0, 100.0], index=index))
    got = RegionView(files).frame()
    assert dict(zip(got["range_id"], got["comm_wait_ns"], strict=True)) == {
        0: 0.0, 1: 7.0, 2: 0.0, 3: 5.0, 4: 0.0}  # fmt: skip
    assert per_name.to_dict() == {("a", 0): 0.0, ("b", 0): 7.0, ("a", 1): 0.0, ("c", 1): 5.0}
    # no waits at all: every instance 0
    files.fill_waits(pd.Series(dtype=np.float64))
    assert RegionView(files).frame()["comm_wait_ns"].eq(0.0).all()


@pytest.mark.parametrize("seed", range(6))
def test_random_jobs_as_concatenated_and_sorted(tmp_path, seed):
    rng = np.random.default_rng(seed)
    ranks, first = [], 0
    for device in range(int(rng.integers(1, 6))):
        n = int(rng.integers(0, 40))
        start = rng.integers(0, 50, n)  # (many ties within a rank)
        names = pd.Series(rng.choice(["fwd", "bwd", "opt"], n), dtype=object)
        ranks.append(_rank(device, start, names, np.arange(first, first + n)))
        first += n
    if not first:
        ranks.append(_rank(0, [4], pd.Series(["fwd"], dtype=object), [0]))
    want = _concatenated_sorted(ranks)
    view = RegionView(_files(tmp_path, ranks))
    for rows in (1, 3, 7, 1 << 16):
        pd.testing.assert_frame_equal(pd.concat(view.chunks(rows=rows), ignore_index=True), want)
    device = int(want["device"].iloc[0])
    one = want[want["device"] == device].reset_index(drop=True)
    pd.testing.assert_frame_equal(view.narrowed(device).frame(), one)
