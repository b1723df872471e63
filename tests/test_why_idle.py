"""Issue 28: the cause advisor names for idle time, on public traces from other projects and
on this project's own H200 captures (sample_traces/why), against numbers worked out without
advisor:

- public traces: an independent check (plain json, no advisor code) run for this issue;
  its definitions are the ones below: GPU ops of the device with the most ops sorted by
  (start, end); the gap before an op = its start - the latest end of the earlier ops; the
  op's launch call = the runtime event with its correlation id; times rounded to whole ns;
- own captures: sample_traces/why/truth.py (the same definitions, plain json / sqlite3).
"""

from pathlib import Path

import pandas as pd
import pytest
from conftest import analysis_of, unpacked

from advisor.findings import find
from advisor.metrics.attribution import GRAPH_HELD
from advisor.metrics.regions import OUTSIDE_RANGES
from advisor.rules.tables import build_tables

ROOT = Path(__file__).resolve().parents[1]
PUBLIC = ROOT / "tests" / "data" / "public" / "kineto"
WHY = ROOT / "sample_traces" / "why"


def pieces(a) -> pd.DataFrame:
    """The idle pieces with their length (ns) and the ending op's start and name."""
    p = a.pieces.assign(ns=a.pieces["end"] - a.pieces["start"]).astype({"cause": str})
    p["detail"] = p["detail"].astype(str)
    p["op_start"] = a.ops.loc[p["row"], "start"].to_numpy()
    return p


def totals(a) -> dict[str, int]:
    return pieces(a).groupby("cause")["ns"].sum().to_dict()


def rules(a) -> dict[str, list]:
    out: dict[str, list] = {}
    for f in find(a):
        out.setdefault(f.rule, []).append(f)
    return out


# --- 1. waiting on queued work is not launch overhead -------------------------------------


def test_graph_launches_held_for_64_ms_are_queued_waits():
    # HTA's negative-queue rank: 187 gaps end at an op of a cudaGraphLaunch that returned
    # more than 100 us before the op started: 614,769,000 ns in all, the largest 64,652,000
    # (independent check). Each is a queued wait on the graph's dependencies, none of it
    # launch overhead; no CUDA-graph finding claims it.
    a = analysis_of(PUBLIC / "hta_negative_queue_rank0.json.gz")
    p = pieces(a)
    graph = p[p["detail"].eq(GRAPH_HELD)]
    big = graph[graph["ns"] > 100_000]
    assert len(big) >= 187 and big["ns"].max() == 64_652_000
    assert big["ns"].nlargest(187).sum() >= 614_769_000
    found = rules(a)
    assert found["queued-wait"][0].est_savings_ns >= 614_769_000
    assert all(f.est_savings_ns < 10_000_000 for f in find(a) if f.strategy == "cuda_graph")


def test_work_held_behind_an_event_is_a_queued_wait_not_a_blocking_copy():
    # SGLang decode on an MI300X: the longest gap, 463,295,405 ns, ends at
    # resolve_future_token_ids_kernel, whose hipLaunchKernel returned 43,647 ns after the
    # GPU went idle; 21 us before that launch the thread issued hipStreamWaitEvent. The host
    # then blocks in hipMemcpyWithStream (463 ms) for a copy queued behind those kernels: the
    # copy waits too, it does not hold them (independent check).
    a = analysis_of(PUBLIC / "tracelens_sglang_decode_mi300x.json.gz")
    p = pieces(a)
    longest = p[p["ns"].eq(p["ns"].max())].iloc[0]
    assert (longest["ns"], longest["cause"]) == (463_295_405, "queued_wait")
    assert longest["detail"] == "an event wait (hipStreamWaitEvent)"
    f = rules(a)["queued-wait"][0]
    assert f.severity == "high" and f.est_savings_ns >= 463_295_405
    assert "sync-copy" not in rules(a) or rules(a)["sync-copy"][0].est_savings_ns < 1e6


@pytest.mark.parametrize(
    "name, truth",
    # truth.py: gaps whose op was enqueued > 100 us before it started (8 in the Nsight run,
    # 7 in torch.profiler's window), each after a cudaStreamWaitEvent by the launching thread
    [("why_event_wait.sqlite", (8, 171_798_552)),
     ("why_event_wait.pt.trace.json.gz", (7, 148_420_621))],
)  # fmt: skip
def test_own_event_wait_capture(name, truth):
    # stream b's GEMM waits for an event that stream a records after a 20 ms host function
    # (cudaLaunchHostFunc): the GPU idles with the GEMM already launched
    gaps, ns = truth
    a = analysis_of(WHY / name)
    p = pieces(a)
    queued = p[p["cause"].eq("queued_wait")]
    assert (len(queued), int(queued["ns"].sum())) == (gaps, ns)
    assert set(queued["detail"]) == {"an event wait (cudaStreamWaitEvent)"}
    f = rules(a)["queued-wait"][0]
    assert (f.severity, f.est_savings_ns) == ("high", ns)
    assert not any(f.strategy == "cuda_graph" for f in find(a))


# --- 2. host stalls are blamed on what the host was doing ---------------------------------


def test_dataloader_stall_in_a_pytorch_18_trace():
    # PyTorch 1.8 ResNet-50 with a 0-worker DataLoader: the launching thread sits in
    # enumerate(DataLoader)#...__next__ for 183,673,000 ns of host-late gap time in 6 gaps
    # (independent check); the first, 9,336,000 ns, lies before the first step (start-up by
    # position); the other 174,337,000 ns are the input pipeline's.
    a = analysis_of(PUBLIC / "kineto_resnet50_dataloader_pytorch1.8.json.gz")
    assert totals(a)["input_pipeline"] == 183_673_000 - 9_336_000
    f = rules(a)["input-stall"][0]
    assert (f.strategy, f.severity, f.est_savings_ns) == ("input_pipeline", "high", 174_337_000)
    assert "DataLoader" in f.summary
    # (each step's loss read is its own, small finding: 654 us over 6 steps)
    reads = [f for f in find(a) if f.strategy == "remove_sync"]
    assert sum(f.est_savings_ns for f in reads) < 0.01 * 174_337_000


