"""The metric tables rules read, one per scope, with every column documented.

``SCOPES[scope]`` maps each column a rule may name to its meaning (and unit); the rule
loader rejects any other name. ``build_tables(analysis)`` returns one DataFrame per scope.
"""

from __future__ import annotations

from functools import partial

import numpy as np
import pandas as pd

from advisor import views
from advisor.analysis import WINDOW_COLUMNS, Analysis, TraceAnalysis
from advisor.data import load_yaml, names_in
from advisor.instances import range_instances
from advisor.metrics.ahead import analysis_threads, beside
from advisor.metrics.comm import overlap_ratio
from advisor.metrics.counters import rule_results, rules_in_words
from advisor.metrics.gaps import graph_saving
from advisor.metrics.gemm import add_tile_columns
from advisor.metrics.keys import (
    BLOCK_ROWS,
    DENSE_BINS,
    group_medians,
    group_sums,
    integer_group_sums,
    row_dtype,
)
from advisor.metrics.pipeline import point_to_point
from advisor.metrics.regions import OUTSIDE_RANGES
from advisor.rules.registry import Scope
from advisor.units import fmt_ns

# the regions' text columns naming what held each kind of idle (the pieces' detail with
# the most time): column -> (cause, what the text is)
_DETAIL_COLUMNS = {
    "sync_in": ("synchronization", "the blocking call (and the host op that made it)"),
    "copy_in": ("blocking_copy", "the blocking copy call (and the host op that made it)"),
    "input_in": ("input_pipeline", "the input-pipeline range"),
    "busy_in": ("host_busy", "the innermost host range (or API call) the host was in"),
    "launch_in": ("host_bound", "the innermost host range (or API call) the host was in"),
    "queued_on": ("queued_wait", "the dependency (event wait, CUDA graph, not in the trace)"),
}
# per idle cause, the column saying where its longest piece starts (a rule's ``at``)
_WORST_AT_COLUMNS = {
    "sync_at_ns": "synchronization",
    "copy_at_ns": "blocking_copy",
    "input_at_ns": "input_pipeline",
    "busy_at_ns": "host_busy",
    "launch_at_ns": "host_bound",
    "queued_at_ns": "queued_wait",
}

NOTHING_RECORDED = "nothing recorded on the launching thread"
SHARE_SHOWN_BELOW = 0.995  # a detail holding less of its cause's idle than this says its share

_WINDOW_DOC = {
    "gpu_busy_ns": "time any GPU work runs (ns)",
    "idle_ns": "time nothing runs (ns)",
    "tail_idle_ns": "wave-quantization tail idle of its kernels (ns)",
    "underfill_idle_ns": "under-filled grid idle of its kernels (ns)",
    "launch_overhead_ns": "idle while the host launched the next work (host_bound) plus launch "
    "latency and node gaps inside CUDA graphs (ns)",
    "sync_idle_ns": "idle held by blocking synchronize calls (synchronization, ns)",
    "sync_gaps": "number of gaps a blocking synchronize held (in part)",
    "copy_idle_ns": "idle held by blocking copies: synchronous memcpy/memset, async copies "
    "from pageable host memory (blocking_copy, ns)",
    "input_idle_ns": "idle while the launching thread was in the input pipeline "
    "(DataLoader ranges: input_pipeline, ns)",
    "host_busy_idle_ns": "idle while the host was late doing something other than launching "
    "(host_busy, ns)",
    "queued_idle_ns": "idle while launched work waited on a dependency: an event, a CUDA "
    "graph's dependencies, or one the trace does not record (queued_wait, ns)",
    "graph_saving_ns": "estimated saving if its eager launches ran from CUDA graphs: sum of "
    "max(0, launch overhead - 256 ns) over its gaps (ns)",
    "graph_op_share": "share of its GPU operations launched from CUDA graphs (0..1)",
    "startup_idle_ns": "idle before the device's steady state (start-up, ns)",
    "unattributed_idle_ns": "gaps without a known launch call (ns)",
    "comm_ns": "communication busy time (ns)",
    "compute_ns": "compute busy time (ns)",
    "overlap_ns": "communication overlapped by compute (ns)",
    "exposed_comm_ns": "communication with no compute alongside (ns)",
    "startup_exposed_comm_ns": "the part of exposed_comm_ns before the device's steady state "
    "(start-up: the first collectives, communicator set-up among them; ns)",
    "comm_wait_ns": "comm time spent waiting for the last rank (ns; NaN: unknown, the trace "
    "holds one rank's communication only)",
    "same_stream_comm_ns": "comm time on streams that also run compute (ns)",
    "overlap_ratio": "overlap_ns / comm_ns (NaN without comm)",
    "hidable_comm_ns": "max(0, min(exposed_comm_ns - startup_exposed_comm_ns - "
    "comm_wait_ns, compute_ns - overlap_ns)): exposed comm past start-up, less every wait for "
    "other ranks (a wait for a rank still starting up can fall in this device's steady "
    "state), at most the compute not already alongside comm (the compute that overlaps comm "
    "hides nothing more; ns; an unknown wait counts as 0)",
    "window_ns": "length of the window(s) (ns)",
    "steady_window_ns": "window_ns - startup_idle_ns: its window's steady-state time, the "
    "yardstick of the rules' shares (seconds of start-up inside a range do not shrink its "
    "idle to a few per cent, as in the summary; ns)",
    "device": "device id",
}

# where to look in a timeline viewer, per scope row
_AT_DOC = {
    "at_ns": "start of the worst instance, on the trace's own clock (ns): the launch with the "
    "most quantization idle (else the longest), the range instance with the most recoverable "
    "idle, the sequence's first op",
    "at_rel_ns": "at_ns - the trace's first GPU operation (ns)",
}

_STEP_DOC = {
    "name": "a repeated top-level range (its instances are the steps; range names drop a "
    "trailing step number: train_step_3 -> train_step, ProfilerStep#7 -> ProfilerStep)",
    "device": "device id",
    "steps": "instances of the family on the device",
    "steady_steps": "instances that are not cold (the per-step numbers are theirs; cold: more "
    "start-up idle than 10 % of the GPU window, or a first instance over 2x the others' median "
    "window, data/thresholds.yaml cold_instances)",
    "step_ns": "median GPU window of a steady step (ns)",
    "busy_ns": "median GPU busy time of a steady step (ns)",
    "idle_ns": "median GPU idle time of a steady step (ns)",
    "overhead_ns": "median launch overhead of a steady step (host-bound + latency gaps, ns)",
    "sync_idle_ns": "median synchronization idle of a steady step over its period (from its "
    "first GPU op to the next range's: the stall after a host read at the step's end is the "
    "step's, ns)",
    "sync_gaps": "median synchronization gaps opening in a steady step's period",
    "sync_idle_total_ns": "synchronization idle summed over the steady steps' periods (ns)",
    "host_busy_ns": "median host-busy idle of a steady step (the launching thread busy with "
    "other work than launching), over the step's window as the regions table measures it: "
    "from the gap before its first op to its last op (ns)",
    "host_busy_total_ns": "host-busy idle summed over the steady steps' windows (ns)",
    "busy_in": "what held the host-busy idle of the family the longest (as the regions "
    "table's busy_in: over every instance)",
    "launches": "median host launches of a steady step",
    "ops": "median GPU operations of a steady step",
    "median_gap_ns": "median launch-overhead gap over the steady steps' ops (ns)",
    "overhead_share": "overhead_ns / step_ns",
    "graph_saving_ns": "estimated saving over all steady steps if each step ran from one CUDA "
    "graph: sum of max(0, gap - 256 ns) over their launch-overhead gaps (ns)",
    "severity_base_ns": "the steady steps' periods summed (ns): automatic severity is the "
    "savings' share of this, not of the whole device span",
}

