"""A job's comm ops kept on disk and matched a chunk at a time (commstore.py) give what
matching them all at once in memory gives (metrics/comm.collective_skew and the analysis's
comm waits over the concatenated ranks, as parts.merged_job did before the store): the comm
ops with their waits, the matched collectives, the sums per device, range instance and
(region, device), one row per collective instance; whole and as a selection sees them."""

import gc
import weakref

import numpy as np
import pandas as pd
import pytest

from advisor.analysis import _comm_waits
from advisor.commstore import OP_CLASS_DTYPE, CommStore, CommView
from advisor.frames import compact, concatenated
from advisor.metrics.comm import collective_skew
from advisor.metrics.comm_regions import region_comm_sums
from advisor.metrics.keys import first_rows

NAMES = ["ncclDevKernel_AllReduce_Sum_f32", "ncclDevKernel_AllGather", "ncclDevKernel_Broadcast",
         "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage)"]  # fmt: skip


def random_ranks(seed: int, ranks: int = 4) -> tuple[list[pd.DataFrame], pd.Series]:
    """Each rank's comm ops as a part sends them (text columns categorical), with the job's
    device ids (one or two per rank) and range ids, and each device's steady start: launches
    of a few names per device (start ties among them), a comm copy now and then, and now
    and then an op recorded twice (the same device, start and name)."""
    rng = np.random.default_rng(seed)
    frames, steady = [], {}
    for r in range(ranks):
        rows = []
        for d in [2 * r, 2 * r + 1][: int(rng.integers(1, 3))]:
            steady[d] = int(rng.integers(0, 400))
            for name in rng.choice(NAMES, size=int(rng.integers(0, 4)), replace=False):
                for start in np.sort(rng.integers(0, 1000, int(rng.integers(1, 7)))):
                    rows.append((d, int(start), int(start + rng.integers(1, 60)), name, "kernel"))
            if rng.random() < 0.5:
                start = int(rng.integers(0, 1000))
                rows.append((d, start, start + 5, "copy", "memcpy"))
        if rows and rng.random() < 0.5:
            rows.append(rows[int(rng.integers(0, len(rows)))])  # (recorded twice)
        t = pd.DataFrame(rows, columns=["device", "start", "end", "name", "kind"]).astype(
            {"device": np.int64, "start": np.int64, "end": np.int64}
        )
        t["op_class"] = "comm"
        t["range_id"] = rng.integers(-1, 3, len(t)) + np.where(r > 0, 10 * r, 0)
        t.loc[t["range_id"] < 10 * r, "range_id"] = -1
        t["region"] = [f"step{i % 2}" if i >= 0 else None for i in t["range_id"]]
        frames.append(compact(t[["device", "start", "end", "name", "kind", "op_class",
                                 "range_id", "region"]]))  # fmt: skip
    return frames, pd.Series(steady)