def test_dataloader_stall_behind_a_tiny_sync_on_rocm():
    # OWLv2 on an MI300X: 562,470,409 ns of host-late time inside DataLoader __next__ in 4
    # gaps (sample_traces/why/truth.py); before issue 28 a 0.7 us synchronize before each
    # made them a 568 ms "sync-copy" finding
    a = analysis_of(PUBLIC / "tracelens_owlv2_mi300x.json.gz")
    assert totals(a)["input_pipeline"] == 562_470_409
    assert rules(a)["input-stall"][0].est_savings_ns == 562_470_409
    assert rules(a)["sync-copy"][0].est_savings_ns < 0.01 * 562_470_409


def test_host_work_after_seconds_of_start_up_is_judged_on_the_steady_time():
    # HTA's AlexNet: its one top-level range holds 12.92 s of GPU window, 12.76 s of it
    # start-up (module loading, cuDNN's first calls). After it, five gaps open while the
    # launching thread is inside host ops that do not launch (independent check, plain json:
    # the gap before an op, and its launch call starting that late after the gap began):
    #   52,853,000 ns (launch 52,813,000 late) in the warmup forward's [param|...] ranges,
    #   14,700,000 (14,682,000) in aten::cudnn_convolution, 10,029,000 (10,010,000) in
    #   aten::native_dropout, 9,635,000 (9,615,000) in aten::addmm, 7,141,000 (7,121,000) in
    #   aten::max_pool2d_with_indices: 94,358,000 ns of gap, 94,241,000 ns of host lateness,
    # over half of the ~163 ms steady time. Compared with the whole 12.92 s window it was
    # 0.7 %, under host-busy's 5 %, and the finding was missed.
    a = analysis_of(PUBLIC / "hta_alexnet_cuda_sync.json.gz")
    top = find(a)[0]
    assert (top.rule, top.strategy, top.severity) == ("host-busy", "host_work", "high")
    assert 94_241_000 <= top.est_savings_ns <= 94_358_000
    regions = build_tables(a)["regions"]
    steady = regions["steady_window_ns"].iloc[0]
    assert steady == regions["window_ns"].iloc[0] - regions["startup_idle_ns"].iloc[0]
    assert top.est_savings_ns > 0.5 * steady


# truth.py on the H200 captures with 1.5 s of start-up inside their one range (a host
# "load_checkpoint" after one-off GPU setup ops): after it, the GPU idle, the host-late part
# of it, and the host-late time inside the planted "log_metrics" ranges (2 ms x 20)
STARTUP_TRUTH = {
    "why_startup_host_work.sqlite": (45_286_200, 44_977_549, 40_969_746),
    "why_startup_host_work.pt.trace.json.gz": (48_154_631, 47_876_056, 41_011_296),
    "why_startup_short_chains.sqlite": (60_379_652, 54_528_766, 0),
    "why_startup_short_chains.pt.trace.json.gz": (46_223_451, 39_638_260, 0),
}


@pytest.mark.parametrize("name", sorted(STARTUP_TRUTH))
def test_own_captures_with_start_up_inside_the_range(name):
    # each range's window is ~1.55-1.95 s, 1.5 s of it the planted start-up: judged on the
    # whole window, 41 ms of host work (< 5 %) and 40-55 ms of launch gaps (< 30 %) were
    # missed (the host-work finding was, on both captures: checked on the code before)
    idle_after, late_after, in_log_metrics = STARTUP_TRUTH[name]
    a = analysis_of(WHY / name)
    s = a.summary()
    assert s["startup_idle_ns"] >= 1_500_000_000  # the planted start-up is start-up
    assert s["idle_ns"] - s["startup_idle_ns"] == idle_after
    top = find(a)[0]
    assert top.severity == "high"
    if in_log_metrics:
        assert (top.rule, top.strategy) == ("host-busy", "host_work")
        assert "log_metrics" in top.summary
        # the time in log_metrics, and at most the host-late time after the start-up
        assert in_log_metrics <= top.est_savings_ns <= late_after
    else:
        assert (top.rule, top.strategy) == ("launch-bound-range", "cuda_graph")
        assert "steady GPU window" in top.summary
        # host-late gaps plus the launch latency inside them, at most the idle after start-up
        assert late_after <= top.est_savings_ns <= idle_after


def test_start_up_of_a_public_trace_whose_short_names_repeat():
    # pipit's CloverLeaf (A100, Nsight 2024.5): its set-up kernels (build_field,
    # initialise_chunk, generate_chunk) share their short names (par_ranged1d_kernel,
    # par_ranged2d_kernel) with the hydro loop's, so by short names a run of 8 set-up ops
    # recurs in the loop and the set-up was steady state. By full names the steady state
    # starts at the first ideal_gas_kernel (the first loop kernel CloverLeaf also calls
    # once at the end of set-up). By hand (sqlite3, no advisor code): the idle in gaps
    # ending at or before that kernel's start is the start-up (919,900 ns; 41,504 before)
    import sqlite3

    path = ROOT / "tests" / "data" / "public" / "nsys" / "pipit_cloverleaf_a100_nsys2024.5.sqlite"
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    names = dict(db.execute("SELECT id, value FROM StringIds"))
    kernels = db.execute("SELECT start, end, demangledName FROM CUPTI_ACTIVITY_KIND_KERNEL "
                         "WHERE deviceId = 0").fetchall()  # fmt: skip
    first_loop = min(k[0] for k in kernels if "ideal_gas_kernel" in names[k[2]])
    spans = sorted(
        [k[:2] for k in kernels]
        + db.execute(
            "SELECT start, end FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE deviceId = 0"
        ).fetchall()
    )
    db.close()
    idle, reach = 0, spans[0][1]
    for start, end in spans[1:]:
        if start > reach and start <= first_loop:
            idle += start - reach
        reach = max(reach, end)
    a = analysis_of(path)
    assert a.summary()["startup_idle_ns"] == idle == 919_900