_STRAGGLER_DOC = {
    "name": "top-level range whose collectives wait for one device",
    "device": "the straggler: the device most often last into the range's collectives",
    "devices": "devices that ran the range",
    "instances": "instances of the range on the straggler",
    "waits_caused_ns": "time the other devices spent waiting inside the range's collectives "
    "in their steady state (their steady_comm_wait_ns summed, ns)",
    "extra_compute_ns": "the straggler's compute time minus the median of the others' (ns)",
    "extra_launch_overhead_ns": "its launch overhead minus the others' median (ns)",
    "extra_sync_ns": "its synchronization idle minus the others' median (ns)",
    "late_start_ns": "how much later its GPU work starts than the others' (median over the "
    "instances, ns): GPU idle with no launch from its host, e.g. an input pipeline",
    "extra_ns": "the largest of the four explanations above (ns)",
    "by_work": "the largest is extra compute (uneven load)",
    "by_host": "the largest is extra launch overhead (its host launches slower)",
    "by_sync": "the largest is extra synchronization idle",
    "by_input": "the largest is the late start (input pipeline, host work before the step)",
}

_STAGE_DOC = {
    "name": "the step family the bubbles are measured over ('' when the trace has no repeated "
    "top-level range: the whole trace is one step)",
    "device": "the stage's device",
    "stage": "its position in the pipeline (0: the first stage, which computes before any "
    "transfer reaches it)",
    "stages": "p: the devices in the pipeline",
    "microbatches": "m: compute blocks per step on the first stage / 2 (a forward and a "
    "backward block per micro-batch, between point-to-point kernels)",
    "steps": "steps measured",
    "step_ns": "median step window: the first to the last GPU op of any stage (ns)",
    "compute_ns": "median compute time of the stage per step (union of compute ops, ns)",
    "bubble_ns": "median time per step without compute on the stage: idle or waiting in a "
    "transfer (step_ns - compute_ns, ns)",
    "bubble_fraction": "median bubble_ns / step_ns",
    "ideal_fraction": "the schedule's bubble share with equal stages and free transfers: "
    "(p - 1) / (m + p - 1) (GPipe, 1F1B)",
    "ideal_2m_fraction": "the ideal share with twice the micro-batches: (p - 1) / (2m + p - 1)",
    "excess_bubble_ns": "sum over the steps of max(0, bubble_ns - ideal_fraction x step_ns) (ns)",
    "imbalance_ns": "sum over the steps of max(0, compute_ns - the stages' median compute) (ns)",
    "compute_vs_median": "compute_ns / the stages' median compute_ns",
    "bottleneck": "the stage with the most compute (the pipeline runs at its pace)",
    "severity_base_ns": "the steps' windows summed (ns)",
    "bubble_per_step_ns": "the stage's bubble in each measured step, in step order (list, ns)",
    "compute_per_step_ns": "the stage's compute in each measured step (list, ns)",
}

# the hardware counters of a kernel group (--counters, or an Nsight Compute report):
# medians over its launches that have counters (docs/metrics.md, "Hardware counters")
_COUNTER_DOC = {
    "counter_launches": "launches of the group with hardware counters (0: none)",
    "has_counters": "counter_launches > 0",
    "sm_imbalance": "SM active cycles, busiest SM over the average (sm__cycles_active.max / "
    ".avg; 1: even; NaN without counters)",
    "sm_idle_fraction": "1 - average / busiest SM active cycles: the share of the SMs' time "
    "spent waiting for the busiest one",
    "counter_idle_ns": "sm_idle_fraction * total_ns: that wait in time, as the counters "
    "measured it (ns)",
    "tensor_pipe_pct": "tensor pipe busy, % of its peak over the SMs' active cycles "
    "(sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active)",
    "dram_pct": "DRAM throughput, % of peak (gpu__dram_throughput.avg.pct_of_peak_sustained_"
    "elapsed)",
    "memory_pct": "memory throughput, % of peak, the busiest of DRAM, L2, L1 and shared "
    "memory (gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed)",
    "sm_pct": "SM (compute) throughput, % of peak (sm__throughput.avg.pct_of_peak_sustained_"
    "elapsed)",
    "tma_loads": "TMA load instructions per launch (smsp__inst_executed_op_tma_ld.sum)",
    "uses_tma": "tma_loads > 0: the kernel loads through the Tensor Memory Accelerator",
    "memory_stall_share": "issue stalls on long scoreboard, barrier, MIO throttle and short "
    "scoreboard over all warp cycles per issued instruction (0..1)",
    "smem_limit_ctas": "CTAs per SM the shared memory allows (launch__occupancy_limit_shared_mem)",
    "achieved_occupancy_pct": "active warps, % of the SM's maximum (sm__warps_active.avg."
    "pct_of_peak_sustained_active)",
    "issue_active_pct": "cycles with an instruction issued, % (smsp__issue_active.avg."
    "pct_of_peak_sustained_active)",
    "ncu_rules": "Nsight Compute's own rule results for the group's first profiled launch "
    "(details page): 'Rule (est. N %)', optimization hints by estimated speedup ('' none)",
}

