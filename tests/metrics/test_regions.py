import numpy as np
import pandas as pd
import pytest
from hand_trace import hand_trace

from advisor.analysis import analyze
from advisor.metrics.regions import OUTSIDE_RANGES, open_range_at, top_level_ranges


def test_top_level_ranges_drop_nested():
    t = hand_trace()
    assert top_level_ranges(t.nvtx)["text"].tolist() == ["outer", "second"]


def test_ops_projected_to_the_range_open_at_launch():
    a = analyze(hand_trace())
    assert a.ops["region"].astype(object).fillna("-").tolist() == [
        "-",  # k1: no launch call known
        "outer",  # launched at 200
        "outer",  # launched at 2600
        "-",  # launched at 6000: outer closed at 6000
        "second",
        "second",
        "second",
        "-",  # no launch call
    ]


def test_region_windows_and_metrics():
    a = analyze(hand_trace())
    r = a.regions.set_index("name")
    outer, second = r.loc["outer"], r.loc["second"]
    assert (outer.start_ns, outer.end_ns, outer.lead_ns) == (1500, 5000, 500)
    # measured from 1000: the gap before k2 (its first op, which held it) is outer's
    assert (outer.end_ns - outer.start_ns + outer.lead_ns, outer.gpu_busy_ns, outer.idle_ns) == (
        4000,
        2000,
        2000,
    )
    # k2: latency 500; k3: host-bound 1300 + latency 200
    assert outer.launch_overhead_ns == 2000
    assert (second.start_ns, second.end_ns, second.lead_ns) == (10000, 14000, 2000)
    assert (second.gpu_busy_ns, second.idle_ns) == (2900, 3100)
    # k5: module load 900 (start-up) + host-bound 700 + latency 400; k6: host-bound 200 +
    # latency 800; k7: in-graph 100
    assert second.launch_overhead_ns == 2200 and second.startup_idle_ns == 900


def test_device_summary():
    s = analyze(hand_trace()).summary()
    assert s["span_ns"] == 15000
    assert s["gpu_busy_ns"] == 7400
    assert s["idle_ns"] == 7600
    # host-bound 3200 + latency 2400 + in-graph 100 (hand_trace.py)
    assert s["launch_overhead_ns"] == 5700
    assert s["sync_idle_ns"] == 500 and s["startup_idle_ns"] == 900
    assert s["unattributed_idle_ns"] == 500


def test_select_range_recomputes_summary():
    s = analyze(hand_trace()).select("second").summary()
    assert s["span_ns"] == 6000 and s["gpu_busy_ns"] == 2900 and s["launch_overhead_ns"] == 2200


def test_pytorch_range_names_are_grouped():
    import pandas as pd

    from advisor.metrics.regions import range_name

    texts = pd.Series(
        [
            "aten::mm, seq = 0, op_id = 2, sizes = [[896, 8192], [8192, 4864]], "
            "input_op_ids = [(0,-1)]",
            "aten::to, op_id = 990347",
            "aten::add, seq = 45329, op_id = 990355",
            "step 3",
            "ncclAllReduce",
            "train_step_12",
            "ProfilerStep#7",
            "42",
            "layer.3",
        ]
    )
    # ... and a trailing step number: the instances of a repeated range are one range
    assert range_name(texts).tolist() == [
        "aten::mm",
        "aten::to",
        "aten::add",
        "step",
        "ncclAllReduce",
        "train_step",
        "ProfilerStep",
        "42",
        "layer",
    ]


def test_ranges_nest_across_threads_of_one_process():
    # a step on thread 1 [0, 1000); autograd's range on thread 2 [200, 800) inside it; another
    # process's range [300, 400) on thread 3 stays its own
    import pandas as pd

    from advisor.metrics.regions import assign_ops

    nvtx = pd.DataFrame(
        {"start": [0, 200, 300], "end": [1000, 800, 400], "tid": [1, 2, 3], "pid": [10, 10, 11],
         "text": ["train_step_0", "autograd::engine::evaluate_function: MmBackward0", "other"],
         "domain": ["", "", ""]}
    )  # fmt: skip
    top = top_level_ranges(nvtx)
    assert sorted(top["text"]) == ["other", "train_step"]
    # ops launched by: the step's thread at 100, autograd's thread at 500 (inside the step),
    # autograd's thread at 1500 (no range open), the other process at 350
    ops = pd.DataFrame(
        {"api_tid": [1, 2, 2, 3], "api_start": [100.0, 500.0, 1500.0, 350.0],
         "pid": [10, 10, 10, 11]}
    )  # fmt: skip
    ids = assign_ops(ops, top).tolist()
    names = dict(zip(top["range_id"], top["text"], strict=True))
    assert [names.get(i, "-") for i in ids] == ["train_step", "train_step", "-", "other"]


