from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hand_trace import hand_trace
from hypothesis import given, settings
from hypothesis import strategies as st

from advisor.metrics.gaps import attribute_gaps, device_ops, gap_breakdown, launch_sequences

SAMPLES = Path(__file__).parents[2] / "sample_traces"


@pytest.fixture(scope="module")
def attributed():
    t = hand_trace()
    return attribute_gaps(device_ops(t), t)


@pytest.fixture(scope="module")
def gaps(attributed):
    return attributed[0]


def test_each_gap_gets_its_dominant_cause(gaps):
    causes = [None if pd.isna(c) else c for c in gaps["cause"]]  # NaN: no gap
    got = list(zip(gaps["gap_ns"], causes, strict=True))
    assert got == [  # (the cause holding most of the gap: hand_trace.py)
        (0, None),
        (500, "launch_latency"),
        (1500, "host_bound"),
        (2000, "host_bound"),
        (2000, "startup"),
        (1000, "launch_latency"),
        (100, "graph_internal"),
        (500, "unattributed"),
    ]


def test_breakdown_totals(attributed):
    b = gap_breakdown(attributed[1]).set_index("cause")["total_ns"].to_dict()
    assert b == {
        "synchronization": 500,
        "startup": 900,
        "host_bound": 3200,
        "launch_latency": 2400,
        "unattributed": 500,
        "graph_internal": 100,
    }


def test_sequences_and_graph_saving(gaps):
    s = launch_sequences(gaps).sort_values("start_ns").reset_index(drop=True)
    # sequences split where the host was not launching: k5 (mostly start-up) and k8
    # (unattributed); singles dropped
    assert s[["start_ns", "end_ns", "ops", "launches"]].values.tolist() == [
        [0, 8000, 4, 4],
        [10000, 14000, 3, 2],  # the graph replay counts as one launch
    ]
    # overhead inside: k2 500, k3 1500, k4 1500 (its sync 500 is not overhead); k6 1000,
    # k7 100 (in-graph)
    assert s["overhead_ns"].tolist() == [3500, 1100]
    # eager gaps' overhead minus the 256 ns graph node gap: 244 + 1244 + 1244; 744
    assert s["graph_saving_ns"].tolist() == [2732, 744]


def test_piece_segments_per_cause_and_device():
    from advisor.metrics.attribution import CAUSES
    from advisor.metrics.gaps import piece_segments

    # pieces by device and start; causes by hand: device 0 host_bound [0,5) [20,30), startup
    # [5,10); device 3 host_bound [7,9); no other cause
    pieces = pd.DataFrame({
        "device": [0, 0, 0, 3], "start": [0, 5, 20, 7], "end": [5, 10, 30, 9],
        "cause": pd.Categorical(["host_bound", "startup", "host_bound", "host_bound"],
                                CAUSES),
    })  # fmt: skip
    got = piece_segments(pieces)
    as_lists = {c: {d: (s.tolist(), e.tolist()) for d, (s, e) in per.items()}
                for c, per in got.items()}  # fmt: skip
    assert as_lists == {"host_bound": {0: ([0, 20], [5, 30]), 3: ([7], [9])},
                        "startup": {0: ([5], [10])}}  # fmt: skip
    assert 3 not in got["startup"] and len(got["host_bound"]) == 2
    assert piece_segments(pieces.iloc[:0]) == {}
    # in cause order (the attribution's: startup's code 0 before host_bound's), the same
    # segments, each a slice of the pieces' columns (no copy)
    ordered = pieces.iloc[[1, 0, 2, 3]].reset_index(drop=True)
    got = piece_segments(ordered)
    assert {c: {d: (s.tolist(), e.tolist()) for d, (s, e) in per.items()}
            for c, per in got.items()} == as_lists  # fmt: skip
    start = ordered["start"].to_numpy(np.int64)
    assert all(np.shares_memory(s, start) for per in got.values() for s, _ in per.values())


