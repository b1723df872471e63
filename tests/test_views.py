"""The summary views (top kernels, copies, sync stalls) and where findings point, on the
H200 samples; expected values checked against the exports with SQL (quoted below)."""

import numpy as np
from conftest import PUBLIC_NSYS, SAMPLES, analysis_of

from advisor import views
from advisor.findings import find
from advisor.metrics.waves import with_configuration

TRAIN = SAMPLES / "h200_train_steps.sqlite"


def test_copies_by_direction_and_host_memory():
    # SELECT copyKind, srcKind, dstKind, count(*), sum(bytes) FROM CUPTI_ACTIVITY_KIND_MEMCPY
    # GROUP BY 1, 2, 3  ->  (1 HtoD, 0 pageable, 2 device, 57, 84615552),
    # (2 DtoH, 2 device, 1 pinned, 6, 24), (8 DtoD, 2, 2, 72, 301989888)
    c = views.copies(analysis_of(TRAIN)).set_index(["kind", "host_memory"])
    assert c.loc[("HtoD", "pageable"), "count"] == 57
    assert c.loc[("HtoD", "pageable"), "bytes"] == 84_615_552
    assert c.loc[("DtoH", "pinned"), "bytes"] == 24
    assert c.loc[("DtoD", "device"), "bytes"] == 301_989_888
    row = c.loc[("HtoD", "pageable")]
    assert np.isclose(row["gb_per_s"], row["bytes"] / row["total_ns"])


def test_top_kernels_shares_add_up():
    a = analysis_of(SAMPLES / "h200_scheduling.sqlite")
    t = views.top_kernels(a)
    assert t["total_ns"].is_monotonic_decreasing
    assert np.isclose(t.groupby("device")["share"].sum(), 1.0).all()
    kernels = a.ops[a.ops["kind"].eq("kernel")]
    assert t["total_ns"].sum() == (kernels["end"] - kernels["start"]).sum()
    assert t["launches"].sum() == len(kernels)
    # the 18 launches of tiled_gemm_kernel (3 shapes x (5 steps + 1 warm-up)) lead
    assert (t.loc[0, "name"], t.loc[0, "launches"]) == ("tiled_gemm_kernel", 18)


def test_sync_stalls_name_the_blocking_call():
    a = analysis_of(SAMPLES / "h200_scheduling.sqlite")
    s = views.sync_stalls(a).set_index("call")
    p = a.pieces[a.pieces["cause"].isin(["synchronization", "blocking_copy"])]
    assert s["gaps"].sum() == len(p) and s["total_ns"].sum() == (p["end"] - p["start"]).sum()
    # .item() = cudaMemcpyAsync + cudaStreamSynchronize: the stream synchronize of each of
    # sync_in_loop's 20 iterations (nested in the NVTX ranges "step i", named as their
    # family "step") holds the gap after it, but the last one's (no GPU work follows it)
    assert s.loc["cudaStreamSynchronize (in step)", "gaps"] == 19
    worst = p.loc[(p["end"] - p["start"]).idxmax()]
    assert worst["start"] in set(s["worst_at_ns"])


def test_sync_stalls_worst_is_the_earliest_of_the_longest_whatever_the_pieces_order():
    # device 0, no call named ("unknown" for both causes): synchronization 5 ns at 40 and
    # 2 ns at 60, blocking_copy 5 ns at 10; in cause order (synchronization first), as the
    # attribution gives them. One row: 3 gaps, 12 ns, median 5, max 5, the longest two tie
    # and the earlier, at 10, is the worst
    from types import SimpleNamespace

    import pandas as pd

    from advisor.metrics.attribution import CAUSES

    cause = ["synchronization", "synchronization", "blocking_copy"]
    pieces = pd.DataFrame({
        "device": np.zeros(3, dtype=np.int32), "start": [40, 60, 10], "end": [45, 62, 15],
        "cause": pd.Categorical(cause, categories=CAUSES), "detail": pd.Categorical([""] * 3),
    })  # fmt: skip
    got = views._sync_stalls(SimpleNamespace(pieces=pieces))
    assert got.drop(columns="device").to_dict("records") == [
        {"call": "unknown", "gaps": 3, "total_ns": 12, "median_ns": 5, "max_ns": 5,
         "worst_at_ns": 10}
    ]  # fmt: skip


def test_findings_point_at_their_worst_instance():
    a = analysis_of(SAMPLES / "h200_scheduling.sqlite")
    f = next(x for x in find(a) if x.rule == "wave-tail-gemm" and x.region == "tail_gemm")
    launches = with_configuration(a.launch_table(), a.configs)  # (grids: the configurations')
    launches = launches[(launches["region"] == "tail_gemm") & (launches["grid_y"] == 19)]
    worst = launches.loc[launches["tail_idle_ns"].idxmax()]
    assert f.at_ns == worst["start"]
    assert f.at_rel_ns == worst["start"] - a.ops["start"].min()
    # (h200_scheduling's launch-bound sequences lie outside every range, where a
    # launch-bound-range finding now covers them: a public trace's instead)
    a = analysis_of(PUBLIC_NSYS / "nsysai_2gpu_sendrecv_after_nsys2026.2.sqlite")
    seq = next(x for x in find(a) if x.rule == "launch-bound-sequence")
    assert seq.at_ns in set(a.sequences["start_ns"])


