"""Metrics on the real H200 samples, asserted per NVTX range.

Hand computations (H200: 132 SMs, 64 warps, 65536 regs, 233472 B smem per SM; kernel facts
from the trace, which match what Triton reported in sample_traces/*.facts.json):
- tail_gemm: grid 7x19 = 133 CTAs of 256 threads, 196 regs, 147456 B dynamic smem.
  regs: ceil(196*32/256)*256 = 6400 per warp, 16384 // 6400 = 2 warps per sub-partition,
  8 warps per SM -> 1 CTA; smem: 233472 // (147456 + 1024) = 1 CTA. Slots 132,
  waves 133/132 = 1.00758, tail = 1 - 1.00758/2 = 0.49621.
- full_wave_gemm: same kernel, grid 6x22 = 132 -> waves 1.0, tail 0.
- underfilled_long_k: grid 2x2 = 4 CTAs of 128 threads, 204 regs, 98304 B smem:
  regs ceil(204*32/256)*256 = 6656, 16384 // 6656 = 2 -> 8 warps -> 2 CTAs; smem
  233472 // 99328 = 2 -> 2 CTAs/SM, slots 264, waves 4/264 = 0.01515 (under-filled).
"""

import pytest
from conftest import analysis_of

from advisor.findings import find
from advisor.rules.tables import build_tables


def kernel_in(a, region, name="tiled_gemm_kernel"):
    k = a.kernel_table(by_region=True)
    rows = k[(k["region"] == region) & (k["name"] == name)]
    assert len(rows) == 1, rows
    return rows.iloc[0]


def region(a, name, device=0):
    r = a.regions
    rows = r[(r["name"] == name) & (r["device"] == device)]
    assert len(rows) == 1
    return rows.iloc[0]


def test_tail_gemm_range(single):
    k = kernel_in(single, "tail_gemm")
    assert (k.grid_blocks, k.ctas_per_sm, k.slots, k.launches) == (133, 1, 132, 5)
    assert round(k.waves, 3) == 1.008 and k.waves == pytest.approx(133 / 132)
    assert round(k.tail_fraction, 2) == 0.50 and k.tail_fraction == pytest.approx(0.496212, 1e-5)
    assert k.tail_idle_ns == pytest.approx(k.total_ns * (1 - (133 / 132) / 2))
    assert region(single, "tail_gemm").tail_idle_ns == pytest.approx(k.tail_idle_ns)


def test_full_wave_gemm_range(single):
    k = kernel_in(single, "full_wave_gemm")
    assert (k.grid_blocks, k.ctas_per_sm, k.waves, k.tail_fraction) == (132, 1, 1.0, 0.0)
    assert region(single, "full_wave_gemm").tail_idle_ns == 0
    # the 133-CTA launch takes about two waves of the 132-CTA one: the tail is real
    tail = kernel_in(single, "tail_gemm")
    assert 1.7 < tail.median_ns / k.median_ns < 2.1


def test_underfilled_long_k_range(single):
    k = kernel_in(single, "underfilled_long_k")
    assert (k.grid_blocks, k.ctas_per_sm, k.slots) == (4, 2, 264)
    assert k.waves == pytest.approx(4 / 264) and k.underfilled
    assert k.underfill_idle_ns == pytest.approx(k.total_ns * (1 - 4 / 264))
    assert k.median_ns > 400_000  # 1024 K-iterations per CTA: ~0.49 ms per launch


def test_tiny_kernels_eager_vs_graph(single):
    eager = region(single, "tiny_kernels_eager")
    graph = region(single, "tiny_kernels_graph")
    assert (eager.ops, eager.launches) == (500, 500)
    assert (graph.ops, graph.launches) == (500, 5)  # 5 replays, each one launch
    # same kernels, same busy time within 20 %; eager idles > 10x longer between them
    assert graph.gpu_busy_ns == pytest.approx(eager.gpu_busy_ns, rel=0.2)
    assert eager.launch_overhead_ns > 10 * graph.launch_overhead_ns
    assert eager.launch_overhead_ns / (eager.end_ns - eager.start_ns) > 0.8
    ops = single.ops
    opens = ops["start"] - ops["gap_ns"]  # where each gap opened
    in_graph = ops[(ops["region"] == "tiny_kernels_graph") & (opens >= graph.start_ns)]
    assert set(in_graph["cause"].dropna()) <= {"graph_internal", "host_bound", "launch_latency"}
    assert (in_graph["cause"] == "graph_internal").sum() > 200