SCOPES: dict[Scope, dict[str, str]] = {
    Scope.KERNELS: {
        "name": "kernel name",
        "device": "device id",
        "region": "top-level NVTX range ('' outside ranges)",
        "launches": "number of launches",
        "total_ns": "summed launch duration (ns)",
        "median_ns": "median launch duration (ns)",
        "share_of_busy": "total_ns / the device's busy time",
        "grid_blocks": "CTAs per launch",
        "block_threads": "threads per CTA",
        "registers": "registers per thread",
        "smem_per_block": "static + dynamic shared memory per CTA (B)",
        "ctas_per_sm": "resident CTAs per SM (occupancy)",
        "slots": "SMs * ctas_per_sm",
        "waves": "grid_blocks / slots",
        "full_waves": "floor(waves)",
        "last_wave_fill": "waves - floor(waves): how full the last, partial wave is (0..1)",
        "tail_fraction": "1 - waves / ceil(waves)",
        "tail_idle_ns": "tail idle (waves >= 1) (ns)",
        "underfill_idle_ns": "under-fill idle (waves < 1) (ns)",
        "persistent": "kernel loops over tiles itself (not judged by grid)",
        "comm": "communication kernel",
        "underfilled": "waves < 1",
        "sm_count": "SMs of the device",
        "active_units": "what sm_imbalance compares: SMs (Nsight Compute's sm__cycles_active), "
        "or shader engines (AMD: SQ_BUSY_CYCLES is counted per SE)",
        "block_term": "what the GPU's vendor calls a thread block: CTA (NVIDIA) or workgroup (AMD)",
        "unit_term": "what the GPU's vendor calls the unit that runs them: SM (NVIDIA) or CU (AMD)",
        "cc_major": "compute capability major (NaN on AMD)",
        "m": "GEMM M (NaN unknown)",
        "n": "GEMM N (NaN unknown)",
        "k": "GEMM K (NaN unknown)",
        "batch": "GEMM batch count (NaN unknown)",
        "has_shape": "M, N, K known",
        "shape": "the GEMM shape in words: 'shape M=.. N=.. K=..', or that the trace does not "
        "hold it",
        "tile_m": "output tile rows (NaN unknown)",
        "tile_n": "output tile columns (NaN unknown)",
        "tile_k": "K step per iteration (NaN unknown)",
        "tiles": "output tiles per launch: batch * ceil(m / tile_m) * ceil(n / tile_n)",
        "k_iters": "K iterations per tile: ceil(k / tile_k) (NaN when tile_k unknown)",
        "tflops": "achieved TFLOP/s (2*M*N*K*batch per launch over its time)",
        "peak_tflops": "datasheet dense FP16/BF16 TFLOP/s of the GPU (NaN unknown)",
        "tflops_fraction": "tflops / peak_tflops",
        "gemm_by": "what says this kernel is a GEMM: shape (--shape), op (a matrix-multiply op "
        "range launched it), user (--gemm), name (classify.yaml gemm_kernels), '' (nothing)",
        "gemm": "gemm_by is not '': the kernel is a GEMM by evidence",
        "not_gemm_by": "what says it is not a GEMM (vetoes the GEMM strategies unless --shape / "
        "--gemm name it): name (classify.yaml not_gemm_kernels: batch norm, norms, reductions, "
        "optimizer, elementwise, softmax, cuBLAS's splitKreduce), op (most of its launches "
        "come from a CPU op in not_gemm_ops), '' (nothing)",
        "memory": "a copy/fill kernel by name (classify.yaml memory_kernels)",
        "gemm_guess": "not gemm, yet shaped like one (data/thresholds.yaml gemm_guess): not "
        "comm/memory/persistent, and under-filled with long launches or heavy CTAs in 1-2 "
        "waves; findings on it say confidence: unconfirmed",
        **_COUNTER_DOC,
        **_AT_DOC,
    },
    Scope.REGIONS: {
        "name": "top-level NVTX range text ('' for a whole device without ranges; "
        f"'{OUTSIDE_RANGES}' for a device's time outside every range when it has ranges)",
        "instances": "number of range instances summed",
        **{
            c: _WINDOW_DOC[c]
            for c in (
                *WINDOW_COLUMNS,
                "graph_saving_ns",
                "graph_op_share",
                "overlap_ratio",
                "hidable_comm_ns",
                "window_ns",
                "steady_window_ns",
                "device",
            )
        },
        **{
            col: f"what held its {cause} idle the longest: {what}, with its share of that idle "
            f"when it is not all of it ('{NOTHING_RECORDED}' when the trace names nothing)"
            for col, (cause, what) in _DETAIL_COLUMNS.items()
        },
        **{
            col: f"start of its longest piece of {cause} idle, on the trace's own clock (ns; "
            "ties: the earliest; missing: none)"
            for col, cause in _WORST_AT_COLUMNS.items()
        },
        "ops": "GPU operations of its instances, summed (ops launched outside every range for "
        "the outside-ranges row; a whole device's without ranges)",
        "launches": "host launch calls of its instances, summed (a CUDA-graph replay counts "
        "once; NaN for a whole device without ranges: not counted)",
        "steady_comm_wait_ns": "comm_wait_ns of the collectives launched in the device's "
        "steady state (ns; NaN: unknown): the first collectives' waits, while the other "
        "ranks still start up (communicator set-up, first kernel loads), are start-up, as "
        "the idle before the steady state is",
        "last_device": "device most often last to reach this range's collectives (NaN none)",
        "rank_wait": "the waits for other ranks in words: how long and who arrives last, 'none', "
        "or 'not measured (the trace holds one rank)'",
        "collectives_per_instance": "collective kernels (comm that is not point-to-point) "
        "per instance of the range on the device",
        "p2p_comm_share": "share of the range's communication kernel time (summed per kernel) "
        "in point-to-point kernels (send / receive: classify.yaml p2p_kernels; 0..1, NaN "
        "without communication)",
        "interleaved_share": "share of consecutive collectives with compute of the range "
        "started between them (0..1; NaN under two): ~1 each collective between the GEMMs "
        "it serves (tensor parallelism), ~0 collectives back to back after the compute "
        "(data-parallel gradient buckets)",
        "pipeline_stage": "the range is the step family of a recognised pipeline on one of its "
        "stage devices (its point-to-point waits are the pipeline's bubble: the stages table)",
        "steady_steps": "steady steps of the range's step family on the device (the steps "
        "table; 0 when the range is no step family): the rules that judge a family per "
        "steady step read it",
        **_AT_DOC,
    },
    Scope.SEQUENCES: {
        "device": "device id",
        "region": "top-level NVTX range of its first op ('' outside ranges)",
        "top_kernel": "most common kernel of the sequence",
        "ops": "GPU operations",
        "launches": "host launch calls (a CUDA-graph replay counts once)",
        "span_ns": "first start to last end (ns)",
        "overhead_ns": "launch-overhead gaps inside it (ns)",
        "overhead_share": "overhead_ns / span_ns",
        "graph_saving_ns": "estimated saving if run from one CUDA graph (ns)",
        "median_kernel_ns": "median GPU operation time (ns)",
        "median_gap_ns": "median gap between operations (ns)",
        **_AT_DOC,
    },
    Scope.STEPS: {**_STEP_DOC, **_AT_DOC},
    Scope.STRAGGLERS: {**_STRAGGLER_DOC, **_AT_DOC},
    Scope.STAGES: {**_STAGE_DOC, **_AT_DOC},
}