def test_run_blocks_hold_whole_runs():
    from advisor.metrics.gaps import _run_blocks

    def blocks(first, n, rows):
        return [((r.start, r.stop), (o.start, o.stop)) for r, o in _run_blocks(
            np.array(first), n, rows)]  # fmt: skip

    # runs start at rows 0, 3, 4, 9 of 12: blocks from about 4 rows each, cut at run starts
    assert blocks([0, 3, 4, 9], 12, 4) == [((0, 2), (0, 4)), ((2, 3), (4, 9)), ((3, 4), (9, 12))]
    assert blocks([0, 3, 4, 9], 12, 100) == [((0, 4), (0, 12))]
    assert blocks([0, 3, 4, 9], 12, 1) == [((0, 1), (0, 3)), ((1, 2), (3, 4)), ((2, 3), (4, 9)),
                                           ((3, 4), (9, 12))]  # fmt: skip
    assert blocks([0], 5, 2) == [((0, 1), (0, 5))]  # (one long run: one block)


def test_sequences_do_not_depend_on_the_block_or_the_threads(gaps):
    # blocks of whole runs, made one after another or on two threads: the same table
    from conftest import H200_SINGLE

    from advisor.trace.load import load_trace

    t = load_trace(H200_SINGLE)
    ops = attribute_gaps(device_ops(t), t)[0]
    whole = launch_sequences(ops, min_ops=1)
    assert len(whole) > 50 and whole["ops"].max() > 20  # (many runs, some long)
    for rows in (1, 2, 7, 64, 1000):
        for threads in (1, 2):
            pd.testing.assert_frame_equal(
                launch_sequences(ops, min_ops=1, block_rows=rows, threads=threads), whole
            )
    pd.testing.assert_frame_equal(launch_sequences(gaps, block_rows=1, threads=2),
                                  launch_sequences(gaps))  # fmt: skip


def test_stream_summary_counts_each_streams_own_gaps():
    from builders import trace

    from advisor.metrics.gaps import stream_summary

    # stream 7: [0,100) [300,400) -> own gap 200; stream 9: [100,300) fills it on the device
    t = trace(
        [
            dict(stream=7, start=0, end=100),
            dict(stream=9, start=100, end=300),
            dict(stream=7, start=300, end=400),
        ]
    )
    s = stream_summary(device_ops(t)).set_index("stream")
    assert (s.loc[7, "ops"], s.loc[7, "busy_ns"], s.loc[7, "gap_ns"]) == (2, 200, 200)
    assert (s.loc[9, "ops"], s.loc[9, "gap_ns"]) == (1, 0)
    g, _ = attribute_gaps(device_ops(t), t)
    assert g["gap_ns"].sum() == 0  # the device itself never idled


def test_stream_summary_carries_each_streams_reach_across_blocks():
    from builders import trace

    from advisor.metrics.gaps import stream_summary

    # stream 7: [0,500) holds [100,200) and [250,300) inside it, then [600,700): own gap
    # 600 - 500 = 100, busy 500 + 100 + 50 + 100 = 750; stream 9: [50,60) [300,350): own gap
    # 300 - 60 = 240. In blocks of 1-3 ops the nested ops' and the last op's idle come from
    # the end carried over (with 2: [250,300) is not the first of its stream in its block)
    t = trace([dict(stream=7, start=0, end=500), dict(stream=9, start=50, end=60),
               dict(stream=7, start=100, end=200), dict(stream=7, start=250, end=300),
               dict(stream=9, start=300, end=350), dict(stream=7, start=600, end=700)])  # fmt: skip
    for block in (1, 2, 3, None):
        s = stream_summary(device_ops(t), block_rows=block).set_index("stream")
        assert s.loc[7, ["ops", "busy_ns", "gap_ns", "first_ns", "last_ns"]].tolist() == [
            4,
            750,
            100,
            0,
            700,
        ]
        assert s.loc[9, ["ops", "busy_ns", "gap_ns", "first_ns", "last_ns"]].tolist() == [
            2,
            60,
            240,
            50,
            350,
        ]
        assert s.index.tolist() == [9, 7]  # by gap, descending