def test_graph_level_trace_counts_replays_once(graphlevel):
    graph = region(graphlevel, "tiny_kernels_graph")
    eager = region(graphlevel, "tiny_kernels_eager")
    assert (graph.ops, graph.launches) == (5, 5)
    assert (eager.ops, eager.launches) == (500, 500)
    # the graph range's overhead is its first replay's cudaGraphLaunch call (it uploads the
    # graph: ~212 us of host time before the first node), not node gaps
    assert graph.launch_overhead_ns * 20 < eager.launch_overhead_ns
    assert graph.launch_overhead_ns < graph.lead_ns


def test_sync_in_loop_range(single):
    # each iteration: sin, sum, .item() (the host waits for the GPU), then np.sort on the host
    # (~1.5 ms that no range records) while the GPU idles. The 19 gaps after an .item() are
    # held by the host's sort; the synchronize owns only the few us it waited for the tiny
    # GPU work queued before it (issue 28: the call before a gap is not its cause)
    r = region(single, "sync_in_loop")
    p = single.pieces.assign(ns=single.pieces["end"] - single.pieces["start"])
    p = p[single.ops.loc[p["row"], "region"].astype(str).to_numpy() == "sync_in_loop"]
    busy = p[p["cause"].eq("host_busy") & p["detail"].astype(str).eq("step")]  # ("step i")
    assert len(busy) == 19 and busy["ns"].median() > 1e6
    sync = p[p["cause"].eq("synchronization")]
    assert len(sync) == 19 and sync["ns"].max() < 20_000
    assert r.host_busy_idle_ns > 100 * r.sync_idle_ns


def test_startup_kept_out_of_overhead(single):
    s = single.summary()
    assert s["startup_idle_ns"] > 2e9  # Triton compilation and module loads, ~2.8 s
    assert s["launch_overhead_ns"] < 0.01 * s["startup_idle_ns"]
    assert s["gpu_busy_ns"] + s["idle_ns"] == s["span_ns"] * s["devices"] == s["window_ns"]


def test_findings_on_single_gpu_sample(single):
    f = find(single)
    by = {(x.strategy, x.region) for x in f}
    assert ("stream_k", "tail_gemm") in by
    assert ("split_k", "underfilled_long_k") in by
    assert ("cuda_graph", "tiny_kernels_eager") in by  # the chain: a CUDA-graph script
    assert ("host_work", "sync_in_loop") in by
    # the reads themselves waited 19 x ~7.8 us: a small remove_sync finding, next to it
    read = next(x for x in f if (x.strategy, x.region) == ("remove_sync", "sync_in_loop"))
    host = next(x for x in f if (x.strategy, x.region) == ("host_work", "sync_in_loop"))
    assert read.est_savings_ns < 0.01 * host.est_savings_ns
    assert not any(x.region == "full_wave_gemm" for x in f)
    assert not any(x.region == "tiny_kernels_graph" for x in f)
    savings = [x.est_savings_ns for x in f]
    assert savings == sorted(savings, reverse=True)
    tail = next(x for x in f if x.strategy == "stream_k" and x.region == "tail_gemm")
    assert tail.evidence["waves"] == 1.0076 and tail.evidence["tail_fraction"] == 0.4962


def test_exposed_vs_overlapped_allreduce(two_gpu):
    for dev in (0, 1):
        exposed = region(two_gpu, "allreduce_exposed", dev)
        overlapped = region(two_gpu, "allreduce_overlapped", dev)
        assert exposed.overlap_ratio == 0 and exposed.exposed_comm_ns == exposed.comm_ns
        # PyTorch runs blocking collectives on the compute stream: serialized
        assert exposed.same_stream_comm_ns == exposed.comm_ns
        assert overlapped.overlap_ratio > 0.8
        assert overlapped.exposed_comm_ns < 0.25 * exposed.exposed_comm_ns