def test_host_work_between_ranges_in_a_public_mpi_trace():
    # pipit's saxpy (MPI + CUDA, A100, Nsight 2022.2): 5 "saxpy" ranges; between them the
    # host sits in MPI_Recv / MPI_Send and its own work, then copies the next inputs with
    # cudaMemcpy launched outside every range. Independent check (sqlite3, no advisor): the
    # saxpy ranges' GPU windows leave 724,054,763 ns of idle outside them, 723,169,815 ns of
    # it in 4 gaps where the next op's call started > 100 us after the gap began. Before,
    # no range held that time and the top finding was a 88 ms split-K guess.
    a = analysis_of(PUBLIC.parent / "nsys" / "pipit_saxpy-mpi-cuda_a100_nsys2022.2.sqlite")
    top = find(a)[0]
    assert (top.rule, top.region, top.severity) == ("host-busy", OUTSIDE_RANGES, "high")
    assert 0.99 * 723_169_815 <= top.est_savings_ns <= 723_169_815
    assert "outside every range" in top.location()
    outside = build_tables(a)["regions"].set_index("name").loc[OUTSIDE_RANGES]
    assert outside["idle_ns"] - outside["startup_idle_ns"] <= 724_054_763


@pytest.mark.parametrize(
    "name, region, low, high",
    # truth.py: host-late time inside "prepare_batch" (3 ms x 16; under Nsight the first
    # iterations lie in its start-up), and all host-late time (Kineto)
    [("why_between_ranges.pt.trace.json.gz", OUTSIDE_RANGES, 45_532_743, 52_080_664),
     # (under emit_nvtx the copy's aten::to is a top-level range of its own)
     ("why_between_ranges.sqlite", "aten::to", 0.9 * 50_439_202, 50_439_202)],
)  # fmt: skip
def test_own_capture_with_host_work_between_ranges(name, region, low, high):
    top = find(analysis_of(WHY / name))[0]
    assert (top.rule, top.region, top.severity) == ("host-busy", region, "high")
    assert "prepare_batch" in top.summary
    assert low <= top.est_savings_ns <= high


@pytest.mark.parametrize(
    "name, truth",
    # truth.py: DataLoader time in host-late gaps, less the first gap where it lies before
    # the first step (start-up by position; the Kineto capture starts after it)
    [("why_dataloader.sqlite", 62_401_388 - 1_177_173),
     ("why_dataloader.pt.trace.json.gz", 55_166_316)],
)  # fmt: skip
def test_own_dataloader_capture(name, truth):
    a = analysis_of(WHY / name)
    assert totals(a)["input_pipeline"] == truth
    found = rules(a)
    assert found["input-stall"][0].est_savings_ns == truth
    # the loss.item() before each wait is a few us of synchronization, not the stall
    assert totals(a)["synchronization"] < 0.01 * truth


@pytest.mark.parametrize(
    "name, truth",  # truth.py: host-late time inside copy calls that block (pageable)
    [("why_pageable_copy.sqlite", 11_713_876),
     ("why_pageable_copy.pt.trace.json.gz", 11_571_671)],
)  # fmt: skip
def test_own_pageable_copy_capture(name, truth):
    a = analysis_of(WHY / name)
    copy = totals(a)["blocking_copy"]
    # the calls' own time, plus, when one was waiting as the GPU ran dry, the relaunch after
    # it up to what it waited (the credit), less the first step's, which is start-up
    assert 0.97 * truth <= copy <= 1.03 * truth
    f = rules(a)["sync-copy"][0]
    assert f.strategy == "async_copy" and f.est_savings_ns == copy
    assert "cudaMemcpyAsync (in aten::copy_)" in f.summary


@pytest.mark.parametrize(
    "name, truth",
    # truth.py's "after_first_step" (the gaps after the first step's first op; the gap before
    # it began in the warm-up, which only Nsight Systems records): GPU idle, its host-late
    # part, and the host-late time in DataLoader ranges, in blocking copy calls and in the
    # planted "log_metrics" ranges
    [("why_mixed_training.sqlite.xz", (160_705_809, 154_860_615, 7_442_643, 1_432_083,
                                       14_481_334)),
     ("why_mixed_training.pt.trace.json.gz", (181_880_081, 176_301_004, 7_738_534, 1_572_640,
                                              14_407_152))],
)  # fmt: skip
def test_own_capture_with_several_causes_in_each_step(name, truth):
    # a small transformer trained with AdamW without foreach (441 launches a step) on batches
    # from 2 DataLoader workers, a 16 MB copy from pageable memory, the loss read back and
    # 2 ms of "log_metrics" in every step (workloads/why_idle.py mixed_training): no cause
    # planted alone, each measured as where it is
    idle, late, loader, copy, in_log_metrics = truth
    a = analysis_of(unpacked(WHY / name))
    t = totals(a)
    assert t["input_pipeline"] == loader and t["blocking_copy"] == copy
    # every steady gap once (the Nsight run's start-up is its warm-up, the Kineto run has
    # none); truth.py ends at the last op, advisor's steady window at the same op
    assert sum(ns for cause, ns in t.items() if cause != "startup") == idle
    # the launch-bound steps first: the host-late time outside the DataLoader, the copies
    # and log_metrics (132-153 ms) is launch work, and the CUDA graph estimate is within it
    found = find(a)
    top = found[0]
    assert (top.rule, top.strategy) == ("host-bound-steps", "cuda_graph")
    assert top.est_savings_ns <= late - loader - copy - in_log_metrics
    # the host work names log_metrics; the pieces it labels hold at least the time the host
    # was in it (a piece is labelled by the range covering most of it: 17.4-18.0 ms)
    busy = rules(a)["host-busy-steps"][0]
    assert "log_metrics" in busy.summary
    held = pieces(a)
    assert held.loc[held["detail"].eq("log_metrics"), "ns"].sum() >= in_log_metrics
    assert [f.strategy for f in found] == ["cuda_graph", "host_work", "input_pipeline",
                                           "async_copy", "remove_sync"]  # fmt: skip