def test_64_bit_correlation_ids_join_their_own_call():
    # packing pid << 32 | id would give (1, 2**32 + 5) and (2, 5) the same key: each kernel
    # must still find its own process's launch call
    from advisor.metrics.gaps import launch_rows

    api = pd.DataFrame({"pid": [1, 2], "correlation": [2**32 + 5, 5], "start": [100, 200],
                        "end": [110, 210], "tid": [11, 22]})  # fmt: skip
    ops = pd.DataFrame({"pid": [2, 1], "correlation": [5.0, float(2**32 + 5)]})
    assert launch_rows(ops, api).tolist() == [1, 0]


@pytest.mark.parametrize("block", [1, 2, 4, 1 << 20])
@pytest.mark.parametrize("threads", [1, 2])
def test_launch_calls_found_in_blocks_on_threads_as_whole(block, threads):
    # API calls out of key order, one key twice ((1, 5): rows 0 and 2, the first is the
    # call); ops out of key order: (1, 3) -> row 1, (2, 3) -> row 3, (1, 5) -> row 0,
    # (1, 7) and (2, 5) -> none, (1, 3) again -> row 1
    from advisor.metrics.gaps import launch_rows

    api = pd.DataFrame({"pid": [1, 1, 1, 2], "correlation": [5, 3, 5, 3]})
    ops = pd.DataFrame({"pid": [1, 2, 1, 1, 2, 1], "correlation": [3.0, 3, 5, 7, 5, 3]})
    expected = [1, 3, 0, -1, -1, 1]
    assert launch_rows(ops, api, threads, block).tolist() == expected
    # in key order (no sort of the queries): ops by (pid, correlation)
    ordered = ops.sort_values(["pid", "correlation"], kind="stable")
    assert launch_rows(ordered, api, threads, block).tolist() == [1, 1, 0, -1, 3, -1]


def test_a_launch_without_a_known_process_or_id_finds_no_call():
    # a damaged trace: process ids missing (NaN) on a call and on an op. Those rows have no
    # key (no integer is made of NaN, no warning); the others still join: op 0 (pid 7, id 3)
    # -> call 2, op 1 (pid NaN) -> none, op 2 (pid 7, id 1) -> call 0, op 3 (id NaN) -> none
    import warnings

    from advisor.metrics.gaps import launch_rows

    api = pd.DataFrame({"pid": [7.0, np.nan, 7.0], "correlation": [1, 2, 3]})
    ops = pd.DataFrame({"pid": [7.0, np.nan, 7.0, 7.0], "correlation": [3.0, 2.0, 1.0, np.nan]})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert launch_rows(ops, api).tolist() == [2, -1, 0, -1]


RELEASED = ["why/why_dataloader.sqlite", "why/why_event_wait.pt.trace.json.gz",
            "h200_train_steps.sqlite"]  # fmt: skip


@pytest.mark.parametrize("name", RELEASED)
def test_released_api_calls_attribute_as_the_kept_ones(name):
    # with release the API calls lose their correlation ids, then their process and thread
    # ids (one thread key per call instead: attribution.with_thread_keys) before the
    # attribution reads them: every op's cause, detail and piece is the same as with the
    # calls kept whole (a DataLoader's thread beside the main one; two launching threads;
    # an event wait on one thread)
    from advisor.trace.load import load_trace

    path = SAMPLES / name
    kept, released = load_trace(path), load_trace(path)
    want = attribute_gaps(device_ops(kept), kept)
    got = attribute_gaps(device_ops(released), released, release=True)
    assert list(released.api.columns) == ["start", "end", "name", "thread"]
    assert "tid" in kept.api and len(kept.api) and not len(released.api)
    assert (want[0]["cause"].notna()).any()
    pd.testing.assert_frame_equal(got[0], want[0])
    pd.testing.assert_frame_equal(got[1], want[1])


def test_device_ops_releasing_kernel_columns_makes_the_same_ops():
    # the released columns leave the trace's kernels table (in place: every holder of it
    # sees them gone) as they are read; a column the kernels lack is passed over; the ops
    # are those made with the table kept whole (a trace with copies and kernels)
    from advisor.trace.load import load_trace

    path = SAMPLES / "why" / "why_copy_after_idle.pt.trace.json.gz"
    kept, released = load_trace(path), load_trace(path)
    kernels = released.kernels
    let_go = ["device", "start", "stream", "correlation", "graph_node", "no_such_column"]
    assert len(kept.memcpy) and len(kept.kernels)
    got = device_ops(released, release=let_go)
    pd.testing.assert_frame_equal(got, device_ops(kept))
    gone = {"device", "start", "stream", "correlation", "graph_node"}
    assert gone <= set(kept.kernels.columns)
    assert set(kept.kernels.columns) - set(kernels.columns) == gone
    assert released.kernels is kernels and "end" in kernels and "name" in kernels