def test_straggler_rank_skew(two_gpu):
    waiting = region(two_gpu, "allreduce_straggler", 0)
    late = region(two_gpu, "allreduce_straggler", 1)
    # rank 1 does 4 extra 4096^3 matmuls per step: rank 0 spins inside the collective
    assert waiting.comm_wait_ns > 2_000_000 and late.comm_wait_ns == 0
    assert waiting.comm_ns > 3 * late.comm_ns
    ops = two_gpu.ops
    mine = ops[(ops["region"] == "allreduce_straggler") & (ops["wait_ns"] > 0)]
    assert set(mine["last_device"]) == {1}


def test_start_up_waits_are_no_rank_skew(two_gpu):
    # warmup: each rank sets up NCCL, then a bf16 and an f32 all-reduce. By hand (sqlite3,
    # CUPTI_ACTIVITY_KIND_KERNEL): the f32 all-reduce starts at 7,678,176,622 ns on device
    # 1 and 7,680,873,279 on device 0, so device 1 waits 2,696,657 ns; device 0 idles 8.74 ms
    # before it (its last start-up gap), up to the elementwise kernel at 7,680,742,271 where
    # its steady state begins (the run elementwise, f32 all-reduce, memset, GEMM... recurs
    # in every step). Of the wait, 2,565,649 ns lie before that (device 0 starting up) and
    # 131,008 after: only those are rank skew. (Device 0's bf16 wait, 36,246 ns, lies in its
    # own start-up.) Before, a 2.70 ms rank-skew finding named warmup.
    r = build_tables(two_gpu)["regions"].set_index(["name", "device"])
    assert r.loc[("warmup", 1), "comm_wait_ns"] == 7_680_873_279 - 7_678_176_622
    assert r.loc[("warmup", 1), "steady_comm_wait_ns"] == 7_680_873_279 - 7_680_742_271
    assert r.loc[("warmup", 0), "comm_wait_ns"] == 7_671_659_123 - 7_671_622_877
    assert r.loc[("warmup", 0), "steady_comm_wait_ns"] == 0
    # the straggler range's waits are all steady: unchanged
    straggler = r.loc[("allreduce_straggler", 0)]
    assert straggler["steady_comm_wait_ns"] == straggler["comm_wait_ns"] > 2_000_000
    assert not [x for x in find(two_gpu) if x.region == "warmup" and x.rule == "rank-skew"]


def test_findings_on_two_gpu_sample(two_gpu):
    f = find(two_gpu)
    by = {(x.strategy, x.region, x.device) for x in f}
    # the straggler is named and explained on its own device: rank 1 runs 8 matmuls per
    # step there, rank 0 four, over 4 steps (sample_traces/workloads/two_gpu_allreduce.py);
    # its finding replaces the waiting device's rank-skew finding (the same waiting time)
    (straggler,) = [x for x in f if x.region == "allreduce_straggler"
                    and x.rule.startswith("straggler")]  # fmt: skip
    assert (straggler.rule, straggler.device) == ("straggler-uneven-work", 1)
    ev = straggler.evidence
    # 16 extra 4096^3 bf16 matmuls: 16 * 2 * 4096^3 = 2.2 TFLOP, ~2.9 ms at ~750 TFLOP/s
    assert 2_000_000 < ev["extra_compute_ns"] < 4_000_000
    assert ev["waits_caused_ns"] == region(two_gpu, "allreduce_straggler", 0).comm_wait_ns
    assert straggler.est_savings_ns == min(ev["waits_caused_ns"], ev["extra_compute_ns"])
    assert not [x for x in f if x.rule == "rank-skew" and x.region == "allreduce_straggler"]
    exposed = next(x for x in f if x.rule == "exposed-comm"
                   and x.region == "allreduce_straggler" and x.device == 0)  # fmt: skip
    assert "most often last: device 1" in exposed.summary
    assert ("comm_overlap", "allreduce_exposed", 0) in by
    assert not any(x.strategy == "comm_overlap" and x.region == "allreduce_overlapped" for x in f)


