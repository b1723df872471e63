import pandas as pd
import pytest
from hand_trace import hand_trace

from advisor.metrics.gaps import attribute_gaps, device_ops, gap_breakdown, launch_sequences


@pytest.fixture(scope="module")
def gaps():
    t = hand_trace()
    return attribute_gaps(device_ops(t), t.api)


def test_each_gap_gets_its_cause(gaps):
    causes = [None if pd.isna(c) else c for c in gaps["cause"]]  # NaN: no gap
    got = list(zip(gaps["gap_ns"], causes, strict=True))
    assert got == [
        (0, None),
        (500, "launch_latency"),
        (1500, "host_bound"),
        (2000, "synchronization"),
        (2000, "startup"),
        (1000, "host_bound"),
        (100, "graph_internal"),
        (500, "unattributed"),
    ]


def test_breakdown_totals(gaps):
    b = gap_breakdown(gaps).set_index("cause")["total_ns"].to_dict()
    assert b == {
        "synchronization": 2000,
        "startup": 2000,
        "host_bound": 2500,
        "launch_latency": 500,
        "unattributed": 500,
        "graph_internal": 100,
    }


def test_sync_call_that_did_not_hold_back_the_launch_does_not_own_the_gap():
    # A long synchronize that began before the device went idle and a launch issued
    # before that: the gap is launch latency, not synchronization.
    from builders import trace

    t = trace(
        [dict(start=0, end=1000, correlation=1), dict(start=1200, end=2000, correlation=2)],
        [("cudaLaunchKernel", 100, 150, 2), ("cudaDeviceSynchronize", 200, 2100, None)],
    )
    g = attribute_gaps(device_ops(t), t.api)
    assert [None if pd.isna(c) else c for c in g["cause"]] == [None, "launch_latency"]


def test_sequences_and_graph_saving(gaps):
    s = launch_sequences(gaps).sort_values("start_ns").reset_index(drop=True)
    # sequences split at sync (k4), startup (k5) and unattributed (k8); singles dropped
    assert s[["start_ns", "end_ns", "ops", "launches"]].values.tolist() == [
        [0, 5000, 3, 3],
        [10000, 14000, 3, 2],  # the graph replay counts as one launch
    ]
    assert s["overhead_ns"].tolist() == [2000, 1100]
    # eager gaps minus the 256 ns graph node gap: (500-256)+(1500-256); (1000-256)
    assert s["graph_saving_ns"].tolist() == [1488, 744]


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
    g = attribute_gaps(device_ops(t), t.api)
    assert g["gap_ns"].sum() == 0  # the device itself never idled


def test_64_bit_correlation_ids_join_their_own_call():
    # packing pid << 32 | id would give (1, 2**32 + 5) and (2, 5) the same key: each kernel
    # must still find its own process's launch call
    from advisor.metrics.gaps import _launch_calls

    api = pd.DataFrame({"pid": [1, 2], "correlation": [2**32 + 5, 5], "start": [100, 200],
                        "end": [110, 210], "tid": [11, 22]})  # fmt: skip
    ops = pd.DataFrame({"pid": [2, 1], "correlation": [5.0, float(2**32 + 5)]})
    got = _launch_calls(ops, api)
    assert got["api_start"].tolist() == [200, 100] and got["api_tid"].tolist() == [22, 11]