def test_first_value_per_run_by_hand_and_against_the_definition():
    from advisor.metrics.gaps import _first_per_run

    def first_of(values, first):  # (a run without a value: NaN, as a categorical's missing)
        return [None if pd.isna(v) else v for v in _first_per_run(values, first)]

    # runs start at 0, 2, 5: [None, b], [None, None, None], [a]: b, None, a
    values = pd.Series([None, "b", None, None, None, "a"], dtype="category")
    assert first_of(values, np.array([0, 2, 5])) == ["b", None, "a"]
    full = pd.Series(["x", "y", "y", "z"], dtype="category")  # (every row has one)
    assert first_of(full, np.array([0, 1, 3])) == ["x", "y", "z"]
    rng = np.random.default_rng(3)
    for _ in range(300):
        n = int(rng.integers(1, 9))
        raw = rng.choice(np.array(["a", "b", None], dtype=object), n)
        first = np.flatnonzero(np.r_[True, rng.random(n - 1) < 0.4])
        ends = np.append(first[1:], n)
        want = [next((v for v in raw[f:e] if v is not None), None)
                for f, e in zip(first, ends, strict=True)]  # fmt: skip
        assert first_of(pd.Series(raw, dtype="category"), first) == want, (raw, first)


def test_thread_keys_replace_the_calls_ids_by_hand():
    from advisor.metrics.attribution import _thread_keys, with_thread_keys

    api = pd.DataFrame({"start": [5, 1], "end": [6, 3], "pid": np.array([7, 7], np.int32),
                        "tid": [70, 2**40], "name": pd.Categorical(["a", "b"])})  # fmt: skip
    got = with_thread_keys(api)
    assert list(got.columns) == ["start", "end", "name", "thread"]
    assert got["thread"].tolist() == [7 * 2**26 + 70, int(_thread_keys([7], [2**40])[0])]
    assert got["start"].tolist() == [5, 1] and list(api.columns)[2:4] == ["pid", "tid"]
    assert with_thread_keys(api.iloc[:0])["thread"].dtype == np.int64


def test_gap_breakdown_per_device_and_cause_by_hand():
    # device 1: host_bound pieces of 10, 30, 20 ns and one launch_latency of 5; device 0:
    # host_bound 7. Per (device, cause): count, total, median, max; rows by total
    # descending, then device and cause
    import pandas as pd

    from advisor.metrics.attribution import CAUSES

    rows = [(1, 0, 10, "host_bound"), (1, 10, 40, "host_bound"), (1, 40, 45, "launch_latency"),
            (1, 50, 70, "host_bound"), (0, 0, 7, "host_bound")]  # fmt: skip
    pieces = pd.DataFrame(rows, columns=["device", "start", "end", "cause"])
    pieces["cause"] = pd.Categorical(pieces["cause"], categories=CAUSES)
    got = gap_breakdown(pieces)
    # (any row order gives the same table: here by device, and in cause order)
    by_cause = pieces.iloc[[4, 0, 1, 3, 2]]
    pd.testing.assert_frame_equal(gap_breakdown(by_cause), got)
    assert got.to_dict("records") == [
        {"device": 1, "cause": "host_bound", "count": 3, "total_ns": 60, "median_ns": 20.0,
         "max_ns": 30},
        {"device": 0, "cause": "host_bound", "count": 1, "total_ns": 7, "median_ns": 7.0,
         "max_ns": 7},
        {"device": 1, "cause": "launch_latency", "count": 1, "total_ns": 5, "median_ns": 5.0,
         "max_ns": 5},
    ]  # fmt: skip


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.integers(-5, 5), st.integers(-(2**40), 2**40)), min_size=1,
                max_size=40))  # fmt: skip