def _kernels(a: Analysis) -> pd.DataFrame:
    by_region = a.region_count() > 0
    k = a.kernel_table(by_region=by_region)
    if k.empty:
        return pd.DataFrame(columns=list(SCOPES[Scope.KERNELS]))
    if not by_region:
        k["region"] = ""
    k["region"] = k["region"].fillna("").astype(str)
    busy = a.devices.set_index("device")["gpu_busy_ns"]
    k["share_of_busy"] = k["total_ns"] / k["device"].map(busy)
    k["full_waves"] = np.floor(k["waves"])
    k["last_wave_fill"] = k["waves"] - k["full_waves"]
    gpus = a.trace.gpus
    k["sm_count"] = k["device"].map({d: g.sm_count for d, g in gpus.items()})
    amd = k["device"].isin([d for d, g in gpus.items() if g.vendor == "amd"]).to_numpy()
    k["active_units"] = np.where(amd, "shader engines", "SMs").astype(object)
    k["block_term"] = np.where(amd, "workgroup", "CTA").astype(object)
    k["unit_term"] = np.where(amd, "CU", "SM").astype(object)
    k["cc_major"] = k["device"].map({d: g.cc_major for d, g in gpus.items()}).astype(float)
    k["peak_tflops"] = k["device"].map({d: g.dense_fp16_tflops for d, g in gpus.items()})
    k["peak_tflops"] = k["peak_tflops"].astype(float)
    k["has_shape"] = k["m"].notna()
    named_gemm, memory, named_not = names_in(k["name"], "gemm_kernels", "memory_kernels",
                                             "not_gemm_kernels")  # fmt: skip
    op_not = k["op_not_gemm"].to_numpy(bool) if "op_not_gemm" in k else np.zeros(len(k), bool)
    k["not_gemm_by"] = np.select([named_not, op_not], ["name", "op"], default="")
    source = k["shape_source"].astype(object)
    user = source.isin(["--shape", "--gemm"]).to_numpy()
    vetoed = (k["not_gemm_by"] != "").to_numpy() & ~user  # (the user's word wins)
    k["gemm_by"] = np.select(
        [
            source.eq("--shape"),
            source.eq("--gemm"),
            vetoed,
            source.isin(["nvtx", "op"]),
            named_gemm,
        ],
        ["shape", "user", "", "op", "name"],
        default="",
    )
    k["gemm"] = k["gemm_by"] != ""
    k["memory"] = memory
    results = rule_results(a.trace.counter_rules, a.trace.counters, k["counter_row"])
    k["ncu_rule_results"] = pd.Series(results, index=k.index, dtype=object)
    k["ncu_rules"] = [rules_in_words(r) if r else "" for r in results]  # ("" for none)
    k["gemm_guess"] = _gemm_guess(k)
    add_tile_columns(k)
    known = k["m"].notna() & k["n"].notna() & k["k"].notna()
    k["shape"] = np.where(
        known,
        "shape M=" + k["m"].fillna(0).astype(np.int64).astype(str) + " N="
        + k["n"].fillna(0).astype(np.int64).astype(str) + " K="
        + k["k"].fillna(0).astype(np.int64).astype(str),
        "shape not in the trace (--shape PATTERN=MxNxK gives it)",
    )  # fmt: skip
    return _at(k, k["worst_start_ns"], a.origin_ns)


def _gemm_guess(k: pd.DataFrame) -> np.ndarray:
    """The structural GEMM guess of data/thresholds.yaml, per kernel group."""
    t = load_yaml("thresholds.yaml")["gemm_guess"]
    candidate = ~k["gemm"] & ~k["memory"] & ~k["comm"].astype(bool) & ~k["persistent"].astype(bool)
    candidate &= k["not_gemm_by"] == ""  # (a name or launching op says it is not a GEMM)
    long_underfilled = k["underfilled"].astype(bool) & (
        k["median_ns"] >= t["underfilled_min_median_ns"]
    )
    heavy = (k["registers"] >= t["heavy_min_registers"]) | (
        k["smem_per_block"] >= t["heavy_min_smem_per_block"]
    )
    tailed = (k["waves"] >= 1) & (k["waves"] <= t["heavy_max_waves"])
    return (candidate & (long_underfilled | (heavy & tailed))).to_numpy(bool)


def _at(table: pd.DataFrame, start: pd.Series, origin: int) -> pd.DataFrame:
    """Add at_ns (``start``) and at_rel_ns (relative to the trace's first GPU op)."""
    table["at_ns"] = start.to_numpy()
    table["at_rel_ns"] = table["at_ns"] - origin
    return table


def held_by(a: Analysis) -> pd.DataFrame:
    """Per (cause, region name, device) of the selection's idle pieces: the detail of the
    pieces with the most time (ties: the alphabetically first) and its share of that
    cause's idle there (0..1), and where its longest piece starts (ns, the trace's clock;
    ties: the earliest); columns cause, name, device, detail ('' for the whole device when
    the trace has no ranges), share, worst_start_ns."""
    return a.derived("held_by", _held_by)


def _held_by(a: Analysis) -> pd.DataFrame:
    p = a.pieces
    cols = ["cause", "name", "device", "detail", "share", "worst_start_ns"]
    if p.empty or "detail" not in p:
        return pd.DataFrame(columns=cols)
    # grouped on integer codes; only the winners are turned into text
    region = a.ops["region"].array
    total = _piece_sums(a, region)
    worst = _longest_pieces(a, region)
    whole = total.groupby(["c", "r", "d"], sort=False)["ns"].transform("sum").to_numpy()
    total["share"] = total["ns"].to_numpy() / np.maximum(whole, 1)
    details = np.asarray(p["detail"].array.categories, dtype=object)
    total["text"] = details[total["t"].to_numpy()]
    total = total.sort_values(["ns", "text"], ascending=[False, True], kind="stable")
    best = total.drop_duplicates(["c", "r", "d"])
    names = np.append(np.asarray(region.categories, dtype=object), "")
    at = worst.set_index(["c", "r", "d"])["start"]
    return pd.DataFrame({
        "cause": np.asarray(p["cause"].array.categories, dtype=object)[best["c"].to_numpy()],
        "name": names[best["r"].to_numpy()], "device": best["d"].to_numpy(),
        "detail": best["text"].to_numpy(), "share": best["share"].to_numpy(),
        "worst_start_ns": at.reindex(pd.MultiIndex.from_frame(best[["c", "r", "d"]])).to_numpy(),
    })[cols].reset_index(drop=True)  # fmt: skip