def test_training_steps_hold_the_backward_pass():
    # h200_train_steps: the backward pass runs on autograd's thread; every op launched while
    # a step was open belongs to it, and the steps' idle is wholly explained by its causes
    from conftest import SAMPLES, analysis_of

    a = analysis_of(SAMPLES / "h200_train_steps.sqlite")
    t = a.region_totals()
    # (and the device's time outside the steps: its start-up and the host's work between)
    assert t["name"].tolist() == ["train_step", OUTSIDE_RANGES]
    assert t["instances"].iloc[0] == 6
    causes = t[
        [
            "launch_overhead_ns",
            "sync_idle_ns",
            "copy_idle_ns",
            "input_idle_ns",
            "host_busy_idle_ns",
            "queued_idle_ns",
            "startup_idle_ns",
            "unattributed_idle_ns",
        ]
    ]
    assert (t["idle_ns"] == causes.sum(axis=1)).all()
    # every GPU op launched (by any thread) while a step was open belongs to that step
    api = a.trace.api.dropna(subset=["correlation"]).drop_duplicates("correlation")
    api = api.set_index("correlation")
    ops = a.ops.assign(correlation=_op_correlations(a))  # (the trace's, by the op's row)
    ops = ops.dropna(subset=["correlation"])
    launched = api.reindex(ops["correlation"].to_numpy())
    steps = a.regions[["host_start_ns", "host_end_ns"]].to_numpy()
    start = launched["start"].to_numpy()
    inside = ((start[:, None] >= steps[:, 0]) & (start[:, None] < steps[:, 1])).any(axis=1)
    in_step = ops["region"].astype(str).str.startswith("train_step").to_numpy()
    assert inside.sum() == in_step.sum() and (inside == in_step).all()
    # ... and they were launched by two threads: the step's and autograd's
    assert len(set(launched["tid"].to_numpy()[inside])) == 2


def _op_correlations(a) -> np.ndarray:
    """Per op of ``a``: the correlation id of its row in the trace's table of its kind."""
    out = np.full(len(a.ops), np.nan)
    tables = {"kernel": a.trace.kernels, "memcpy": a.trace.memcpy, "memset": a.trace.memset}
    for kind, table in tables.items():
        rows = np.flatnonzero(a.ops["kind"].eq(kind).to_numpy())
        src = a.ops["src"].to_numpy()[rows]
        out[rows] = table["correlation"].to_numpy(np.float64)[src]
    return out


def test_overlapping_instances_are_measured_over_their_union():
    # Two instances of range "step" whose GPU windows overlap: a 10 us all-reduce launched in
    # step 1 [0, 10000) on stream 8 outlives its host range and runs beside step 2's kernel
    # [4000, 6000) (stream 7). Summed per instance, step 1's window [0, 10000) and step 2's
    # [4000, 6000) would claim 2000 ns of that comm twice; over their union [0, 10000):
    #   comm 10000, compute 2000, overlap 2000, exposed 8000 (= the device's), busy 10000.
    from builders import trace

    t = trace(
        [dict(start=0, end=10000, correlation=1, name="ncclDevKernel_AllReduce", stream=8),
         dict(start=4000, end=6000, correlation=2, name="gemm_kernel")],
        [("cudaLaunchKernel", 0, 50, 1), ("cudaLaunchKernel", 3000, 3100, 2)],
        [("step", 0, 2000), ("step", 2500, 3500)],
    )  # fmt: skip
    a = analyze(t)
    assert len(a.regions) == 2
    assert a.regions["comm_ns"].sum() == 12000  # each instance alone: 10000 + 2000
    total = a.region_totals().iloc[0]
    device = a.devices.iloc[0]
    assert (total.comm_ns, total.compute_ns, total.overlap_ns) == (10000, 2000, 2000)
    assert total.exposed_comm_ns == 8000 == device.exposed_comm_ns
    assert (total.gpu_busy_ns, total.idle_ns, total.window_ns) == (10000, 0, 10000)
    assert total.comm_ns <= device.comm_ns


# two threads' ranges, by start within each thread: thread 7 holds a range [100, 500) with
# [200, 300) nested in it and [600, 700) after; thread 9 holds [150, 400)
RANGES = pd.DataFrame({"tid": [7, 7, 7, 9], "start": [100, 200, 600, 150],
                       "end": [500, 300, 700, 400]})  # fmt: skip


def test_open_range_at_finds_the_innermost_open_range_of_the_querys_thread():
    tids = [7, 7, 7, 7, 7, 9, 9, 8]
    times = [50, 100, 250, 300, 650, 399, 400, 250]
    # 50: before every range; 100: the outer one opens; 250: the nested one (row 1); 300:
    # the nested one closed, the last to start (row 1) is not open: -1 (as documented);
    # 650: row 2; thread 9 at 399: row 3, at 400: closed; thread 8 has no ranges
    expected = [-1, 0, 1, -1, 2, 3, -1, -1]
    assert open_range_at(tids, times, RANGES).tolist() == expected
    floats = np.array(times, dtype=np.float64)
    assert open_range_at(tids, floats, RANGES).tolist() == expected
    floats[2] = np.nan  # (a query without a time: never inside)
    assert open_range_at(tids, floats, RANGES).tolist() == [-1, 0, -1, -1, 2, 3, -1, -1]