def test_own_copy_after_idle_capture():
    # truth.py: 103,848 ns of host-late time inside the 7 steady steps' pageable copy calls
    # (32 KB each, called after a synchronize); no call spans the start of the gap after its
    # copy, so nothing is credited: advisor's blocking copies are exactly that time
    a = analysis_of(WHY / "why_copy_after_idle.pt.trace.json.gz")
    assert totals(a)["blocking_copy"] == 103_848


def test_own_capture_host_work_inside_a_step_is_not_launch_work():
    # why_copy_after_idle: each step spins 300 us on the host (no operator, no CUDA call)
    # before launching its next kernel, inside the user range step_N. An independent plain
    # json script (no advisor code; helper check, docs/verification/why_idle.md) finds in
    # each of the 7 steady steps one stretch of 306,547-317,911 ns with no cpu_op or runtime
    # call open on the main thread, each inside the host-late window before the step's
    # unrolled_elementwise kernel; those 7 windows hold 2,482,598 ns once the time inside
    # blocking calls is taken out. advisor: host work, not launch overhead (before: launch
    # work, because the step range holds the launch), less the ~3 us per window that the
    # pageable copy call spanning the window's start is credited (blocking_copy)
    a = analysis_of(WHY / "why_copy_after_idle.pt.trace.json.gz")
    p = pieces(a)
    name = a.ops["name"].astype(str).to_numpy()[p["row"].to_numpy()]
    spin = p[(p["cause"] == "host_busy") & pd.Series(name).str.contains("unrolled").to_numpy()]
    assert len(spin) == 7 and spin["ns"].min() > 306_547
    assert 0.98 * 2_482_598 <= spin["ns"].sum() <= 2_482_598
    steps = next(f for f in rules(a)["host-bound-steps"])
    assert steps.est_savings_ns < 4_511_484 - 7 * 300_000  # (the old estimate held the spins)


def _step_host_late(events: list[dict]) -> tuple[list[int], list[int]]:
    """Plain json, no advisor code: per idle gap, the host-late time (ns): from where the gap
    began to the end of the kernel's launch call (or the kernel's start, if earlier); the
    gaps before the first kernel launched inside a "step_N" range, and the others."""
    kernels = sorted((e for e in events if e.get("cat") == "kernel"), key=lambda e: e["ts"])
    calls = {e["args"]["correlation"]: e for e in events
             if e.get("cat") == "cuda_runtime" and "correlation" in e.get("args", {})}  # fmt: skip
    steps = [e for e in events if e.get("cat") == "user_annotation" and e["name"][:5] == "step_"]
    first = {min(calls[k["args"]["correlation"]]["ts"] for k in kernels
                  if s["ts"] <= calls[k["args"]["correlation"]]["ts"] <= s["ts"] + s["dur"])
             for s in steps}  # fmt: skip
    at_steps, others, busy_until = [], [], None
    for k in kernels:
        call = calls[k["args"]["correlation"]]
        if busy_until is not None and k["ts"] > busy_until:
            late = max(round((min(call["ts"] + call["dur"], k["ts"]) - busy_until) * 1000), 0)
            (at_steps if call["ts"] in first else others).append(late)
        end = k["ts"] + k["dur"]
        busy_until = end if busy_until is None else max(busy_until, end)
    return at_steps, others


def test_own_capture_host_work_in_steps_without_operator_ranges(tmp_path):
    # why_step_host_work (H200): each of 8 "step_N" ranges spins 1 ms on the host (no CUDA
    # call), then launches a chain of 50 tiny kernels. Its Kineto trace records the
    # operators; with them removed (cpu_op events) it holds what an nsys capture without
    # emit_nvtx holds: the step ranges, the runtime calls and the kernels (the nsys capture
    # of the same part: the next test). By
    # hand (plain json, _step_host_late): 7 gaps before a step's first launch (the first
    # step's is the trace's first kernel), host-late 1,055.5-1,237.1 us each, 7,640,323 ns
    # in all; the other gaps' host-late (the chains' launches) 5,292,220 ns. advisor: the
    # same host work in both traces (before, without operators: all launch overhead, 13.81
    # ms, because the step range holds the launch): each window has a stretch of over 1 ms
    # with no API call (host_silent_max_ns)
    import gzip
    import json

    path = WHY / "why_step_host_work.pt.trace.json.gz"
    doc = json.loads(gzip.decompress(path.read_bytes()))
    truth, chains = _step_host_late(doc["traceEvents"])
    assert len(truth) == 7 and min(truth) > 1_000_000
    stripped = tmp_path / "why_step_host_work_no_ops.pt.trace.json"
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("cat") != "cpu_op"]
    stripped.write_text(json.dumps(doc))
    for trace in (path, stripped):
        a = analysis_of(trace)
        got = totals(a)
        # (within 1 ns per gap: json's float microseconds; advisor reads them exactly)
        assert abs(got.get("host_busy", 0) - sum(truth)) <= len(truth)
        assert abs(got["host_bound"] - sum(chains)) <= len(chains)  # (the chains' launches)
        assert "host-busy-steps" in rules(a) and "host-bound-steps" in rules(a)


