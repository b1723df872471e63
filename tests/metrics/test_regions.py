from hand_trace import hand_trace

from advisor.analysis import analyze
from advisor.metrics.regions import top_level_ranges


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
    assert (outer.start_ns, outer.end_ns) == (1500, 5000)
    assert (outer.gpu_busy_ns, outer.idle_ns) == (2000, 1500)
    # the gap before k2 opens before the window (1000 < 1500): only k3's 1500 counts
    assert outer.launch_overhead_ns == 1500
    assert (second.start_ns, second.end_ns) == (10000, 14000)
    assert (second.gpu_busy_ns, second.idle_ns) == (2900, 1100)
    assert second.launch_overhead_ns == 1100  # host-bound 1000 + in-graph 100


def test_device_summary():
    s = analyze(hand_trace()).summary()
    assert s["span_ns"] == 15000
    assert s["gpu_busy_ns"] == 7400
    assert s["idle_ns"] == 7600
    assert s["launch_overhead_ns"] == 3100
    assert s["sync_idle_ns"] == 2000 and s["startup_idle_ns"] == 2000
    assert s["unattributed_idle_ns"] == 500


def test_select_range_recomputes_summary():
    s = analyze(hand_trace()).select("second").summary()
    assert s["span_ns"] == 4000 and s["gpu_busy_ns"] == 2900 and s["launch_overhead_ns"] == 1100


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
        ]
    )
    assert range_name(texts).tolist() == [
        "aten::mm",
        "aten::to",
        "aten::add",
        "step 3",
        "ncclAllReduce",
    ]
