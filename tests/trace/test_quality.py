"""Data-quality handling: impossible rows dropped and counted, impossible launches flagged,
missing coverage stated with what it limits (hand cases and real traces)."""

import shutil

import numpy as np
import pandas as pd
import pytest
from builders import trace
from conftest import H200_SINGLE, PUBLIC, PUBLIC_NSYS, analysis_of

from advisor.analysis import analyze
from advisor.trace.load import load_trace
from advisor.trace.quality import drop_impossible_rows, impossible_launches, slow_host_ops


def test_impossible_rows_are_dropped_and_counted():
    t = trace(
        [
            dict(start=0, end=100),  # fine
            dict(start=200, end=150),  # ends before it starts
            dict(start=-5, end=10),  # negative time
            dict(start=300, end=2**62 + 1),  # beyond 2^62 ns
            dict(start=400, end=500),  # fine
        ]
    )
    drop_impossible_rows(t)
    assert t.kernels["start"].tolist() == [0, 400]
    assert t.warnings == [
        "3 of 5 kernel launches dropped: missing timestamps or device/stream, a device id that "
        "cannot be one, end before start, or times outside 0..2^62 ns (a damaged trace); every "
        "metric is computed without them"
    ]


def test_rows_on_a_device_that_cannot_exist_are_dropped():
    devices = [0, -1, 2.5, 2**31, 3]  # negative, fractional, beyond any device numbering
    t = trace([dict(start=i * 100, end=i * 100 + 50, device=d) for i, d in enumerate(devices)])
    drop_impossible_rows(t)
    assert t.kernels["device"].tolist() == [0, 3] and t.devices == [0, 3]
    assert t.warnings[0].startswith("3 of 5 kernel launches dropped")


def test_cpu_ops_with_negative_durations_are_dropped_and_counted():
    t = trace([dict(start=0, end=100)])
    t.cpu_ops = pd.DataFrame({"start": [0, 50, 90], "end": [10, 40, 95], "name": ["a", "b", "c"],
                              "tid": 1, "pid": 1})  # fmt: skip
    drop_impossible_rows(t)
    assert t.cpu_ops["name"].tolist() == ["a", "c"]
    assert t.warnings[0].startswith("1 of 3 CPU ops dropped")


def test_missing_timestamps_count_as_impossible():
    t = trace([dict(start=0, end=100), dict(start=200, end=300)])
    t.kernels["end"] = pd.array([100, None], dtype="Int64")
    drop_impossible_rows(t)
    assert len(t.kernels) == 1 and t.kernels["end"].dtype == np.int64


def test_impossible_launch_configurations_get_no_waves():
    t = trace(
        [
            dict(start=0, end=1000, grid_x=133),  # fine: 133 CTAs
            dict(start=2000, end=3000, grid_x=0),  # zero blocks
            dict(start=4000, end=5000, block_x=2048),  # over 1024 threads
            dict(start=6000, end=7000, registers=-3),  # damaged register count
            dict(start=8000, end=9000, grid_x=2**31, grid_y=2**16, grid_z=2**16),  # 2^63 blocks
            dict(start=10000, end=11000, block_x=128.5),  # a fraction of a thread
        ]
    )
    assert impossible_launches(t.kernels).tolist() == [False, True, True, True, True, True]
    a = analyze(t)
    k = a.kernel_table()
    waves = dict(zip(k["grid_blocks"], k["waves"], strict=True))
    # 128 threads x 32 registers: 16 CTAs/SM (by blocks/warps), 132 SMs -> 2112 slots
    assert waves[133] == 133 / (132 * 16) and np.isnan(waves[0])
    assert k["waves"].isna().sum() == 5 and k["tail_idle_ns"].sum() == 0
    assert any("5 kernel launches have impossible launch configurations" in w for w in a.warnings)