def _piece_sums(a: Analysis, region: pd.Categorical) -> pd.DataFrame:
    """Per distinct (cause code c, region code r: -1 outside every range, device d, detail
    code t) of the pieces, in the order their first pieces come on the devices' timelines
    (by device, then start: a device's pieces are disjoint): ns, their idle time. Counted
    a block of pieces at a time into one slot per combination where the combinations
    number at most DENSE_BINS (at 10M kernels, 17M pieces: ~0.4 GB of pandas temporaries
    before); else through group_sums."""
    p = a.pieces
    rows = p["row"].to_numpy()
    start, end = p["start"].to_numpy(), p["end"].to_numpy()
    cause, detail = p["cause"].array.codes, p["detail"].array.codes
    device = p["device"].to_numpy()
    low = int(device.min())
    radix = (len(p["cause"].array.categories), len(region.categories) + 1,
             int(device.max()) - low + 1, len(p["detail"].array.categories) + 1)  # fmt: skip
    bins = int(np.prod(radix, dtype=np.int64))
    n = len(p)
    if bins > DENSE_BINS:
        keys = {"c": cause, "r": _piece_regions(a, region, rows), "d": device, "t": detail}
        sums = group_sums(keys, {"ns": np.subtract(end, start)}, least={"first": start})
        return sums.sort_values(["d", "first"], kind="stable", ignore_index=True)[
            ["c", "r", "d", "t", "ns"]
        ]
    none = np.iinfo(np.int64).max
    first = np.full(bins, none, dtype=np.int64)  # per slot: its first piece's start
    ns = np.zeros(bins, dtype=np.int64)
    for at in (slice(b, b + BLOCK_ROWS) for b in range(0, n, BLOCK_ROWS)):
        key = cause[at].astype(np.int64) * radix[1] + _piece_regions(a, region, rows[at]) + 1
        key = (key * radix[2] + device[at] - low) * radix[3] + detail[at] + 1
        np.minimum.at(first, key, start[at])
        np.add.at(ns, key, end[at] - start[at])
    present = np.flatnonzero(first != none)
    t, rest = present % radix[3] - 1, present // radix[3]
    d, rest = rest % radix[2] + low, rest // radix[2]
    order = np.lexsort((first[present], d))
    return pd.DataFrame({"c": rest // radix[1], "r": rest % radix[1] - 1, "d": d, "t": t,
                         "ns": ns[present]}).iloc[order].reset_index(drop=True)  # fmt: skip


def _longest_pieces(a: Analysis, region: pd.Categorical) -> pd.DataFrame:
    """Per distinct (cause code c, region code r: -1 outside every range, device d) of the
    pieces: ``start``, where its longest piece starts (ns; ties: the earliest). Two passes a
    block of pieces at a time: each group's longest length, then the earliest start of a
    piece that long (no sort of the pieces)."""
    p = a.pieces
    rows = p["row"].to_numpy()
    start, end = p["start"].to_numpy(), p["end"].to_numpy()
    cause, device = p["cause"].array.codes, p["device"].to_numpy()
    low = int(device.min())
    radix = (len(p["cause"].array.categories), len(region.categories) + 1,
             int(device.max()) - low + 1)  # fmt: skip
    n = len(p)
    blocks = [slice(b, b + BLOCK_ROWS) for b in range(0, n, BLOCK_ROWS)]

    def keys(at: slice) -> np.ndarray:
        r = _piece_regions(a, region, rows[at])
        return (cause[at].astype(np.int64) * radix[1] + r + 1) * radix[2] + device[at] - low

    bins = int(np.prod(radix, dtype=np.int64))
    if bins > DENSE_BINS:  # (numbered in order of first appearance instead)
        codes, uniques = pd.factorize(np.concatenate([keys(at) for at in blocks]))
        slot, bins = (lambda at: codes[at]), len(uniques)
    else:
        slot, uniques = keys, None
    longest = np.full(bins, -1, dtype=np.int64)
    for at in blocks:
        np.maximum.at(longest, slot(at), end[at] - start[at])
    first = np.full(bins, np.iinfo(np.int64).max, dtype=np.int64)
    for at in blocks:
        k = slot(at)
        hit = (end[at] - start[at]) == longest[k]
        np.minimum.at(first, k[hit], start[at][hit])
    present = np.flatnonzero(longest >= 0)
    key = present if uniques is None else uniques[present]
    d, rest = key % radix[2] + low, key // radix[2]
    return pd.DataFrame({"c": rest // radix[1], "r": rest % radix[1] - 1, "d": d,
                         "start": first[present]})  # fmt: skip


def _piece_regions(a: Analysis, region: pd.Categorical, rows: np.ndarray) -> np.ndarray:
    """The region code (-1: outside every range) of the ops at ``rows`` (pieces' op rows)."""
    if a.regions.empty:  # (pieces: a TraceAnalysis's, its regions in memory)
        return np.full(len(rows), -1, dtype=np.int8)
    return _codes_at(region.codes, a.ops.index, rows)


def _codes_at(codes: np.ndarray, index: pd.Index, rows: np.ndarray) -> np.ndarray:
    """``codes`` (per row of a table with ``index``) at the rows labelled ``rows``; -1 for a
    label the index lacks. An unfiltered table's index is its positions: no lookup."""
    if isinstance(index, pd.RangeIndex) and index.start == 0 and index.step == 1:
        inside = (rows >= 0) & (rows < len(index))
        if inside.all():
            return codes[rows]
    else:
        rows = index.get_indexer(rows)
        inside = rows >= 0
    out = np.full(len(rows), -1, dtype=codes.dtype)
    out[inside] = codes[rows[inside]]
    return out


def region_graph_savings(a: Analysis) -> pd.DataFrame:
    """Per (region name, device) of the selection: graph_saving_ns, the CUDA-graph saving of
    the launch overhead of its ops' gaps (eager launches only)."""
    return a.derived("graph_saving", _region_graph_savings)


def _region_graph_savings(a: Analysis) -> pd.DataFrame:
    ops = a.ops
    saving = graph_saving(ops["overhead_ns"].to_numpy())
    saving[ops["cause"].eq("graph_internal").to_numpy()] = 0  # (eager launches only)
    region = ops["region"].array  # (categorical: grouped on its codes, -1 = no region)
    # (whole numbers: counted into one slot per (region, device), no groupby temporaries;
    # 10M ops: 0.46 GB -> 0.2 GB over the analysis)
    out = integer_group_sums(
        {"r": region.codes, "device": ops["device"].to_numpy()},
        {"graph_saving_ns": saving, "graph_op": ops["graph"].to_numpy(bool),
         "n": np.ones(len(ops), dtype=bool)},
    ).astype({"graph_saving_ns": np.int64, "n": np.int64})  # fmt: skip
    sums = {"graph_saving_ns": ("graph_saving_ns", "sum"), "graph_op": ("graph_op", "sum"),
            "n": ("n", "sum")}  # fmt: skip
    names = np.append(np.asarray(region.categories, dtype=object), "")
    out.insert(0, "region", names[out.pop("r").to_numpy()])
    if out["region"].eq("").sum() > 1:  # (a range named '' and no range at all are one)
        out = out.groupby(["region", "device"], as_index=False).agg(**sums)
    out["graph_op_share"] = out.pop("graph_op") / out.pop("n")
    return out.sort_values(["region", "device"], kind="stable").reset_index(drop=True)