def test_own_nsys_capture_host_work_in_steps_without_operator_ranges():
    # why_step_host_work.sqlite(.xz): the same part under Nsight Systems without emit_nvtx (the
    # step ranges, runtime calls and kernels; no operator range). By hand (sqlite3 below):
    # each step's first kernel starts before its launch call returns, so its whole gap (from
    # the previous op's end) is host-late; the launch call starts 1,069,113-1,392,722 ns into
    # the step (over host_silent_max_ns = 1 ms: the spin). Steps 1-7's gaps: 1,301,024 +
    # 1,220,193 + 1,205,792 + 1,217,728 + 1,261,344 + 1,211,521 + 1,183,072 = 8,600,674 ns of
    # host work; step 0's (1,665,824) lies before the steady state (its first op begins it):
    # start-up, as the cold first step is on every trace.
    import sqlite3

    path = unpacked(WHY / "why_step_host_work.sqlite.xz")
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    steps = db.execute(
        "SELECT start, end FROM NVTX_EVENTS WHERE eventType = 59 AND "
        "COALESCE(text, (SELECT value FROM StringIds WHERE id = textId)) LIKE 'step_%' "
        "ORDER BY start"
    ).fetchall()
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    ops = sorted(
        row
        for table in ("KERNEL", "MEMCPY", "MEMSET")
        if f"CUPTI_ACTIVITY_KIND_{table}" in tables
        for row in db.execute(f"SELECT start, end, correlationId FROM CUPTI_ACTIVITY_KIND_{table}")
    )
    calls = dict(
        (c, (s, e))
        for c, s, e in db.execute(
            "SELECT correlationId, start, end FROM CUPTI_ACTIVITY_KIND_RUNTIME"
        )
    )
    gaps, silent = [], []
    for lo, hi in steps:
        first = min(o for o in ops if o[2] in calls and lo <= calls[o[2]][0] <= hi)
        prev_end = max(o[1] for o in ops if o[0] < first[0])
        assert calls[first[2]][1] > first[0]  # (the kernel starts before its call returns)
        gaps.append(first[0] - prev_end)
        silent.append(calls[first[2]][0] - lo)
    assert len(gaps) == 8 and min(silent) > 1_000_000
    assert sum(gaps[1:]) == 8_600_674
    a = analysis_of(path)
    got = totals(a)
    assert got["host_busy"] == sum(gaps[1:])
    assert [f.est_savings_ns for f in rules(a)["host-busy-steps"]] == [sum(gaps[1:])]
    assert "host-bound-steps" in rules(a)


def test_own_capture_a_templates_first_launch_in_the_steady_state():
    # why_late_template (H200, Nsight with emit_nvtx and its Kineto twin): 8 steps of
    # elementwise launches; from step 3 on, each step first runs one new pointwise op (sin,
    # cos, exp, log1p, tanh; step 3 also a tensor-tensor add): templates of the short name
    # every step uses, vectorized_elementwise_kernel. By hand (sqlite3 below): the first
    # launch of each full name that is not its short name's first, whose call takes over
    # 100 us, inside a step range: 5 calls (1.2-11.3 ms: lazy loading loads the code
    # there), the GPU idle inside them before their kernels start 22,911,958 ns in all
    # (each kernel starts before its call returns). advisor: each such gap is start-up but
    # for the last 90-115 us of the call (launch work after the load); before, by short
    # name, the calls were launch overhead (Nsight 31.38 ms against the Kineto twin's 8.16
    # ms; now 8.45 ms)
    import sqlite3

    path = unpacked(WHY / "why_late_template.sqlite.xz")
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    text = "(SELECT value FROM StringIds WHERE id = {})"
    steps = db.execute(
        f"SELECT start, end FROM NVTX_EVENTS WHERE eventType = 59 AND "
        f"COALESCE(text, {text.format('textId')}) LIKE 'step_%'"
    ).fetchall()
    kernels = db.execute(
        f"SELECT k.start, k.end, {text.format('k.demangledName')}, {text.format('k.shortName')},"
        " r.start, r.end FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN CUPTI_ACTIVITY_KIND_RUNTIME r"
        " ON r.correlationId = k.correlationId ORDER BY k.start"
    ).fetchall()
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    busy = sorted((k[0], k[1]) for k in kernels) + sorted(
        row
        for table in ("MEMCPY", "MEMSET")
        if f"CUPTI_ACTIVITY_KIND_{table}" in tables
        for row in db.execute(f"SELECT start, end FROM CUPTI_ACTIVITY_KIND_{table}")
    )
    busy.sort()
    first_full, first_short = {}, {}
    for k in kernels:
        first_full.setdefault(k[2], k)
        first_short.setdefault(k[3], k)
    slow = [k for k in first_full.values() if k not in first_short.values()
            and k[5] - k[4] > 100_000 and any(lo <= k[4] <= hi for lo, hi in steps)]  # fmt: skip

    def idle_in(lo: int, hi: int) -> int:
        covered, reach = 0, lo
        for s, e in busy:
            s, e = max(s, reach), min(e, hi)
            if e > s:
                covered, reach = covered + e - s, e
        return hi - lo - covered

    inside = [idle_in(k[4], min(k[5], k[0])) for k in slow]
    assert len(slow) == 5 and sum(inside) == 22_911_958
    assert all(k[0] < k[5] for k in slow)  # (each starts before its call returns)
    a = analysis_of(path)
    by_op = pieces(a).groupby(["op_start", "cause"])["ns"].sum()
    for k, idle in zip(slow, inside, strict=True):
        gap = by_op[k[0]]
        assert gap["startup"] >= idle
        assert gap.sum() - gap["startup"] < 120_000
    twin = analysis_of(WHY / "why_late_template.pt.trace.json.gz").summary()
    ratio = a.summary()["launch_overhead_ns"] / twin["launch_overhead_ns"]
    assert 0.9 < ratio < 1.1


