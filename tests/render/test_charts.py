"""What the report's charts plot (the data each chart is drawn from, not its pixels), checked
against numbers worked out apart: by hand on hand-built traces, and on the sample traces from
the JSON document ``advisor analyze --format json`` prints and from the raw ops."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from builders import trace
from conftest import H200_2GPU, SAMPLES, analysis_of
from hand_trace import hand_trace

from advisor.analysis import analyze
from advisor.metrics import intervals as iv
from advisor.render import charts
from advisor.render.fit import ELLIPSIS

# the summary's idle columns and the attribution causes each sums (docs/metrics.md)
CAUSES_OF = {
    "launch_overhead_ns": ("host_bound", "launch_latency", "graph_internal"),
    "sync_idle_ns": ("synchronization",),
    "copy_idle_ns": ("blocking_copy",),
    "input_idle_ns": ("input_pipeline",),
    "host_busy_idle_ns": ("host_busy",),
    "queued_idle_ns": ("queued_wait",),
    "unattributed_idle_ns": ("unattributed",),
}


# --- gaps.png: the steady idle by cause, in time ----------------------------------------


def test_idle_by_cause_by_hand():
    # tests/metrics/hand_trace.py, worked out there: host_bound 3200 + launch_latency 2400 +
    # graph_internal 100 = launch overhead 5700; synchronization 500; unattributed 500;
    # start-up 900 (the module load) left out: steady idle 6700 of 15000 - 900 = 14100
    d = charts.idle_by_cause(analyze(hand_trace()))
    assert d.causes[["column", "idle_ns"]].values.tolist() == [
        ["launch_overhead_ns", 5700], ["sync_idle_ns", 500], ["unattributed_idle_ns", 500],
    ]  # fmt: skip
    assert d.causes["share"].tolist() == pytest.approx([5700 / 6700, 500 / 6700, 500 / 6700])
    assert d.causes["label"][0] == "launch overhead (host launching + latency + in-graph)"
    assert (d.steady_idle_ns, d.steady_ns, d.startup_ns) == (6700, 14100, 900)
    assert d.per_device[0].tolist() == [5700, 500, 500]


@pytest.fixture(scope="module")
def two_gpu_json() -> dict:
    proc = subprocess.run([sys.executable, "-m", "advisor", "analyze", str(H200_2GPU),
                           "--format", "json"], capture_output=True, text=True,
                          timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_idle_by_cause_is_what_the_json_says(two_gpu_json):
    a = analysis_of(H200_2GPU)
    d = charts.idle_by_cause(a)
    s = two_gpu_json["summary"]
    want = {c: s[c] for c in CAUSES_OF if s[c] > 0}
    assert dict(zip(d.causes["column"], d.causes["idle_ns"], strict=True)) == want
    # largest first: the dominant cause is the first bar
    assert d.causes["idle_ns"].is_monotonic_decreasing
    assert d.causes["column"][0] == max(want, key=want.get)
    assert d.steady_idle_ns == s["idle_ns"] - s["startup_idle_ns"]
    assert d.startup_ns == s["startup_idle_ns"] > 0
    # per device (stacked): each device's share from the raw idle pieces, summed by hand
    p = a.pieces.assign(ns=a.pieces["end"] - a.pieces["start"]).astype({"cause": str})
    for col, causes in CAUSES_OF.items():
        if col not in want:
            continue
        for device in (0, 1):
            got = int(d.per_device.loc[col, device])
            assert got == p[(p["device"] == device) & p["cause"].isin(causes)]["ns"].sum()
        assert d.per_device.loc[col].sum() == want[col]


def test_idle_by_cause_counts_time_not_gaps():
    # the 2-GPU sample: hundreds of short launch gaps, few long host gaps; the chart's bars
    # are their time (before, gaps.png counted gaps: launch latency looked largest)
    a = analysis_of(H200_2GPU)
    d = charts.idle_by_cause(a).causes.set_index("column")["idle_ns"]
    g = a.gaps.astype({"cause": str})
    launch_gaps = g[g["cause"].isin(CAUSES_OF["launch_overhead_ns"])]["count"].sum()
    host_gaps = g[g["cause"].eq("host_busy")]["count"].sum()
    assert launch_gaps > 10 * host_gaps  # more gaps...
    assert d["host_busy_idle_ns"] > d["launch_overhead_ns"]  # ...but less time


# --- waves.png: kernels ranked by quantization idle --------------------------------------

# H200: 132 SMs; blocks of 1024 threads with 32 registers fit 2 per SM -> 264 slots
WAVE_KERNELS = [  # (name, grid, launch ns, launches)
    ("gemm_tail_kernel", 265, 10_000, 2),  # 1.0038 waves: tail 1 - (265/264)/2 of 2 x 10 us
    ("underfill_kernel", 66, 20_000, 1),  # 0.25 wave: under-fill 0.75 x 20 us = 15000
    ("one_block_kernel", 1, 50_000, 1),  # one block: left out (49.8 us of "under-fill")
    ("tiny_kernel", 132, 2_000, 1),  # a 2 us launch: left out (under the 5 us floor)
    ("full_kernel", 264, 30_000, 1),  # exactly 1 wave: no idle, left out
    ("nearly_full_kernel", 26401, 10_000, 1),  # 100.0038 waves: 98.6 ns < 1 % of 15000
    ("small_tail_kernel", 529, 6_000, 1),  # 2.0038 waves: tail 1 - 2.0038/3 of 6 us
    ("nvjet_sm90_tst_128x128_gemm", 132, 100_000, 1),  # persistent GEMM with the most time
]


def _wave_trace():
    rows, at = [], 0
    for name, grid, ns, n in WAVE_KERNELS:
        for _ in range(n):
            rows.append(dict(name=name, grid_x=grid, block_x=1024, start=at, end=at + ns))
            at += ns + 1000
    return trace(rows)


def test_wave_rows_by_hand():
    w = charts.wave_rows(analyze(_wave_trace()))
    r = w.rows
    assert r["name"].tolist() == ["underfill_kernel", "gemm_tail_kernel", "small_tail_kernel",
                                  "nvjet_sm90_tst_128x128_gemm"]  # fmt: skip
    tail = 2 * 10_000 * (1 - (265 / 264) / 2)  # 9962.12
    small = 6_000 * (1 - (529 / 264) / 3)  # 1992.42
    assert r["idle_ns"].tolist() == pytest.approx([15_000, tail, small, 0])
    assert r["tail_idle_ns"].tolist() == pytest.approx([0, tail, small, 0])
    assert r["underfill_idle_ns"].tolist() == pytest.approx([15_000, 0, 0, 0])
    assert r["waves"].tolist() == pytest.approx([66 / 264, 265 / 264, 529 / 264, 132 / 264])
    # the persistent GEMM is shown, marked, last: its grid does not quantize, no tail
    assert r["dominant_gemm"].tolist() == [False, False, False, True]
    assert r["status"].tolist() == ["under-fill", "tail", "tail",
                                    "persistent: loops over its tiles, no wave tail"]  # fmt: skip
    assert {k: n for k, n in w.left_out.items() if n} == {"short": 1, "one_block": 1,
                                                          "negligible": 2}  # fmt: skip
    assert r["label"].tolist() == ["underfill_kernel  grid 66x1x1", "gemm_tail_kernel  grid "
                                   "265x1x1", "small_tail_kernel  grid 529x1x1",
                                   "nvjet_sm90_tst_128x128_gemm  grid 132x1x1"]  # fmt: skip
    # the top 2 only: the third is counted as left out, the dominant GEMM still shown
    w2 = charts.wave_rows(analyze(_wave_trace()), top=2)
    assert w2.rows["name"].tolist() == ["underfill_kernel", "gemm_tail_kernel",
                                        "nvjet_sm90_tst_128x128_gemm"]  # fmt: skip
    assert w2.left_out["below_top"] == 1
    # a launch whose grid the trace did not record is left out for that, not for facts the
    # GPU has (an H200's are here)
    nan = float("nan")
    rows = [dict(name="a", grid_x=265, block_x=1024, start=0, end=10_000),
            dict(name="b", grid_x=nan, block_x=1024, start=20_000, end=40_000)]  # fmt: skip
    w3 = charts.wave_rows(analyze(trace(rows)))
    assert {k: n for k, n in w3.left_out.items() if n} == {"no_grid": 1}


def test_wave_rows_on_the_two_gpu_sample(two_gpu_json):
    a = analysis_of(H200_2GPU)
    w = charts.wave_rows(a)
    r = w.rows
    # the dominant GEMM (cuBLAS nvjet, persistent: most of the GPU time) is shown on both
    # devices, marked, with no tail (before, waves.png left it out)
    dom = r[r["dominant_gemm"]]
    assert sorted(dom["device"]) == [0, 1]
    assert dom["name"].str.startswith("nvjet_sm90").all()
    assert (dom["status"] == "persistent: loops over its tiles, no wave tail").all()
    assert r.tail(2)["dominant_gemm"].all()
    # the others: ranked by idle, each equal to the JSON's tail + under-fill of its group
    rest = r[~r["dominant_gemm"]]
    assert rest["idle_ns"].is_monotonic_decreasing and (rest["idle_ns"] > 0).all()
    k = pd.DataFrame(two_gpu_json["kernels"])
    k["grid"] = k["grid"].map(lambda g: "x".join(map(str, g)) if isinstance(g, list) else g)
    for row in rest.itertuples():
        match = k[(k["name"] == row.name) & (k["device"] == row.device)
                  & (k["grid"] == row.grid)]  # fmt: skip
        assert len(match) == 1, (row.name, row.grid, k["grid"].head())
        idle = float(match["tail_idle_ns"].iloc[0] + match["underfill_idle_ns"].iloc[0])
        assert row.idle_ns == pytest.approx(idle, abs=1)
    # NCCL kernels left out (grids sized to channels), and said so; no 1-block grid shown
    assert not r["name"].str.contains("nccl").any()
    assert w.left_out["comm"] == int(k["comm"].sum()) == 4
    assert r["label"].is_unique and r["label"].str.contains(", dev ").all()


def test_labels_tell_rows_apart():
    # same name and grid: the block says which is which; names that read the same once
    # shortened keep the part where they differ, an ellipsis where text was cut
    long_a = "sm80_xmma_gemm_f32f32_tn_n_tilesize64x128x8_stage3_warpsize1x4x1_ffma_kernel"
    long_b = "sm80_xmma_gemm_f32f32_tn_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma_kernel"
    rows = pd.DataFrame({
        "name": ["k", "k", long_a, long_b],
        "demangled": ["k", "k", long_a, long_b],
        "device": 0, "grid_x": [300, 300, 8, 8], "grid_y": 1, "grid_z": 1,
        "block_threads": [1024, 512, 256, 256], "registers": 32, "smem_per_block": 0,
        "m": np.nan, "n": np.nan, "k": np.nan, "shape_source": np.nan,
    })  # fmt: skip
    labels = charts.row_labels(rows, several_devices=False, width=30)
    assert labels[:2] == ["k  grid 300x1x1, block 1024", "k  grid 300x1x1, block 512"]
    assert len(set(labels)) == 4
    for label, full, differs in ((labels[2], long_a, "64x128x8"), (labels[3], long_b,
                                                                     "128x128x8")):  # fmt: skip
        name = label.split("  grid ")[0]
        assert ELLIPSIS in name and len(name) < len(full)
        assert differs in name and name.startswith("sm80_xmma")
    # C++ names: no "void", no parameter list, template arguments only where they matter
    assert charts.simplify_name("void at::native::reduce_kernel<512, 1, at::Op<float>>(at::R)") \
        == f"at::native::reduce_kernel<{ELLIPSIS}>"  # fmt: skip


def test_labels_distinct_on_the_train_steps_samples():
    # Nsight names many CUTLASS templates "Kernel2": the demangled name tells them apart
    for path in (SAMPLES / "h200_train_steps.sqlite",
                 SAMPLES / "kineto" / "h200_train_steps.pt.trace.json.gz"):  # fmt: skip
        r = charts.wave_rows(analysis_of(path)).rows
        assert r["label"].is_unique, r["label"].tolist()
        assert not r["label"].str.endswith(("#2", "#3")).any()
        cutlass = r[r["name"].str.contains("Kernel2")]
        assert len(cutlass) >= 2 and cutlass["label"].str.contains("sgemm|align1").all()
        assert (r["label"].str.split("  grid ").str[0].str.len() <= charts.NAME_WIDTH + 24).all()


# --- timeline.png: the steady part at scale, start-up compressed and marked ---------------


def _startup_trace():
    # an "init" range with one kernel, a 999 us start-up gap, then 4 "step"s (20 us apart),
    # each two 5 us kernels launched 200-100 ns before they start: the steady state begins
    # with the first step (the range that recurs to the end), so [T + 1000, T + 1 ms) is
    # start-up and the only stretch to compress
    t0 = 1_000_000
    rows = [dict(start=t0, end=t0 + 1000, correlation=1)]
    api = [("cudaLaunchKernel", t0 - 300, t0 - 200, 1)]
    ranges = [("init", t0 - 500, t0 + 2000)]
    for i in range(4):
        s = t0 + 1_000_000 + 20_000 * i
        ranges.append((f"step_{i}", s - 500, s + 16_000))
        for j, at in enumerate((s, s + 10_000)):
            c = 10 + 2 * i + j
            rows.append(dict(start=at, end=at + 5000, correlation=c))
            api.append(("cudaLaunchKernel", at - 200, at - 100, c))
    return trace(rows, api, ranges)


def test_timeline_by_hand():
    t = charts.timeline_data(analyze(_startup_trace()))
    t0 = 1_000_000
    assert (t.t0, t.t1) == (t0, t0 + 1_075_000)
    assert [(b.start_ns, b.end_ns, b.active_ns) for b in t.bands] == [
        (t0 + 1000, t0 + 1_000_000, 0)
    ]
    # drawn: 1 us before the band, the band at 2 % of the 76 us drawn to scale, 75 us after
    assert t.bands[0].x0 == pytest.approx(0.001)
    assert t.bands[0].x1 - t.bands[0].x0 == pytest.approx(0.02 * 0.076)
    assert t.width == pytest.approx(0.076 + 0.02 * 0.076)
    # nothing hidden: busy share x bin length sums to the busy time, 1 + 8 x 5 us
    busy = (t.busy[0] * np.diff(t.edges_ns)).sum()
    assert busy == pytest.approx(41_000)
    # every range in the legend; the steps' family named once
    assert t.legend == ["init", "step"] and t.others == 0
    # ticks at true times from the first op (us: the span is over 1 ms, so ms)
    for x, label in t.ticks:
        true = np.interp(x, [0, 0.001, t.bands[0].x1, t.width],
                         [0, 1000, 1_000_000, 1_075_000])  # fmt: skip
        assert float(label) == pytest.approx(true / 1e6, abs=1e-9)


def test_timeline_takes_in_sparse_warm_up_work():
    # a warm-up of 50 kernels of 1 us every 21 us (start-up: before the first of 4 "step"s,
    # which recur to the end), then the steps (10 kernels of 15 us every 20 us, 200 us
    # apart): the warm-up kernels are 4.8 % of its time and each far shorter than the steady
    # part (800 us), so one band takes them in: from the end of the first kernel to the first
    # step, holding the other 49 kernels (49 us)
    rows, api = [], []
    for i in range(50):
        at = 21_000 * i
        rows.append(dict(name="warm", start=at, end=at + 1000, correlation=i + 1))
        api.append(("cudaLaunchKernel", at - 300, at - 200, i + 1))
    first_step = 21_000 * 50 + 100_000
    ranges = [("init", -500, first_step - 1000)]
    for i in range(4):
        s = first_step + 200_000 * i
        ranges.append((f"step_{i}", s - 500, s + 195_000))
        for j in range(10):
            c, at = 100 + 10 * i + j, s + 20_000 * j
            rows.append(dict(name="step_kernel", start=at, end=at + 15_000, correlation=c))
            api.append(("cudaLaunchKernel", at - 200, at - 100, c))
    t = charts.timeline_data(analyze(trace(rows, api, ranges)))
    assert [(b.start_ns, b.end_ns, b.active_ns) for b in t.bands] == [(1000, first_step, 49_000)]
    assert (t.busy[0] * np.diff(t.edges_ns)).sum() == pytest.approx(50_000 + 40 * 15_000)


def test_timeline_two_gpu_sample_is_on_its_steady_part():
    a = analysis_of(H200_2GPU)
    t = charts.timeline_data(a)
    # before: most of the width was the warm-up's idle stretch; now it is one band and the
    # measured ranges (allreduce_*, 17 ms of 878) take most of the drawing
    assert len(t.bands) == 1
    band = t.bands[0]
    assert band.end_ns - band.start_ns > 0.95 * (t.t1 - t.t0)
    steady = t.ranges[t.ranges["name"].str.startswith("allreduce") & (t.ranges["device"] == 0)]
    assert (steady["x1"] - steady["x0"]).sum() > 0.75 * t.width
    # the GPU work in the band (ops counted from scratch) is part of its active time, which
    # is at most SPARSE of it (here under 1 %)
    ops = a.ops
    s, e = iv.union(ops["start"].to_numpy(), ops["end"].to_numpy())
    ran = iv.covered_in_windows((s, e), [band.start_ns], [band.end_ns])[0]
    assert 0 < ran <= band.active_ns <= 0.01 * (band.end_ns - band.start_ns)
    # nothing hidden: each device's busy share x bin length sums to its busy time
    for device in (0, 1):
        d = ops[ops["device"] == device]
        s, e = iv.union(d["start"].to_numpy(), d["end"].to_numpy())
        assert (t.busy[device] * np.diff(t.edges_ns)).sum() == pytest.approx((e - s).sum())
    assert set(t.legend) == set(a.regions["name"].astype(str))


def test_timeline_keeps_work_at_scale():
    # the scheduling sample: 2.7 s of start-up before short GEMM ranges; the ranges that ran
    # work are drawn at scale, never inside a band
    a = analysis_of(SAMPLES / "h200_scheduling.sqlite")
    t = charts.timeline_data(a)
    for r in t.ranges.itertuples():
        inside = any(b.start_ns <= r.start_ns and r.end_ns <= b.end_ns for b in t.bands)
        assert not inside, r.name
    assert {"tail_gemm", "full_wave_gemm", "underfilled_long_k"} <= set(t.legend)
    busy = [(t.busy[0] * np.diff(t.edges_ns)).sum()]
    assert busy[0] == pytest.approx(a.devices["gpu_busy_ns"].sum())
