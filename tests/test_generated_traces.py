"""Whole generated traces (hypothesis): analysis, rules and both renderers never crash, and
the totals agree with each other on every trace."""

import io
import json

import numpy as np
import pandas as pd
from builders import trace
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.console import Console

from advisor.analysis import IDLE_COLUMNS, analyze
from advisor.findings import find
from advisor.render import json as json_render
from advisor.render import terminal

NAMES = ["gemm_kernel", "ncclDevKernel_AllReduce_Sum_bf16", "elementwise", "my_persistent_gemm"]

launch = st.fixed_dictionaries(
    {
        "device": st.integers(0, 1),
        "stream": st.integers(7, 9),
        "start": st.integers(0, 100_000),
        "dur": st.integers(0, 20_000),
        "name": st.sampled_from(NAMES),
        "grid_x": st.integers(1, 600),
        "block_x": st.sampled_from([32, 128, 256, 1024]),
        "registers": st.integers(16, 255),
        "traced": st.booleans(),  # has a launch call in the API table
        "host_lag": st.integers(-5_000, 5_000),
    }
)
ranges = st.lists(st.tuples(st.sampled_from(["fwd", "bwd", "opt"]), st.integers(0, 100_000),
                            st.integers(1, 50_000)), max_size=4)  # fmt: skip


def build(launches, nvtx_rows, sync_at):
    rows, calls = [], []
    for i, x in enumerate(launches):
        corr = i + 1
        rows.append(dict(device=x["device"], stream=x["stream"], start=x["start"],
                         end=x["start"] + x["dur"], name=x["name"], grid_x=x["grid_x"],
                         block_x=x["block_x"], registers=x["registers"],
                         correlation=float(corr)))  # fmt: skip
        if x["traced"]:
            at = max(0, x["start"] + x["host_lag"] - 3_000)
            calls.append(("cudaLaunchKernel", at, at + 2_000, corr))
    for at in sync_at:
        calls.append(("cudaDeviceSynchronize", at, at + 4_000, None))
    t = trace(rows, calls, [(name, s, s + d) for name, s, d in nvtx_rows])
    return t


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(launch, min_size=1, max_size=30), ranges, st.lists(st.integers(0, 100_000), max_size=3)
)
def test_generated_traces_analyse_consistently(launches, nvtx_rows, sync_at):
    a = analyze(build(launches, nvtx_rows, sync_at))
    findings = find(a)
    doc = json.loads(json_render.render(a, findings))
    terminal.render(a, findings, Console(file=io.StringIO(), width=160))

    for d in a.devices.itertuples():
        window = d.end_ns - d.start_ns
        assert d.gpu_busy_ns + d.idle_ns == window and d.idle_ns >= 0
        # every gap of a device is idle time with exactly one cause
        assert sum(getattr(d, c) for c in IDLE_COLUMNS) == d.idle_ns
        assert 0 <= d.overlap_ns <= min(d.comm_ns, d.compute_ns)
        assert d.exposed_comm_ns == d.comm_ns - d.overlap_ns
        assert d.comm_ns <= d.gpu_busy_ns and d.compute_ns <= d.gpu_busy_ns
    r = a.regions
    if len(r):
        # (a region is measured from the gap its first op held: lead_ns before its start)
        window = r["end_ns"] - r["start_ns"] + r["lead_ns"]
        assert (r["gpu_busy_ns"] + r["idle_ns"] == window).all()
        assert (r[list(IDLE_COLUMNS)].sum(axis=1) == r["idle_ns"]).all()
        assert (
            r["overlap_ns"] <= pd.concat([r["comm_ns"], r["compute_ns"]], axis=1).min(axis=1)
        ).all()
    k = a.ops[a.ops["kind"].eq("kernel")]
    # 'unattributed' only where no launch call is known; a known call never leaves a gap
    # unattributed, an unknown one leaves it so unless it lies before the steady state
    gap = k[k["gap_ns"] > 0]
    called = a.trace.api["correlation"].dropna()  # (one process: correlation ids join)
    corr = a.trace.kernels["correlation"].to_numpy()[gap["src"].to_numpy()]
    no_call = pd.Series(~np.isin(corr, called.to_numpy()), index=gap.index)
    assert (~gap["cause"].eq("unattributed") | no_call).all()
    assert (~no_call | gap["cause"].isin(["unattributed", "startup"])).all()
    # every gap's pieces sum to it, and launch latency never exceeds the 100 us bound
    p = a.pieces.assign(ns=a.pieces["end"] - a.pieces["start"])
    per_gap = p.groupby("row")["ns"].sum()
    assert (per_gap.to_numpy() == a.ops.loc[per_gap.index, "gap_ns"].to_numpy()).all()
    assert (p.loc[p["cause"].eq("launch_latency"), "ns"] <= 100_000).all()
    assert (k["gap_ns"].eq(0) == k["cause"].isna()).all()
    durations = (k["end"] - k["start"]).sum()
    launches = a.launch_table()
    assert (launches["tail_idle_ns"] + launches["underfill_idle_ns"]).sum() <= durations
    spans = (a.devices["end_ns"] - a.devices["start_ns"]).groupby(a.devices["device"]).sum()
    for f in findings:
        assert 0 <= f["est_savings_ns"] <= spans[f["device"]]
    assert doc["summary"]["idle_ns"] == int(a.devices["idle_ns"].sum())