def in_memory(frames: list[pd.DataFrame]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(the comm ops with wait_ns and last_device, the matched collectives) as the merge
    computed them over every rank's comm ops at once."""
    comm = concatenated(frames, categorical=True)
    if comm.empty:
        comm = comm.assign(wait_ns=pd.Series(dtype=float), last_device=pd.Series(dtype=float))
        return comm, collective_skew(comm, comm["op_class"])
    op_class = comm["op_class"].astype(OP_CLASS_DTYPE)
    skew = collective_skew(comm, op_class)
    comm = comm.assign(op_class=op_class)
    comm["wait_ns"], comm["last_device"] = _comm_waits(comm, op_class, skew)
    return comm, skew


def stored(frames, steady, chunk=None) -> CommView:
    store = CommStore()
    for f in frames:
        store.add(f)
    return CommView(store.match(steady, chunk))


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("chunk", [1, 2, 5, None])
def test_stored_and_matched_in_chunks_as_in_memory(seed, chunk):
    frames, steady = random_ranks(seed)
    comm, skew = in_memory(frames)
    view = stored(frames, steady, chunk)
    pd.testing.assert_frame_equal(view.ops(), comm)
    if len(skew):
        pd.testing.assert_frame_equal(view.collectives(), skew)
    else:
        assert view.collectives().empty
    # the sums the windows and the rules read
    waits = comm[comm["wait_ns"].to_numpy() != 0]
    job = view.job
    want = waits.groupby("device")["wait_ns"].sum()
    assert job.device_waits.sort_index().to_dict() == want.to_dict()
    inside = waits["range_id"] >= 0
    want = waits[inside].groupby(["range_id", "device"])["wait_ns"].sum()
    assert job.window_waits.sort_index().to_dict() == want.to_dict()
    want = waits[~inside].groupby("device")["wait_ns"].sum()
    assert job.outside_waits.sort_index().to_dict() == want.to_dict()
    whole = region_comm_sums(comm, steady)
    got = view.comm_by_region()
    key = ["region", "device"]
    pd.testing.assert_frame_equal(got.sums.sort_values(key, ignore_index=True),
                                  whole.sums.sort_values(key, ignore_index=True))  # fmt: skip
    pd.testing.assert_frame_equal(got.last.sort_values([*key, "last"], ignore_index=True),
                                  whole.last.sort_values([*key, "last"], ignore_index=True),
                                  check_dtype=False)  # fmt: skip


@pytest.mark.parametrize("seed", range(8))
def test_a_selection_reads_what_it_would_keep(seed):
    # a device and a time span (a range selection's): the collectives and the instances of
    # the ops kept, the comm ops of that device in those range ids
    frames, steady = random_ranks(seed, ranks=3)
    comm, skew = in_memory(frames)
    view = stored(frames, steady, chunk=3)
    device = int(comm["device"].iloc[0]) if len(comm) else 0
    ids = frozenset({-1, 10, 11})
    narrowed = view.narrowed(device=device, range_ids=ids, span=(200, 700))
    ops = comm[comm["device"] == device]
    pd.testing.assert_frame_equal(narrowed.ops(), ops[ops["range_id"].isin(ids)])
    if skew.empty:
        return
    kept = skew[skew["device"] == device]
    kept = kept[kept["start"].between(200, 700)]
    pd.testing.assert_frame_equal(narrowed.collectives(), kept)
    rows = first_rows(kept["instance"].to_numpy())
    want = pd.DataFrame({"name": kept["name"].array.take(rows),
                         "skew_ns": kept["skew_ns"].to_numpy()[rows],
                         "last": kept["last_device"].to_numpy()[rows]})  # fmt: skip
    got = narrowed.instances()
    order = ["name", "skew_ns", "last"]
    pd.testing.assert_frame_equal(got.sort_values(order, ignore_index=True),
                                  want.sort_values(order, ignore_index=True))  # fmt: skip


def test_an_instance_by_hand():
    # two ranks, one device each, AllReduce launched 3 times on device 0 and twice on
    # device 1: instances #0 and #1 match (the third has no partner). #0 starts at 100 and
    # 130 (skew 30; device 0 waits 30 ns, its op 50 long; device 1 is last), #1 at 400 and
    # 380 (skew 20; device 1 waits 20 ns; device 0 last); device 1's #1 op lasts 10 ns, so
    # its wait is capped at 10
    name = NAMES[0]
    ranks = [pd.DataFrame({"device": [0, 0, 0], "start": [100, 400, 900], "end": [150, 450, 950],
                           "name": name, "kind": "kernel", "op_class": "comm",
                           "range_id": [0, 1, -1], "region": ["step", "step", None]}),
             pd.DataFrame({"device": [1, 1], "start": [130, 380], "end": [160, 390],
                           "name": name, "kind": "kernel", "op_class": "comm",
                           "range_id": [2, 3], "region": ["step", "step"]})]  # fmt: skip
    view = stored([compact(r) for r in ranks], pd.Series({0: 0, 1: 0}), chunk=1)
    ops = view.ops()
    assert ops["wait_ns"].tolist() == [30.0, 0.0, 0.0, 0.0, 10.0]
    assert ops["last_device"].tolist()[:2] == [1.0, 0.0] and np.isnan(ops["last_device"][2])
    assert view.job.device_waits.to_dict() == {0: 30.0, 1: 10.0}
    assert view.job.window_waits.to_dict() == {(0, 0): 30.0, (3, 1): 10.0}
    per = view.instances()
    assert per["skew_ns"].tolist() == [30, 20] and per["last"].tolist() == [1, 0]


def test_the_folder_goes_with_the_store(tmp_path, monkeypatch):
    # the ops are written to a private temporary folder (never beside a trace), removed
    # once nothing refers to the store
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    frames, steady = random_ranks(0)
    view = stored(frames, steady)
    folder = view.job.store.folder
    assert folder.parent == tmp_path and any(folder.iterdir())
    ref = weakref.ref(view.job.store)
    del view
    gc.collect()
    assert ref() is None and not folder.exists()


def test_a_full_disk_names_the_folder(monkeypatch):
    # a write that fails for want of room (no file named by the OS) names the store's
    # folder, which the command line reports in one line (exit 2) as it does a full stdout
    import errno

    store = CommStore()

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(pd.DataFrame, "to_pickle", full)
    monkeypatch.setattr(pd, "to_pickle", full)
    frames, _ = random_ranks(1)
    for write in (lambda: store.hold(frames[0]), lambda: store.add(frames[0])):
        with pytest.raises(OSError) as err:
            write()
        assert err.value.errno == errno.ENOSPC
        assert err.value.filename.startswith(str(store.folder))


def test_the_command_leaves_no_folder_behind(tmp_path):
    # the command line ends with os._exit (no teardown): the store's folder must be gone by
    # then, removed when the analysis is dropped at the end of the command
    import os
    import subprocess
    import sys

    from conftest import PUBLIC

    ranks = [str(PUBLIC / "kineto" / f"hta_sampled_rank-{r}.json.gz") for r in (0, 1)]
    proc = subprocess.run(
        [sys.executable, "-m", "advisor", "analyze", *ranks, "--jobs", "1", "--format", "json"],
        env=dict(os.environ, TMPDIR=str(tmp_path)), capture_output=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert b'"collectives"' in proc.stdout
    assert not list(tmp_path.iterdir())