def test_host_work_and_framework_work_in_a_public_trace():
    # hta_negative_queue_rank0 (TorchRec, PyTorch 2.1): by hand (plain json), three gaps
    # before "copy_batch_to_gpu" copies have host-late windows of 864,000, 1,014,000 and
    # 1,024,000 ns on the main thread whose longest stretch outside every cpu_op and runtime
    # call is 548,000, 731,000 and 598,000 ns (the innermost range over half of each is the
    # user range "## copy_batch_to_gpu ##"): host work (helper check). Two gaps before
    # vectorized_elementwise kernels in "## sparse_data_dist ##" (windows of 179,000 and
    # 210,000 ns) have their longest stretch outside operators at 98,000 and 95,000 ns (from
    # the end of c10d::alltoall_base_, open at the window's start, to aten::to): the
    # framework's own work between launches, launch work
    a = analysis_of(PUBLIC / "hta_negative_queue_rank0.json.gz")
    p = pieces(a)
    g0 = (a.ops["start"] - a.ops["gap_ns"]).to_numpy()[p["row"].to_numpy()]
    by_gap = p.assign(g0=g0).groupby(["g0", "cause"])["ns"].sum()
    for start, window in ((1683564901759935000, 864_000), (1683564902192502000, 1_014_000),
                          (1683564902407872000, 1_024_000)):  # fmt: skip
        # (the rest of each window: the credit of a synchronize that spanned its start)
        assert by_gap[start]["host_busy"] + by_gap[start]["synchronization"] == window
        assert by_gap[start]["host_busy"] > 0.97 * window
    for start in (1683564901922945000, 1683564902138502000):
        assert "host_busy" not in by_gap[start] and by_gap[start]["host_bound"] > 100_000


def test_a_copy_call_is_credited_at_most_its_own_time_on_a_capture():
    # why_dataloader.sqlite, by hand: cudaMemcpyAsync [9264118409, 9264158379] (39,970 ns)
    # starts while the device idles [9262422943, 9264152282); its copy runs [9264152282,
    # 9264153785) and the call returns 4,594 ns after that, inside the next gap's host-late
    # window. 33,873 ns of the call lie in the gap before the copy (blocking_copy there); the
    # next gap gets the 4,594 it covers and a credit of the device's busy time in
    # [call start, g0): the copy's own 1,503 ns. 33,873 + 4,594 + 1,503 = 39,970, the call's
    # duration (before, the credit was g0 - call start = 35,376: the 33,873 twice)
    from advisor.metrics.gaps import attribute_gaps, device_ops
    from advisor.trace.load import load_trace

    t = load_trace(WHY / "why_dataloader.sqlite")
    ops, pieces = attribute_gaps(device_ops(t), t)
    copy = pieces[pieces["cause"].astype(str) == "blocking_copy"]
    op_start = ops["start"].to_numpy()[copy["row"].to_numpy()]
    by_gap = (copy["end"] - copy["start"]).groupby(op_start).sum()
    assert by_gap[9264152282] == 33_873  # (the gap ends where the copy starts)
    assert by_gap[9264344889] == 4_594 + 1_503


# --- 3. start-up is a position -------------------------------------------------------------


def test_a_call_made_inside_steps_is_not_startup():
    # ROCm PyTorch calls hipGetDevicePropertiesR0600 inside the normalization ranges (the
    # first BatchNorm instance makes 4, an InstanceNorm one 1: independent check); by name
    # they made start-up of those instances and "3 steps (0 steady)"
    a = analysis_of(PUBLIC / "tracelens_normalization_mi300x.json.gz")
    steps = build_tables(a)["steps"].set_index("name")
    assert steps.loc["BatchNorm affine=True", "steps"] == 3
    assert steps.loc["BatchNorm affine=True", "steady_steps"] >= 2
    p = pieces(a)
    assert not p[p["cause"].eq("startup") & p["detail"].str.contains("GetDeviceProperties")].size


@pytest.mark.parametrize("name", ["why_devprops.sqlite", "why_devprops.pt.trace.json.gz"])
def test_own_device_properties_capture(name):
    # 8 steps each calling cudaGetDeviceProperties 10 times between launches: the steps are
    # steady (the first is cold), their idle launch work, not start-up
    a = analysis_of(WHY / name)
    steps = build_tables(a)["steps"].set_index("name").loc["train_step"]
    assert (steps["steps"], steps["steady_steps"]) == (8, 7)
    p = pieces(a)
    in_steps = p[a.ops.loc[p["row"], "region"].astype(str).eq("train_step").to_numpy()]
    # after the first (cold: its kernels' modules load) no step holds start-up idle
    second = a.regions[a.regions["name"].eq("train_step")]["start_ns"].nsmallest(2).iloc[-1]
    later = in_steps[in_steps["op_start"] >= second]
    assert later.loc[later["cause"].eq("startup"), "ns"].sum() == 0
    assert later.loc[later["cause"].eq("host_bound"), "ns"].sum() > 0


# --- 4. launch-bound work in short chains ---------------------------------------------------