def test_median_in_place_is_numpys_median(values):
    # odd and even counts, ties, wide and negative values: np.median's float64 exactly
    from advisor.metrics.gaps import _median_in_place

    values = np.array(values, dtype=np.int64)
    assert _median_in_place(values.copy()) == float(np.median(values))


def test_gaps_held_as_int32_where_they_fit_and_summed_in_int64():
    from conftest import H200_SINGLE

    from advisor.metrics.columns import int32_where_fits
    from advisor.trace.load import load_trace

    assert int32_where_fits(np.array([0, 2**31 - 1])).dtype == np.int32
    assert int32_where_fits(np.array([-(2**31), 5])).dtype == np.int32
    assert int32_where_fits(np.array([0, 2**31])).tolist() == [0, 2**31]  # (kept int64)
    assert int32_where_fits(np.array([1.5])).dtype == np.float64
    assert len(int32_where_fits(np.zeros(0, dtype=np.int64))) == 0
    t = load_trace(H200_SINGLE)
    ops = attribute_gaps(device_ops(t), t)[0]
    assert ops["gap_ns"].dtype == ops["overhead_ns"].dtype == np.int32
    # a sequence's overhead sums int32 gaps in int64: three gaps of 1.5 s of launch overhead
    # (int32 each) are 4.5 s, past int32's 2.1 s
    whole = launch_sequences(ops, min_ops=1)
    big = ops.copy()
    first = int(whole.sort_values("ops").iloc[-1]["start_ns"])  # (the longest sequence)
    rows = np.flatnonzero(big["start"].to_numpy() >= first)[1:4]
    overhead = big["overhead_ns"].to_numpy().copy()
    before = int(overhead[rows].sum())
    overhead[rows] = 1_500_000_000
    big["overhead_ns"] = overhead
    got = launch_sequences(big, min_ops=1)
    row = got["start_ns"] == first
    want = (
        int(whole.loc[whole["start_ns"] == first, "overhead_ns"].iloc[0]) - before + 4_500_000_000
    )
    assert got.loc[row, "overhead_ns"].iloc[0] == want


def test_launch_keys_of_one_process_are_its_correlation_ids():
    from advisor.metrics.gaps import _keys

    # one process (7) on both sides: the ids themselves, -1 where an op has none
    calls, ops = _keys((np.array([7, 7, 7]), np.array([5, 3, 9])),
                       (np.array([7.0, 7.0]), np.array([9.0, np.nan])))  # fmt: skip
    assert calls.tolist() == [5, 3, 9] and ops.tolist() == [9, -1]
    # two processes: packed (pid 7 -> 0, pid 8 -> 1; ids 3..9: radix 7), equal pairs only
    calls, ops = _keys((np.array([7, 8, 7]), np.array([5, 3, 9])),
                       (np.array([8.0, 7.0]), np.array([5.0, 5.0])))  # fmt: skip
    assert calls.tolist() == [2, 7, 6] and ops.tolist() == [9, 2]
    # a negative id, or a missing process: packed as well (the missing pid read as 0:
    # pids 0..7, ids 1..3, radix 3: (7 - 0) * 3 + (1 - 1) = 21)
    assert _keys((np.array([7, 7]), np.array([-4, 3])))[0].tolist() == [0, 7]
    assert _keys((np.array([7.0, np.nan]), np.array([1, 3])))[0].tolist() == [21, -1]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([7, 8]), st.integers(-2, 6), st.booleans()),
                min_size=1, max_size=30), st.booleans())  # fmt: skip
def test_launch_keys_equal_and_sort_as_the_pairs(rows, one_process):
    from advisor.metrics.gaps import _keys

    pid = np.array([7 if one_process else p for p, _, _ in rows])
    corr = np.array([np.nan if gone else c for _, c, gone in rows])
    key = _keys((pid, corr))[0]
    known = ~np.isnan(corr)
    assert (key[~known] == -1).all() and (key[known] >= 0).all()
    pairs = list(zip(pid[known].tolist(), corr[known].tolist(), strict=True))
    k = key[known].tolist()
    for i in range(len(k)):
        for j in range(len(k)):
            assert (k[i] == k[j]) == (pairs[i] == pairs[j])
            assert (k[i] < k[j]) == (pairs[i] < pairs[j])