def test_kernels_without_launch_calls_are_counted():
    # the public H100 window trace was cut from a longer run: its first launches' API calls
    # fall before the window
    a = analysis_of(PUBLIC_NSYS / "nsysai_h100_2gpu_window_nsys2026.2.sqlite", gpu="H100-SXM")
    # (counted from the trace's own tables: kernels whose (process, correlation id) no API
    # call has)
    keys = ["pid", "correlation"]
    calls = a.trace.api[keys].dropna().drop_duplicates()
    joined = a.trace.kernels[keys].merge(calls, how="left", on=keys, indicator=True)
    missing = int(joined["_merge"].eq("left_only").sum())
    assert missing == 1810 and len(a.trace.kernels) == 3442
    assert any(
        w.startswith("1,810 of 3,442 kernel launches have no launch call") for w in a.warnings
    )


def test_releasing_the_api_rows_changes_no_result():
    path = PUBLIC_NSYS / "nsysai_h100_2gpu_window_nsys2026.2.sqlite"
    kept = analyze(load_trace(path, gpu="H100-SXM"))
    t = load_trace(path, gpu="H100-SXM")
    released = analyze(t, release_api=True)
    assert t.api.empty and len(kept.trace.api) > 0
    assert released.notes == kept.notes  # the 1,810 launches without calls still counted
    for table in ("ops", "launches", "devices", "regions", "sequences", "gaps", "streams"):
        pd.testing.assert_frame_equal(getattr(released, table), getattr(kept, table))


def test_profiler_diagnostics_and_unmerged_wal_are_reported(tmp_path):
    copy = tmp_path / "t.sqlite"
    shutil.copyfile(H200_SINGLE, copy)
    (tmp_path / "t.sqlite-wal").write_bytes(b"\0" * 64)
    t = load_trace(copy)
    assert any("Not all NVTX events might have been collected" in w for w in t.warnings)
    assert any(w.startswith("t.sqlite-wal (a SQLite write-ahead log)") for w in t.warnings)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.sqlite", "t.sqlite-wal"]


def _cpu_ops(durations_ns: list[int], name: str = "aten::view") -> pd.DataFrame:
    n = len(durations_ns)
    start = np.arange(n, dtype=np.int64) * 100_000
    return pd.DataFrame({"start": start, "end": start + np.asarray(durations_ns, np.int64),
                         "pid": 1, "tid": 1,
                         "name": pd.Categorical([name] * n)})  # fmt: skip


@pytest.mark.parametrize(
    "durations, name, warns",
    # thresholds.yaml slow_host_ops: >= 100 calls of aten::view / aten::as_strided with a
    # median >= 10,000 ns
    [([10_000] * 100, "aten::view", True),
     ([10_000] * 99, "aten::view", False),
     ([9_999] * 100, "aten::as_strided", False),
     ([1_000] * 49 + [50_000] * 51, "aten::as_strided", True),  # median 50 us
     ([50_000] * 100, "aten::add", False)],  # (an op that computes)
)  # fmt: skip
def test_slowed_host_ops_by_hand(durations, name, warns):
    t = trace([{"start": 0, "end": 10}])
    t.cpu_ops = _cpu_ops(durations, name)
    assert bool(slow_host_ops(t)) == warns


def test_slowed_host_ops_in_a_public_trace():
    # HTA's nccl_data: 1,281 aten::view (median 22.6 us) and 984 aten::as_strided (23.5 us),
    # counted with the json module; the same ops take 0.4-4.5 us at the median in the other
    # public and own PyTorch traces, which get no warning
    warned = [w for w in load_trace(PUBLIC / "kineto" / "hta_nccl_data.json.gz").warnings
              if w.startswith("host ops look slowed")]  # fmt: skip
    assert len(warned) == 1 and "over 2,265 calls" in warned[0]
    for name in ("hta_negative_queue_rank0", "tracelens_vllm_eager_b200", "tracelens_owlv2_mi300x",
                 "kineto_resnet50_dataloader_pytorch1.8"):  # fmt: skip
        warnings = load_trace(PUBLIC / "kineto" / f"{name}.json.gz").warnings
        assert not [w for w in warnings if w.startswith("host ops look slowed")]