def test_short_chains_on_a_b200_are_launch_bound():
    # vLLM eager decode: 70,683,616 ns of host-late gap time (truth.py), in chains broken by
    # collectives and syncs; no chain finding, but the range is launch-bound
    a = analysis_of(PUBLIC / "tracelens_vllm_eager_b200.json.gz")
    found = rules(a)
    assert "launch-bound-sequence" not in found
    f = found["launch-bound-range"][0]
    assert f.severity == "high" and 60e6 <= f.est_savings_ns <= 70_683_616


@pytest.mark.parametrize("name", ["why_short_chains.sqlite", "why_short_chains.pt.trace.json.gz"])
def test_own_short_chains_capture(name):
    # 40 iterations x 3 chains of 26 launches (24 tiny ops, a sum and its copy) ended by an
    # .item(): truth.py counts at most 26 launches between synchronizes
    a = analysis_of(WHY / name)
    found = rules(a)
    assert "launch-bound-sequence" not in found
    f = found["launch-bound-range"][0]
    assert f.region == "decode_loop" and f.strategy == "cuda_graph"
    assert f.est_savings_ns <= totals(a)["host_bound"] + totals(a)["launch_latency"]


# --- 5. old and vendor variants -------------------------------------------------------------


def test_pytorch_18_and_rocm_variants_are_read():
    a = analysis_of(PUBLIC / "kineto_resnet50_dataloader_pytorch1.8.json.gz")
    assert (a.ops["kind"] == "kernel").sum() == 9564 and len(a.ops) == 10015
    assert "ProfilerStep" in set(a.regions["name"])
    b = analysis_of(PUBLIC / "tracelens_owlv2_mi300x.json.gz")
    g = b.trace.gpus[2]  # deviceProperties id 0 describes the trace's one device, 2
    assert (g.vendor, g.sm_count, g.cc_major) == ("amd", 304, None)
    assert not any("impossible" in w for w in b.warnings)
    assert any("no registers or shared memory" in w for w in b.warnings)
    # (counted per configuration, then per launch: as over every launch's own columns)
    from advisor.trace.load import load_trace
    from advisor.trace.quality import unknown_resources

    kernels = load_trace(PUBLIC / "tracelens_owlv2_mi300x.json.gz").kernels
    assert b.coverage["unknown_resources"] == int(unknown_resources(kernels).sum()) > 0
    k = b.kernel_table()
    tensile = k[k["name"].str.startswith("Cijk_")]
    assert tensile["waves"].notna().all() and (tensile["grid_blocks"] < 1e5).all()
    assert "hopper-gemm-no-warp-specialization" not in rules(b)  # (gfx942 is no Hopper)


def test_messages_speak_the_traces_terms():
    from advisor.trace.load import missing_facts_warning

    a = analysis_of(PUBLIC / "tracelens_sglang_decode_mi300x.json.gz")
    text = missing_facts_warning(a.trace, [9])
    assert "deviceProperties" in text and "--gpu MI300X" in text
    assert "TARGET_INFO_GPU" not in text


# --- 6. GEMM advice only on GEMMs -----------------------------------------------------------

NOT_GEMM = r"bn_|batch_norm|reduce_kernel|multi_tensor_apply|splitKreduce|elementwise|softmax"


@pytest.mark.parametrize("path", [WHY / "why_nongemm.sqlite", WHY / "why_nongemm.pt.trace.json.gz",
                                  PUBLIC / "hta_nccl_data.json.gz"])  # fmt: skip
def test_no_gemm_strategy_on_kernels_that_say_they_are_not_gemms(path):
    a = analysis_of(path)
    gemm_strategies = {"split_k", "stream_k", "tile_reshape", "warp_specialization"}
    wrong = [f.kernel for f in find(a) if f.strategy in gemm_strategies
             and pd.Series([f.kernel]).str.contains(NOT_GEMM).iloc[0]]  # fmt: skip
    assert not wrong
    k = build_tables(a)["kernels"]
    named = k[k["name"].str.contains(NOT_GEMM)]
    assert len(named) and (named["not_gemm_by"] != "").all() and not named["gemm"].any()


# --- 7. data- vs tensor-parallel collectives --------------------------------------------------


def test_tensor_parallel_collectives_sit_between_the_gemms():
    # TP 8: one symmetric-memory all-reduce after each layer's GEMMs
    a = analysis_of(PUBLIC / "tracelens_vllm_eager_b200.json.gz")
    r = build_tables(a)["regions"].iloc[0]
    assert r["interleaved_share"] > 0.9
    assert rules(a)["tp-exposed-comm"][0].strategy == "tp_overlap"


def test_data_parallel_buckets_after_the_gemms_get_the_data_parallel_advice():
    # hand-built: ten all-reduces back to back on the compute stream after ten GEMMs (the
    # gradient buckets of a data-parallel step), per step, on two ranks
    from builders import trace

    rows, api, ranges, corr = [], [], [], 0
    for step in range(3):
        t0 = step * 10_000_000
        ranges.append((f"train_step_{step}", t0, t0 + 9_000_000))
        at = t0 + 10_000
        for i in range(20):
            corr += 1
            name = "ampere_sgemm_128x64_nn" if i < 10 else "ncclDevKernel_AllReduce_Sum_f32_RING_LL"
            took = 200_000 if i < 10 else 300_000
            rows.append(dict(start=at, end=at + took, correlation=corr, name=name))
            api.append(("cudaLaunchKernel", at - 5000, at - 4000, corr))
            at += took + 2000
    from advisor.analysis import analyze

    a = analyze(trace(rows, api, ranges))
    r = build_tables(a)["regions"].iloc[0]
    assert r["collectives_per_instance"] == 10 and r["interleaved_share"] == 0
    found = rules(a)
    assert "tp-exposed-comm" not in found
    assert found["exposed-comm"][0].strategy == "comm_overlap"


# --- invariants on every trace in the repository ----------------------------------------