def test_public_h100_window_with_gpu_option():
    a = analysis_of(
        __import__("conftest").PUBLIC_NSYS / "nsysai_h100_2gpu_window_nsys2026.2.sqlite",
        gpu="H100-SXM",
    )
    s = a.summary()
    assert s["devices"] == 2 and s["gpu_busy_ns"] > 0
    assert a.kernel_table()["waves"].notna().all()


def test_every_public_trace_analyses_without_gpu_option():
    # issue 12: traces without GPU facts are analysed (with a warning), never refused
    from conftest import PUBLIC_ROCPROF, public_nsys

    paths = [*public_nsys(), *sorted(PUBLIC_ROCPROF.glob("v3/*kernel_trace*.csv")),
             *sorted(PUBLIC_ROCPROF.glob("v[12]/*.csv")),
             *sorted(PUBLIC_ROCPROF.glob("v3_json/*.json.gz"))]  # fmt: skip
    for path in paths:
        a = analysis_of(path)
        assert a.summary()["gpu_busy_ns"] > 0, path.name
        find(a)
        if not a.trace.gpus:
            assert any(w.startswith("no GPU facts") for w in a.warnings), path.name


def test_every_region_idle_is_the_sum_of_its_causes():
    # issue 12: no idle nanosecond of a region is left unexplained (every sample and public
    # nsys trace; traces without GPU facts too)
    from conftest import SAMPLES, public_nsys

    from advisor.analysis import IDLE_COLUMNS

    for path in [*sorted(SAMPLES.glob("*.sqlite")), *public_nsys()]:
        t = analysis_of(path).region_totals()
        if t.empty:
            continue
        causes = t[list(IDLE_COLUMNS)].sum(axis=1)
        assert (abs(t["idle_ns"] - causes) <= 1).all(), path.name


def test_nothing_is_counted_twice():
    # issue 12 invariants on every sample and public nsys trace: no region has more comm or
    # exposed comm than its device; the findings of a device save at most its steady idle
    # plus its quantization time; comm-overlap savings stay within exposed comm
    from conftest import SAMPLES, public_nsys

    for path in [*sorted(SAMPLES.glob("*.sqlite")), *public_nsys()]:
        a = analysis_of(path)
        dev = a.devices.set_index("device")
        t = a.region_totals()
        for col in ("comm_ns", "exposed_comm_ns", "gpu_busy_ns"):
            assert (t[col].to_numpy() <= dev.loc[t["device"], col].to_numpy()).all(), path.name
        findings = find(a)
        for d, row in dev.iterrows():
            steady_idle = row.idle_ns - row.startup_idle_ns
            budget = steady_idle + row.tail_idle_ns + row.underfill_idle_ns + row.exposed_comm_ns
            saved = sum(f.est_savings_ns for f in findings if f.device == d)
            assert saved <= budget + 1, (path.name, d, saved, budget)
        for f in findings:
            if f.strategy == "comm_overlap":
                assert f.est_savings_ns <= dev.loc[f.device, "exposed_comm_ns"]


def test_host_bound_training_steps_are_the_top_finding():
    # issue 12: a GPT-style training loop whose GPU is busy ~7 ms of each ~28 ms step is
    # reported as one high-severity step-level finding, not as small chain findings
    from conftest import SAMPLES

    a = analysis_of(SAMPLES / "h200_train_steps.sqlite")
    findings = find(a)
    top = findings[0]
    assert (top.rule, top.strategy, top.region) == (
        "host-bound-steps", "cuda_graph", "train_step"
    )  # fmt: skip
    assert top.severity == "high"
    ev = top.evidence
    assert ev["steps"] == 6 and 1 <= ev["steady_steps"] <= 5  # the cold first step is left out
    assert ev["busy_ns"] < 0.4 * ev["step_ns"] and ev["overhead_share"] >= 0.5
    # the chains inside the steps do not claim the same time again
    assert not [f for f in findings if f.rule == "launch-bound-sequence"
                and f.region == "train_step"]  # fmt: skip