def _regions(a: Analysis) -> pd.DataFrame:
    savings = region_graph_savings(a)
    if not a.region_count():
        w = a.devices.assign(name="", instances=1)
        w["window_ns"] = w["end_ns"] - w["start_ns"]
        w["worst_start_ns"] = w["start_ns"]
        # (a whole device's ops from its streams' counts; its launch calls are not counted)
        per_device = a.streams.groupby("device")["ops"].sum() if len(a.streams) else None
        w["ops"] = (per_device.reindex(w["device"]).fillna(0).to_numpy(np.float64)
                    if per_device is not None else np.nan)  # fmt: skip
        w["launches"] = np.nan
    else:
        w = a.region_totals().drop(columns="recoverable_ns")
    # (without ranges the ops' region is '': the whole device; with ranges, the ops launched
    # outside every range, region '', are the OUTSIDE_RANGES row's)
    held = held_by(a)
    per = savings.set_index(["region", "device"])
    keys = w[["name", "device"]].astype({"name": str})
    keys["name"] = keys["name"].replace(OUTSIDE_RANGES, "")
    idx = pd.MultiIndex.from_frame(keys)
    for col in ("graph_saving_ns", "graph_op_share"):
        w[col] = per[col].reindex(idx).to_numpy() if len(per) else 0.0
        w[col] = w[col].fillna(0).astype(np.float64)
    # what held each cause's idle per row (held_by: one row per cause, name and device)
    detail = held["detail"].to_numpy(object)
    share = held["share"].to_numpy(np.float64)
    part = (detail != "") & (share < SHARE_SHOWN_BELOW)  # (held only a part: say which share)
    text = detail.copy()
    percent = np.rint(100 * share[part]).astype(np.int64).astype(str).astype(object)
    text[part] = detail[part] + " (" + percent + " % of it)"
    where = list(zip(held["cause"], held["name"], held["device"], strict=True))
    said = dict(zip(where, text, strict=True))
    at = list(zip(keys["name"], keys["device"], strict=True))
    for col, (cause, _) in _DETAIL_COLUMNS.items():
        w[col] = np.array([said.get((cause, *k)) or NOTHING_RECORDED for k in at], dtype=object)
    worst = dict(zip(where, held["worst_start_ns"].tolist(), strict=True))
    for col, cause in _WORST_AT_COLUMNS.items():  # (exact: epoch ns do not fit a float64)
        w[col] = pd.array([worst.get((cause, *k)) for k in at], dtype="Int64")
    w["overlap_ratio"] = overlap_ratio(w["overlap_ns"], w["comm_ns"])
    w["steady_window_ns"] = w["window_ns"] - w["startup_idle_ns"]
    # waits for other ranks are measured only when the trace holds several ranks' comm (the
    # comm ops' sums per (region, device): a job of many ranks adds up its ranks')
    comm = a.comm_by_region()
    if not comm.several_devices():
        w["comm_wait_ns"] = np.where(w["comm_ns"] > 0, np.nan, 0.0)
    startup = comm.per_region("startup_wait_ns", idx).fillna(0.0).to_numpy()
    w["steady_comm_wait_ns"] = w["comm_wait_ns"] - startup  # (NaN stays NaN)
    steady_exposed = w["exposed_comm_ns"] - w["startup_exposed_comm_ns"]
    hidable = (steady_exposed - w["comm_wait_ns"].fillna(0)).clip(lower=0)
    # (compute already alongside comm hides nothing more: only the rest can be moved there)
    w["hidable_comm_ns"] = np.fmin(hidable, w["compute_ns"] - w["overlap_ns"])
    w["last_device"] = comm.most_often_last(idx).to_numpy()
    w["rank_wait"] = [_rank_wait(wait, last) for wait, last in
                      zip(w["comm_wait_ns"], w["last_device"], strict=True)]  # fmt: skip
    # collectives (comm kernels that are not point-to-point) launched per range instance,
    # and the point-to-point kernels' share of the comm kernels' time
    counts = comm.per_region("collectives", idx).fillna(0).to_numpy()
    w["collectives_per_instance"] = counts / w["instances"].clip(lower=1).to_numpy()
    total = comm.per_region("comm_ns", idx)
    p2p = comm.per_region("p2p_ns", idx)
    w["p2p_comm_share"] = (p2p / total.where(total > 0)).to_numpy(np.float64)
    share = interleaving(a).set_index(["name", "device"])["interleaved_share"]
    w["interleaved_share"] = share.reindex(idx).to_numpy() if len(share) else np.nan
    return _at(w, w.pop("worst_start_ns"), a.origin_ns)


def _rank_wait(wait: float, last: float) -> str:
    """The waits for other ranks in words (never 'unknown')."""
    if wait is None or np.isnan(wait):
        return "its wait for other ranks is not measured (the trace holds one rank)"
    if wait <= 0:
        return "none of it waits for other ranks"
    who = (
        f" (most often last: device {int(last)})" if last is not None and np.isfinite(last) else ""
    )
    return f"{fmt_ns(wait)} of it waits for other ranks{who}"


def interleaving(a: Analysis) -> pd.DataFrame:
    """Per (region name, device) of the selection (name, device, interleaved_share): the
    share of consecutive collectives of one range instance (in start order) between which a
    compute op of the range started: ~1 when each collective sits between GEMMs that feed it
    and consume it (tensor parallelism), ~0 when the collectives run back to back after the
    compute (data-parallel gradient buckets); rows only with two or more collectives."""
    return a.derived("interleaving", _interleaving)


def _interleaving(a: Analysis) -> pd.DataFrame:
    ops = a.ops
    coll = ops[ops["op_class"].eq("comm").to_numpy() & ~point_to_point(ops)]
    cols = ["name", "device", "interleaved_share"]
    if coll.empty:
        return pd.DataFrame(columns=cols)
    compute = ops[ops["op_class"].eq("compute").to_numpy()]
    region = coll["region"].astype(object).fillna("").to_numpy()
    out = {}
    for (name, device), rows in pd.Series(np.arange(len(coll))).groupby(
        [region, coll["device"].to_numpy()]
    ).indices.items():  # fmt: skip
        if len(rows) < 2:
            continue
        c = coll.iloc[rows].sort_values("start", kind="stable")
        mine = compute[
            (compute["device"].to_numpy() == device)
            & (compute["region"].astype(object).fillna("").to_numpy() == name)
        ]
        starts = np.sort(mine["start"].to_numpy())
        lo = c["end"].to_numpy()[:-1]
        hi = c["start"].to_numpy()[1:]
        between = np.searchsorted(starts, hi, side="left") - np.searchsorted(starts, lo)
        rid = c["range_id"].to_numpy()
        same = rid[1:] == rid[:-1]  # (pairs inside one instance: a step's end and the next
        if same.any():  # step's start are not interleaving)
            out[(name, int(device))] = float(np.mean(between[same] > 0))
    return pd.DataFrame([(n, d, v) for (n, d), v in out.items()], columns=cols)