# the idle-cause rules and the summary column their savings come from
CAUSE_OF = {"sync-stall": "sync_idle_ns", "sync-stall-steps": "sync_idle_ns",
            "sync-copy": "copy_idle_ns", "input-stall": "input_idle_ns",
            "host-busy": "host_busy_idle_ns", "queued-wait": "queued_idle_ns",
            "launch-bound-range": "launch_overhead_ns", "launch-bound-sequence":
            "launch_overhead_ns", "host-bound-steps": "launch_overhead_ns"}  # fmt: skip


def every_trace() -> list[Path]:
    from conftest import SAMPLES, public_nsys, why_nsys

    return [*sorted(SAMPLES.glob("*.sqlite")), *why_nsys(), *sorted(WHY.glob("why_*.gz")),
            *public_nsys(), *sorted(PUBLIC.glob("*.json.gz"))]  # fmt: skip


@pytest.mark.parametrize("path", [p for p in every_trace() if p.suffix in (".sqlite", ".gz")],
                         ids=lambda p: p.name)  # fmt: skip
def test_findings_never_claim_more_idle_than_their_cause_held(path):
    from advisor.analysis import IDLE_COLUMNS

    a = analysis_of(path)
    s = a.summary()
    assert sum(s[c] for c in IDLE_COLUMNS) == s["idle_ns"]  # every idle ns, one cause
    claimed: dict[tuple, float] = {}
    for f in find(a):
        if f.rule in CAUSE_OF and not f.rule.endswith("steps"):
            key = (f.device, CAUSE_OF[f.rule])
            # (chains and their range are the same time: the range supersedes the chains)
            claimed[key] = max(claimed.get(key, 0.0), f.est_savings_ns)
    for (device, col), ns in claimed.items():
        held = a.select(device=device).summary()[col]
        assert ns <= held + 1, (path.name, device, col)


RANGE_OF = {"dataloader": "train_step", "pageable_copy": "step", "short_chains": "decode_loop",
            "devprops": "train_step", "nongemm": "train_step", "event_wait": "iter",
            "mixed_training": "train_step"}  # fmt: skip


@pytest.mark.parametrize("part", list(RANGE_OF))
def test_nsys_and_kineto_of_one_workload_name_the_same_causes(part):
    # two runs of one workload (the profilers cannot share CUPTI; Nsight Systems records the
    # whole process, torch.profiler its window): over the workload's range, from its first
    # GPU op (the gap before it is the run's preamble), the causes worth a finding (2 ms or
    # more) are the same, and so is the one holding the most idle. Start-up never makes a
    # finding and differs by what each profiler records: Nsight Systems sees the driver's
    # lazy module loads in the first step (cuLibraryLoadData), torch.profiler does not.
    # (2 ms, not 1: the Nsight run of short_chains holds three host stalls, 0.64, 0.32 and
    # 0.27 ms, in which its thread recorded nothing: 1.22 ms of host work that the other
    # run does not have, 1.9 % of that range's idle)
    def causes(a):
        p = pieces(a)
        name = a.ops.loc[p["row"], "region"].astype(str).to_numpy()
        first = a.regions.loc[a.regions["name"].eq(RANGE_OF[part]), "start_ns"].min()
        p = p[(name == RANGE_OF[part]) & (p["start"].to_numpy() >= first)]
        p = p[p["cause"] != "startup"]
        by = p.groupby("cause")["ns"].sum()
        return set(by[by >= 2_000_000].index), by.idxmax()

    export = WHY / f"why_{part}.sqlite"
    nsys = causes(
        analysis_of(export if export.exists() else unpacked(export.with_suffix(".sqlite.xz")))
    )
    kineto = causes(analysis_of(WHY / f"why_{part}.pt.trace.json.gz"))
    assert nsys == kineto


# --- 9. text that agrees with the numbers -----------------------------------------------------


@pytest.mark.parametrize("path", [p for p in every_trace() if p.suffix in (".sqlite", ".gz")],
                         ids=lambda p: p.name)  # fmt: skip
def test_no_finding_says_unknown(path):
    a = analysis_of(path)
    for f in find(a):
        assert "unknown" not in f.summary, (f.rule, f.summary)


def test_ranges_that_launch_no_kernels_are_no_steps():
    # an NVTX range around each parameter's .cuda() (10 instances of host-to-device copies)
    # is not a training step; the loop after it is
    import pandas as pd
    from builders import trace

    from advisor.analysis import analyze

    rows, api, ranges, copies, corr = [], [], [], [], 0
    for i in range(10):  # model.cuda(): one copy each
        corr += 1
        ranges.append(("model.cuda()", i * 10_000, i * 10_000 + 5_000))
        api.append(("cudaMemcpyAsync", i * 10_000 + 100, i * 10_000 + 200, corr))
        copies.append({"device": 0, "stream": 7, "start": i * 10_000 + 1_000,
                       "end": i * 10_000 + 3_000, "bytes": 1 << 20, "kind": "HtoD",
                       "correlation": corr, "pid": 1})  # fmt: skip
    for step in range(4):  # the steps: 20 kernels each
        t0 = 1_000_000 + step * 1_000_000
        ranges.append((f"train_step_{step}", t0, t0 + 500_000))
        for j in range(20):
            corr += 1
            at = t0 + 10_000 + j * 20_000
            rows.append(dict(start=at, end=at + 5_000, correlation=corr))
            api.append(("cudaLaunchKernel", at - 3_000, at - 2_000, corr))
    t = trace(rows, api, ranges)
    t.memcpy = pd.DataFrame(copies)
    steps = build_tables(analyze(t))["steps"]
    assert steps["name"].tolist() == ["train_step"]
    assert (steps["steps"].iloc[0], steps["steady_steps"].iloc[0]) == (4, 4)