def test_open_range_at_with_the_threads_as_a_categorical():
    # the launch calls' threads as categorical codes (gaps._launch_threads): the same
    # answers as their values; NaN (an op without a launch call) and a thread without
    # ranges (8) are never inside; a categorical without thread 9 leaves its range unused
    tids = pd.Categorical([7, 7, 7, 7, 7, 9, 9, 8, np.nan])
    times = np.array([50, 100, 250, 300, 650, 399, 400, 250, 250], dtype=np.float64)
    assert open_range_at(tids, times, RANGES).tolist() == [-1, 0, 1, -1, 2, 3, -1, -1, -1]
    only_seven = pd.Categorical([7, 7, 8], categories=[8, 7])
    assert open_range_at(only_seven, [100.0, 650.0, 250.0], RANGES).tolist() == [0, 2, -1]


def test_open_range_at_one_thread_making_every_query():
    """The queries of one thread are searched as they are (no gather): the same answers."""
    times = np.array([99.0, 100.0, 299.5, 499.0, 500.0, np.nan, 650.0])
    got = open_range_at(np.full(len(times), 7), times, RANGES)
    # (299.5 < 300: still in row 1; at 499 the last range to start, row 1, has closed)
    assert got.tolist() == [-1, 0, 1, -1, -1, -1, 2]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("block", [1, 2, 3])
def test_open_range_at_in_blocks_of_queries(block, threads, monkeypatch):
    # the same answers searched a block of queries at a time, the blocks on one thread or
    # two: one thread making every query (positions offset by the block's start) and
    # several threads (positions gathered)
    from advisor.metrics import regions

    monkeypatch.setattr(regions, "QUERY_BLOCK", block)
    times = np.array([99.0, 100.0, 299.5, 499.0, 500.0, np.nan, 650.0])
    got = open_range_at(np.full(7, 7), times, RANGES, threads)
    assert got.tolist() == [-1, 0, 1, -1, -1, -1, 2]
    tids, times = [7, 7, 7, 7, 7, 9, 9, 8], [50, 100, 250, 300, 650, 399, 400, 250]
    assert open_range_at(tids, times, RANGES, threads).tolist() == [-1, 0, 1, -1, 2, 3, -1, -1]


def test_ordered_run_heads_where_the_lexsort_is_the_identity():
    from advisor.metrics.intervals import run_heads
    from advisor.metrics.keys import pack_one
    from advisor.metrics.regions import _ordered_run_heads

    nan = np.nan

    def heads(r, d, c, rows=None, block=2):
        return _ordered_run_heads(np.array(r), np.array(d), np.array(c), rows, block)

    # by hand: (range, device) rising, correlation ids rising within one, NaN last, ties
    # kept; runs begin at 0, 2 (range 1 -> 2) and 3 (device 0 -> 1); blocks of 2 rows
    assert heads([1, 1, 2, 2, 2], [0, 0, 0, 1, 1], [5.0, 7.0, 1.0, 3.0, nan]).tolist() == [0, 2, 3]
    assert heads([1, 1, 1], [0, 0, 0], [3.0, 3.0, nan]).tolist() == [0]
    assert heads([1, 1, 2], [0, 0, 0], [nan, 7.0, 1.0]) is None  # NaN first
    assert heads([2, 1], [0, 0], [1.0, 2.0]) is None
    assert heads([1, 1], [1, 0], [1.0, 2.0]) is None  # device falls within a range
    assert heads([1, 1], [0, 0], [2.0, 1.0]) is None
    # the rows' order counts, not the columns': rows 2, 0 read (1, 5.0) then (1, 7.0)
    assert heads([1, 9, 1], [0, 0, 0], [7.0, 0.0, 5.0], rows=np.array([2, 0])).tolist() == [0]
    assert heads([1, 9, 1], [0, 0, 0], [7.0, 0.0, 5.0], rows=np.array([0, 2])) is None
    # and against the sort itself on small random tables with NaNs and ties, in blocks of
    # 1 to 3 rows, of every row or of some
    rng = np.random.default_rng(7)
    agreed = {True: 0, False: 0}
    for _ in range(3000):
        n = int(rng.integers(1, 7))
        r = np.sort(rng.integers(0, 3, n)) if rng.random() < 0.7 else rng.integers(0, 3, n)
        d = np.zeros(n, dtype=np.int64) if rng.random() < 0.5 else rng.integers(0, 2, n)
        corr = rng.choice([1.0, 2.0, 3.0, nan], n)
        rows = None if rng.random() < 0.5 else np.flatnonzero(rng.random(n) < 0.8)
        at = np.arange(n) if rows is None else rows
        if not len(at):
            continue
        key = pack_one(r[at], d[at])
        identity = bool((np.lexsort((corr[at], key)) == np.arange(len(at))).all())
        got = _ordered_run_heads(r, d, corr, rows, int(rng.integers(1, 4)))
        assert (got is not None) == identity, (r, d, corr, rows)
        if identity:
            assert got.tolist() == run_heads(key).tolist()
        agreed[identity] += 1
    assert min(agreed.values()) > 300  # (both answers tried)