def test_top_kernels_by_hand():
    # device 0: a 10, 30, 20 ns (median 20), b 5, 6 (5.5 rounds to 6), c 4, 5 (4.5 rounds
    # half to even: 4); device 1: a 100. Most time first: a/1 100, a/0 60, b/0 11, c/0 9;
    # shares of each device's kernel time: 60/80, 11/80, 9/80 and 1
    from builders import trace

    from advisor.analysis import analyze

    runs = [(0, "a", 10), (0, "b", 5), (0, "a", 30), (0, "c", 4), (0, "b", 6), (0, "a", 20),
            (0, "c", 5), (1, "a", 100)]  # fmt: skip
    rows, t = [], 0
    for device, name, took in runs:
        rows.append({"device": device, "name": name, "start": t, "end": t + took})
        t += took + 1000
    top = views.top_kernels(analyze(trace(rows)))
    assert top[["name", "device", "launches", "total_ns", "median_ns"]].values.tolist() == [
        ["a", 1, 1, 100, 100],
        ["a", 0, 3, 60, 20],
        ["b", 0, 2, 11, 6],
        ["c", 0, 2, 9, 4],
    ]
    assert top["share"].tolist() == [1.0, 60 / 80, 11 / 80, 9 / 80]
    assert top["median_ns"].dtype == np.int64 and top["total_ns"].dtype == np.int64


def test_sync_stalls_count_a_missing_or_empty_detail_and_unknown_as_one_call():
    # device 0: "" (4 ns at 0), a missing detail (NaN: 6 ns at 20) and "unknown" (2 ns at 40)
    # are one call "unknown" (3 gaps, 12 ns, median 4); "cudaDeviceSynchronize" (8 ns at 50)
    # its own; on device 1 "cudaDeviceSynchronize" again (1 ns at 70). Calls sorted by name
    # within a device before the time order: most time first
    from types import SimpleNamespace

    import pandas as pd

    from advisor.metrics.attribution import CAUSES

    detail = pd.Categorical(["", None, "unknown", "cudaDeviceSynchronize", "cudaDeviceSynchronize"])
    pieces = pd.DataFrame({
        "device": np.array([0, 0, 0, 0, 1], dtype=np.int32), "start": [0, 20, 40, 50, 70],
        "end": [4, 26, 42, 58, 71], "cause": pd.Categorical(["synchronization"] * 5, CAUSES),
        "detail": detail,
    })  # fmt: skip
    got = views._sync_stalls(SimpleNamespace(pieces=pieces))
    assert got[["device", "call", "gaps", "total_ns", "median_ns", "worst_at_ns"]].to_dict(
        "records") == [
        {"device": 0, "call": "unknown", "gaps": 3, "total_ns": 12, "median_ns": 4,
         "worst_at_ns": 20},
        {"device": 0, "call": "cudaDeviceSynchronize", "gaps": 1, "total_ns": 8, "median_ns": 8,
         "worst_at_ns": 50},
        {"device": 1, "call": "cudaDeviceSynchronize", "gaps": 1, "total_ns": 1, "median_ns": 1,
         "worst_at_ns": 70},
    ]  # fmt: skip


def test_copies_by_hand_with_a_missing_memory_kind():
    # device 0: an HtoD copy whose source memory is not recorded ("unknown", 10 ns, 100 B),
    # a DtoH into pinned memory (20 ns), a DtoD ("device", 30 ns) and a memset (5 ns, 50 B).
    # Most time first. (Text columns as the console's pandas options hold them, objects,
    # or as pandas 3 infers them: the same table)
    from types import SimpleNamespace

    import pandas as pd

    kinds = pd.Categorical(["memcpy", "memcpy", "memcpy", "memset"],
                           categories=["kernel", "memcpy", "memset"])  # fmt: skip
    ops = pd.DataFrame({"kind": kinds, "src": [0, 1, 2, 0], "device": np.zeros(4, np.int32),
                        "start": [0, 100, 200, 300], "end": [10, 120, 230, 305]})  # fmt: skip
    texts = {"kind": ["HtoD", "DtoH", "DtoD"], "src_memory": [None, "pageable", "device"],
             "dst_memory": ["device", "pinned", "device"]}  # fmt: skip
    want = [
        {"kind": "DtoD", "host_memory": "device", "count": 1, "bytes": 300, "total_ns": 30},
        {"kind": "DtoH", "host_memory": "pinned", "count": 1, "bytes": 200, "total_ns": 20},
        {"kind": "HtoD", "host_memory": "unknown", "count": 1, "bytes": 100, "total_ns": 10},
        {"kind": "memset", "host_memory": "device", "count": 1, "bytes": 50, "total_ns": 5},
    ]
    for as_objects in (True, False):
        memcpy = pd.DataFrame({
            **{c: pd.Series(np.array(v, dtype=object), dtype=object if as_objects else "str")
               for c, v in texts.items()},
            "bytes": [100, 200, 300],
        })  # fmt: skip
        trace = SimpleNamespace(memcpy=memcpy, memset=pd.DataFrame({"bytes": [50]}))
        got = views._copies(SimpleNamespace(ops=ops, trace=trace))
        assert got[["kind", "host_memory", "count", "bytes", "total_ns"]].to_dict("records") == want
