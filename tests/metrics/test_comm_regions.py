"""Per (region, device) sums of comm ops (metrics/comm_regions.py): by hand, and a job's as
its ranks' added up."""

import numpy as np
import pandas as pd
import pytest

from advisor.metrics.comm_regions import RegionCommSums, region_comm_sums

REGION = ["", "fwd", None, np.nan, "fwd"]


def comm_ops(region, device, took, wait=None, last=None, kind="memcpy", name="copy"):
    """Comm ops starting at 0 (``took`` ns long), with their waits for other ranks."""
    n = len(device)
    return pd.DataFrame({
        "op_class": "comm", "kind": kind, "name": name, "start": np.zeros(n, np.int64),
        "end": np.asarray(took, np.int64), "device": device, "region": region,
        "wait_ns": np.zeros(n) if wait is None else np.asarray(wait, np.float64),
        "last_device": np.full(n, np.nan, np.float32) if last is None
        else np.asarray(last, np.float32),
    })  # fmt: skip


def at(sums: RegionCommSums, column: str) -> dict:
    return sums.sums.set_index(["region", "device"])[column].to_dict()


@pytest.mark.parametrize("categorical", [True, False])
def test_sums_count_a_missing_region_as_the_empty_one(categorical):
    # five comm ops; region NaN and '' are one region (''): by hand, ('', 0): 10 + 40 = 50
    # ns over 2 ops, ('', 1): 30, ('fwd', 0): 20 + 50 = 70, whatever the region's dtype
    region = pd.Series(REGION, dtype=object)
    ops = comm_ops(region.astype("category") if categorical else region, [0, 0, 1, 0, 0],
                   [10, 20, 30, 40, 50])  # fmt: skip
    sums = region_comm_sums(ops, pd.Series(dtype=np.int64))
    assert at(sums, "comm_ns") == {("", 0): 50.0, ("", 1): 30.0, ("fwd", 0): 70.0}
    assert at(sums, "n") == {("", 0): 2, ("", 1): 1, ("fwd", 0): 2}
    assert at(sums, "collectives") == at(sums, "n")  # (no point-to-point kernel)
    assert set(at(sums, "p2p_ns").values()) == {0.0} and sums.several_devices()
    assert sums.last.empty


def test_point_to_point_kernels_and_start_up_waits():
    # ops 1, 2 and 4 waited for another rank, each entirely before the steady state of the
    # later of its device and the last one (device 0 steady from 1 s, device 1 from 0): the
    # start-up part is the whole wait, ('fwd', 0) 20 + 50 = 70 ns, ('', 1) 30 ns; op 4 is a
    # point-to-point kernel (a NCCL SendRecv): 50 of ('fwd', 0)'s 70 ns, not a collective
    ops = comm_ops(pd.Series(REGION, dtype="category"), [0, 0, 1, 0, 0], [10, 20, 30, 40, 50],
                   wait=[0, 20, 30, 0, 50], last=[np.nan, 1, 0, np.nan, 1])  # fmt: skip
    ops.loc[4, ["kind", "name"]] = ["kernel", "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage)"]
    steady = pd.Series({0: 1_000_000_000, 1: 0})
    sums = region_comm_sums(ops, steady)
    assert at(sums, "startup_wait_ns") == {("", 0): 0.0, ("", 1): 30.0, ("fwd", 0): 70.0}
    assert at(sums, "p2p_ns") == {("", 0): 0.0, ("", 1): 0.0, ("fwd", 0): 50.0}
    assert at(sums, "collectives") == {("", 0): 2, ("", 1): 1, ("fwd", 0): 1}


def test_the_device_most_often_last_per_region_and_device():
    # waiting ops (region, device, last_device), by hand:
    #   ('fwd', 0): 3, 2, 3, 2, NaN -> 2 and 3 twice each: the lowest, 2
    #   ('fwd', 1): 0, 0, 5         -> 0
    #   ('', 0) (region None):  NaN -> names none: left out
    #   ('bwd', 0): 7, but it did not wait (wait 0) -> left out
    region = ["fwd"] * 5 + ["fwd"] * 3 + [None, "bwd"]
    device = [0] * 5 + [1] * 3 + [0, 0]
    last = [3, 2, 3, 2, np.nan, 0, 0, 5, np.nan, 7]
    ops = comm_ops(pd.Series(region, dtype="category"), device, [1] * 10, wait=[5] * 9 + [0],
                   last=last)  # fmt: skip
    index = pd.MultiIndex.from_tuples([("fwd", 0), ("fwd", 1), ("", 0), ("bwd", 0)])
    got = region_comm_sums(ops, pd.Series({d: 0 for d in range(8)})).most_often_last(index)
    assert got.dtype == np.float32
    assert got.dropna().to_dict() == {("fwd", 0): 2.0, ("fwd", 1): 0.0}
    # as the per-group mode it stands for
    rows = ops.iloc[:9].assign(region=ops["region"].astype(object).fillna(""))
    mode = rows.groupby(["region", "device"])["last_device"].agg(
        lambda s: s.mode().iloc[0] if len(s.mode()) else np.nan
    )
    assert mode.dropna().to_dict() == got.dropna().to_dict()


def test_a_jobs_sums_are_its_ranks_added_up_and_narrow_as_a_selection():
    # 40 random comm ops on 4 devices (two ranks of two): the sums of each rank's ops added
    # up equal the sums of all of them; narrowed to a device and a range text, the sums of
    # the ops an analysis keeps for that selection
    rng = np.random.default_rng(3)
    n = 40
    device = rng.integers(0, 4, n)
    region = pd.Series(rng.choice(["fwd", "bwd", "", "fwd_b"], n), dtype="category")
    wait = np.where(rng.random(n) < 0.5, rng.integers(1, 100, n), 0)
    last = np.where(wait > 0, rng.integers(0, 4, n), np.nan)
    ops = comm_ops(region, device, rng.integers(1, 1000, n), wait=wait, last=last)
    steady = pd.Series({d: int(rng.integers(0, 50)) for d in range(4)})
    whole = region_comm_sums(ops, steady)
    ranks = [region_comm_sums(ops[(device // 2 == r)], steady) for r in (0, 1)]
    added = RegionCommSums.added(ranks)
    pd.testing.assert_frame_equal(added.sums, whole.sums.astype({"n": np.float64}),
                                  check_dtype=False)  # fmt: skip
    pd.testing.assert_frame_equal(added.last, whole.last, check_dtype=False)
    mine = device == 1
    kept = mine & region.astype(str).str.contains("fwd").to_numpy()
    want = region_comm_sums(ops[kept], steady)
    got = added.narrowed(1, "fwd")
    pd.testing.assert_frame_equal(got.sums, want.sums, check_dtype=False)
    pd.testing.assert_frame_equal(got.last, want.last, check_dtype=False)
    assert not got.several_devices() and added.several_devices()