def sequence_table(a: Analysis) -> pd.DataFrame:
    """The rules' 'sequences' scope: the launch sequences with overhead_share, at_ns."""
    s = a.sequences
    if s.empty:
        return pd.DataFrame(columns=list(SCOPES[Scope.SEQUENCES]))
    s = s.rename(columns={"median_op_ns": "median_kernel_ns"})
    s["region"] = s["region"].fillna("").astype(str)
    s["overhead_share"] = s["overhead_ns"] / s["span_ns"].where(s["span_ns"] > 0)
    return _at(s, s["start_ns"], a.origin_ns)


def _steps(a: Analysis) -> pd.DataFrame:
    """Repeated top-level ranges (steps) per (family, device): per-step medians over the
    steady steps and the whole-step CUDA-graph saving (SCOPES['steps'])."""
    t = step_table(a)
    if t.empty:
        return pd.DataFrame(columns=list(SCOPES[Scope.STEPS]))
    t = t.drop(columns="first_start_ns")
    return _at(t, t.pop("worst_start_ns"), a.origin_ns)


def step_table(a: Analysis) -> pd.DataFrame:
    """_steps' rows before their at_ns: with worst_start_ns and first_start_ns (the first
    instance's GPU start: the rows are in the order of their first instance, then device)."""
    return a.derived("steps", _step_table)


def order_steps(t: pd.DataFrame) -> pd.DataFrame:
    """step_table's row order: first instance's start, then device."""
    return t.sort_values(["first_start_ns", "device"], ignore_index=True, kind="stable")


def _step_table(a: TraceAnalysis) -> pd.DataFrame:
    r = a.regions
    if r.empty:
        return pd.DataFrame()
    r = r.reset_index(drop=True)
    family = r["name"].astype(str).to_numpy()
    per = pd.Series(family).groupby([family, r["device"].to_numpy()])
    # steps: a family run more than once whose instances launch kernels (an NVTX range around
    # each tensor's .cuda() moves data, it is no step)
    kernels = pd.Series(r["kernels"].to_numpy() if "kernels" in r else np.ones(len(r)))
    holds = kernels.groupby([family, r["device"].to_numpy()]).transform("median") >= 1
    repeated = (per.transform("size") > 1) & holds
    if not repeated.any():
        return pd.DataFrame()
    # the steps' launch gaps found beside the instances and the steps' measures (a pass
    # over the ops a block at a time, 0.2 s at 10M kernels, against 0.4 s here)
    gaps_found = beside(partial(_step_gaps, a, r), analysis_threads())
    inst = range_instances(a)  # (rows in the order of r)
    # a step's numbers are its GPU window's (first op to last op): the gap before its first
    # op, which the regions measure with it (lead_ns), is the transition between steps
    inside = a.measure(r[["device", "start_ns", "end_ns"]])
    gap_row, gap = gaps_found.result()
    del gaps_found
    saving = graph_saving(gap)
    r = r.assign(
        gpu_busy_ns=inside["gpu_busy_ns"].to_numpy(),
        idle_ns=inside["idle_ns"].to_numpy(),
        launch_overhead_ns=inside["launch_overhead_ns"].to_numpy(),
    )
    r = r.assign(
        family=family,
        cold=inst["cold"].to_numpy(),
        step_ns=r["end_ns"] - r["start_ns"],
        period_ns=inst["span_ns"].to_numpy(),
        period_sync_idle_ns=inst["sync_idle_ns"].to_numpy(),
        period_sync_gaps=inst["sync_gaps"].to_numpy(),
        host_busy_idle_ns=r["host_busy_idle_ns"].to_numpy(),
        graph_saving_ns=np.bincount(gap_row, saving, len(r)),
    )
    # per (family, device) of the repeated ranges, over its steady steps (a cold step holds
    # start-up work: module loads, allocation, compilation; metrics/steady.py), or over all
    # its steps when none is steady; computed for every group at once
    rep = r[repeated.to_numpy()]
    group = rep.groupby(["family", "device"], sort=False).ngroup().to_numpy()
    has_steady = np.bincount(group, ~rep["cold"].to_numpy(), group.max() + 1) > 0
    used = rep[~rep["cold"].to_numpy() | ~has_steady[group]]
    ug = group[~rep["cold"].to_numpy() | ~has_steady[group]]
    cols = ["step_ns", "gpu_busy_ns", "idle_ns", "launch_overhead_ns", "period_sync_idle_ns",
            "period_sync_gaps", "host_busy_idle_ns", "launches", "ops"]  # fmt: skip
    med = used[cols].groupby(ug).median()
    sums = used[["period_sync_idle_ns", "host_busy_idle_ns", "graph_saving_ns",
                 "period_ns"]].groupby(ug).sum()  # fmt: skip
    worst = used["graph_saving_ns"].groupby(ug).idxmax()
    first = rep.groupby(group, sort=True).head(1)
    group_of_row = np.full(len(r), -1)
    group_of_row[used.index.to_numpy()] = ug
    gap_group = group_of_row[gap_row]
    steady = gap_group >= 0
    own = group_medians(gap_group[steady], gap[steady], len(med))  # (NaN: a group without)
    t = pd.DataFrame({
        "name": first["family"].to_numpy(), "device": first["device"].to_numpy().astype(int),
        "steps": np.bincount(group), "steady_steps": np.bincount(group, ~rep["cold"].to_numpy()),
        "step_ns": med["step_ns"].to_numpy(), "busy_ns": med["gpu_busy_ns"].to_numpy(),
        "idle_ns": med["idle_ns"].to_numpy(), "overhead_ns": med["launch_overhead_ns"].to_numpy(),
        "sync_idle_ns": med["period_sync_idle_ns"].to_numpy(),
        "sync_gaps": med["period_sync_gaps"].to_numpy(),
        "sync_idle_total_ns": sums["period_sync_idle_ns"].to_numpy(np.float64),
        "host_busy_ns": med["host_busy_idle_ns"].to_numpy(np.float64),
        "host_busy_total_ns": sums["host_busy_idle_ns"].to_numpy(np.float64),
        "launches": med["launches"].to_numpy(), "ops": med["ops"].to_numpy(),
        "median_gap_ns": own,
        "overhead_share": (med["launch_overhead_ns"] / med["step_ns"].where(med["step_ns"] != 0))
        .to_numpy(),
        "graph_saving_ns": sums["graph_saving_ns"].to_numpy(np.float64),
        "severity_base_ns": sums["period_ns"].to_numpy(np.float64),
        "worst_start_ns": r["start_ns"].to_numpy()[worst.to_numpy()].astype(np.int64),
        "first_start_ns": first["start_ns"].to_numpy().astype(np.int64),
    })  # fmt: skip
    return order_steps(t)


def _step_gaps(a: Analysis, r: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(region row, launch overhead ns) of every gap with launch overhead that opens inside
    its op's region instance ``r`` (rows 0..n-1; the gap entering a step is the transition,
    not the step). CUDA-graph node gaps are left out (a graph already runs them). The ops
    are read BLOCK_ROWS at a time (no temporaries of the ops' length)."""
    ops = a.ops
    range_id, device = ops["range_id"].to_numpy(), ops["device"].to_numpy()
    overhead, cause = ops["overhead_ns"].to_numpy(), ops["cause"].array
    graph_internal = cause.categories.get_loc("graph_internal")
    start, gap_ns = ops["start"].to_numpy(), ops["gap_ns"].to_numpy()
    devices = np.unique(r["device"].to_numpy())
    n_dev = len(devices)
    # dense (range_id, device) -> region row lookup
    lookup = np.full((int(r["range_id"].max()) + 1) * n_dev, -1, dtype=row_dtype(len(r)))
    lookup[r["range_id"].to_numpy() * n_dev + np.searchsorted(devices, r["device"].to_numpy())] = (
        np.arange(len(r))
    )
    region_start = r["start_ns"].to_numpy()
    rows_out, overhead_out = [], []
    for b in range(0, len(ops), BLOCK_ROWS):
        at = slice(b, b + BLOCK_ROWS)
        rng = range_id[at]
        rows = np.flatnonzero((overhead[at] > 0) & (cause.codes[at] != graph_internal)
                              & (rng >= 0))  # fmt: skip
        dev = device[at][rows]
        known = np.isin(dev, devices)
        rows, dev = rows[known], dev[known]
        row = lookup[rng[rows].astype(np.int64) * n_dev + np.searchsorted(devices, dev)]
        opens = start[at][rows] - gap_ns[at][rows]
        inside = (row >= 0) & (opens >= region_start[np.maximum(row, 0)])
        rows_out.append(row[inside])
        overhead_out.append(overhead[at][rows][inside])
    if not rows_out:
        return np.zeros(0, dtype=lookup.dtype), overhead[:0]
    return np.concatenate(rows_out), np.concatenate(overhead_out)


def _stragglers(a: Analysis, regions: pd.DataFrame) -> pd.DataFrame:
    """Per range whose collectives wait for one device (the one most often last): why that
    device is late, from its own timeline against the other devices' (SCOPES['stragglers'])."""
    empty = pd.DataFrame(columns=list(SCOPES[Scope.STRAGGLERS]))
    if not a.region_count() or regions.empty or regions["steady_comm_wait_ns"].isna().all():
        return empty
    out = []
    for name, g in regions.groupby("name", sort=False):
        if len(g) < 2 or not (g["steady_comm_wait_ns"] > 0).any() or g["pipeline_stage"].any():
            continue
        last = g["last_device"].dropna()
        if last.empty:
            continue
        device = int(last.mode().iloc[0])
        me, others = g[g["device"] == device], g[g["device"] != device]
        if me.empty or others.empty:
            continue
        me = me.iloc[0]
        extras = {
            key: float(me[col] - others[col].median())
            for key, col in (("by_work", "compute_ns"), ("by_host", "launch_overhead_ns"),
                             ("by_sync", "sync_idle_ns"))
        }  # fmt: skip
        extras["by_input"] = _late_start(
            a.region_table(["name", "device", "start_ns"], names=[name]), name, device
        )
        best = max(extras, key=lambda k: extras[k])
        out.append({
            "name": name, "device": device, "devices": len(g), "instances": int(me["instances"]),
            "waits_caused_ns": float(others["steady_comm_wait_ns"].sum()),
            "extra_compute_ns": extras["by_work"], "extra_launch_overhead_ns": extras["by_host"],
            "extra_sync_ns": extras["by_sync"], "late_start_ns": extras["by_input"],
            "extra_ns": max(extras[best], 0.0),
            **{k: k == best and extras[k] > 0 for k in extras},
            "worst_start_ns": int(me["at_ns"]),
        })  # fmt: skip
    if not out:
        return empty
    t = pd.DataFrame(out)
    return _at(t, t.pop("worst_start_ns"), a.origin_ns)


def _late_start(regions: pd.DataFrame, name: str, device: int) -> float:
    """Median over the range's instances (matched by order) of how much later ``device``'s
    GPU window starts than the earliest other device's (ns)."""
    r = regions.loc[(regions["name"] == name).to_numpy(), ["device", "start_ns"]]
    r = r.sort_values("start_ns")
    r = r.assign(k=r.groupby("device").cumcount())
    starts = r.pivot_table(index="k", columns="device", values="start_ns", aggfunc="first")
    if device not in starts or starts.shape[1] < 2:
        return 0.0
    others = starts.drop(columns=device).min(axis=1)
    return float((starts[device] - others).dropna().median())


def _stages(a: Analysis) -> pd.DataFrame:
    """Pipeline stages recognised from point-to-point kernels, per stage device
    (SCOPES['stages'], views.pipeline_stages)."""
    t = views.pipeline_stages(a)
    if t.empty:
        return pd.DataFrame(columns=list(SCOPES[Scope.STAGES]))
    return _at(t, t.pop("worst_start_ns"), a.origin_ns)


def build_tables(a: Analysis) -> dict[Scope, pd.DataFrame]:
    """One table per scope for the rule engine (the kernel groups made on another thread
    while the range and step tables are made: at 10M launches 1.0 s beside 0.5 and 0.9 s;
    the kernel groups read a duration per launch since issue 33's twenty-seventh pass, and
    the three together stay under the analysis' own peak)."""
    kernels = beside(partial(_kernels, a), analysis_threads())
    stages = _stages(a)
    regions = _regions(a)
    # in a pipeline, the waits inside point-to-point kernels are its bubble (the stages
    # rules): the step family's ranges on the stage devices are not judged as rank skew,
    # exposed collectives or stragglers as well
    regions["pipeline_stage"] = regions["name"].astype(str).isin(stages["name"]) & regions[
        "device"
    ].isin(stages["device"])
    steps = _steps(a)
    kernel_rows = kernels.result()
    # a step family is judged per steady step where the steps table says so (its cold
    # first step's allocation is start-up, not the host work of every step)
    by_step = steps.set_index(["name", "device"])
    idx = pd.MultiIndex.from_frame(regions[["name", "device"]].astype({"name": str}))
    regions["steady_steps"] = (by_step["steady_steps"].reindex(idx).fillna(0).to_numpy(float)
                               if len(steps) else np.zeros(len(regions)))  # fmt: skip
    held = pd.Series(regions["busy_in"].to_numpy(object), index=idx)
    steps["busy_in"] = (held.reindex(pd.MultiIndex.from_frame(steps[["name", "device"]]))
                        .to_numpy(object) if len(steps) else [])  # fmt: skip
    return {Scope.KERNELS: kernel_rows, Scope.REGIONS: regions,
            Scope.SEQUENCES: sequence_table(a), Scope.STEPS: steps,
            Scope.STRAGGLERS: _stragglers(a, regions), Scope.STAGES: stages}  # fmt: skip
