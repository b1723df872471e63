"""The report's tables, defined once: title, columns and formatted rows. The terminal
(render.terminal, fitted to its width) and the markdown report (render.markdown) render the
same definitions, so they always show the same numbers."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from advisor import views
from advisor.analysis import Analysis
from advisor.data import load_yaml
from advisor.render.fit import Col
from advisor.units import fmt_ns, fmt_pct


@dataclass
class Section:
    title: str
    cols: list[Col]
    rows: list[list[str]]
    note: str = ""  # a line under the table (what the rows leave out)

    @property
    def empty(self) -> bool:
        return not self.rows


def _count(n) -> str:
    return f"{int(n):,}"


def _bytes(n: float) -> str:
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= size:
            return f"{n / size:.2f} {unit}"
    return f"{int(n)} B"


def widen_duplicates(labels: list[str], values: list[str]) -> list[str]:
    """``labels`` with ``values`` appended to the labels that are equal to another one whose
    value differs."""
    groups: dict[str, list[int]] = {}
    for i, label in enumerate(labels):
        groups.setdefault(label, []).append(i)
    out = list(labels)
    for idx in groups.values():
        if len(idx) > 1 and len({values[i] for i in idx}) > 1:
            for i in idx:
                out[i] = f"{labels[i]}, {values[i]}"
    return out


def gemm_shapes(rows: pd.DataFrame) -> list[str]:
    """The GEMM shape of each kernel group (``MxNxK``), else where its shape would come from
    (kernel groups are split by shape evidence too: the same kernel under a matmul op and
    outside)."""
    if not {"m", "n", "k"} <= set(rows):
        return [""] * len(rows)
    source = rows["shape_source"] if "shape_source" in rows else pd.Series(np.nan, rows.index)
    out = []
    for m, n, k, src in zip(rows["m"], rows["n"], rows["k"], source, strict=True):
        if not any(pd.isna(v) for v in (m, n, k)):
            out.append(f"shape {int(m)}x{int(n)}x{int(k)}")
        else:
            out.append(f"shape unknown ({src})" if isinstance(src, str) else "no op or range")
    return out


def group_details(rows: pd.DataFrame) -> list[list[str]]:
    """What else tells kernel groups apart, per kind: registers, shared memory, GEMM shape
    (``?`` where the trace does not say)."""
    return [[f"{_whole(v)} regs" for v in rows["registers"]],
            [f"smem {_whole(v)} B" for v in rows["smem_per_block"]], gemm_shapes(rows)]  # fmt: skip


def _whole(v) -> str:
    return "?" if pd.isna(v) else str(int(v))


def without_grid(k: pd.DataFrame) -> np.ndarray:
    """Per kernel group of ``k``: the trace holds no valid grid or block for it (a number
    missing or not positive), so no waves could be computed."""
    shape = k[["grid_x", "grid_y", "grid_z", "block_x"]]
    return (shape.isna() | (shape <= 0)).any(axis=1).to_numpy()


def dims(*values) -> str:
    """A grid or block as ``XxYxZ`` ('-' where the trace holds no valid number for it)."""
    return "-" if any(pd.isna(v) for v in values) else "x".join(str(int(v)) for v in values)


def kernel_names(k: pd.DataFrame) -> list[str]:
    """Kernel group names as the tables show them: where groups of one name, device, grid
    and block would read the same, what tells them apart (registers, shared memory, GEMM
    shape) in brackets, which a fitted table keeps whole (``Kernel2 [shape 512x512x64]``);
    where even that is the same, the demangled name (one short name, several templates)."""
    if k.empty:
        return []
    names = list(k["name"])
    keys = [f"{n}\0{r.device}\0{r.grid_x}x{r.grid_y}x{r.grid_z}\0{r.block_threads}"
            for n, r in zip(names, k.itertuples(), strict=True)]  # fmt: skip
    for values in group_details(k):
        keys = widen_duplicates(keys, values)
    if "demangled" in k:  # (Nsight's short names: "Kernel2" for many templates)
        templates: dict[str, set[str]] = {}
        for key, d in zip(keys, k["demangled"], strict=True):
            templates.setdefault(key, set()).add(d)
        names = [d if len(templates[key]) > 1 and isinstance(d, str) and d else n
                 for n, d, key in zip(names, k["demangled"], keys, strict=True)]  # fmt: skip
    details = [key.split("\0")[-1].partition(", ")[2] for key in keys]
    return [f"{n} [{d}]" if d else n for n, d in zip(names, details, strict=True)]


# the steady idle by cause (docs/metrics.md, "Why the GPU waited"), in the summary's order
IDLE_LABELS = {
    "launch_overhead_ns": "launch overhead (host launching + latency + in-graph)",
    "sync_idle_ns": "synchronization stalls (blocking synchronize)",
    "copy_idle_ns": "blocking copies (synchronous / pageable)",
    "input_idle_ns": "input pipeline (DataLoader)",
    "host_busy_idle_ns": "host busy elsewhere (not launching)",
    "queued_idle_ns": "launched work held by a dependency",
    "unattributed_idle_ns": "no launch call in the trace",
}
# (a trace whose host events were thinned keeps its launch calls but not what the host did
# around them: its gaps are left unattributed for that reason, docs/metrics.md)
THINNED_UNATTRIBUTED = "not attributed (host events thinned)"


def idle_labels(a: Analysis) -> dict[str, str]:
    """IDLE_LABELS as they apply to ``a``'s trace."""
    if a.trace.host_sample is None:
        return IDLE_LABELS
    return {**IDLE_LABELS, "unattributed_idle_ns": THINNED_UNATTRIBUTED}


def summary(a: Analysis) -> Section:
    """Where the GPU time went. Shares are of the steady-state time (the windows minus their
    start-up idle), so a start-up of seconds does not hide the symptoms; start-up is shown
    apart, as a share of the whole window."""
    s = a.summary()
    window, startup = s["window_ns"], s["startup_idle_ns"]
    steady = window - startup
    cols = [Col("metric", text=True, wrap=True, min=20, identifies=True), Col("time"),
            Col("share of steady time", wrap=True)]  # fmt: skip

    def row(label: str, ns) -> list[str]:
        return [label, fmt_ns(ns), fmt_pct(ns / steady) if steady > 0 else "-"]

    what = "selected ranges' GPU windows" if a.selection.get("range") else "first to last GPU op"
    waves_rows = (
        [row("wave-quantization tail idle (inside busy)", s["tail_idle_ns"]),
         row("under-filled grid idle (inside busy)", s["underfill_idle_ns"])]
        if a.trace.gpus else
        [["wave-quantization tail idle (inside busy)", "not computed", "(no GPU facts)"],
         ["under-filled grid idle (inside busy)", "not computed", "(no GPU facts)"]]
    )  # fmt: skip
    rows = [
        [f"window ({what}, per device)", fmt_ns(window), ""],
        ["start-up idle (module load, compile, allocation; excluded)", fmt_ns(startup),
         f"({fmt_pct(startup / window) if window else '-'} of the window)"],
        row("steady-state time (window - start-up)", steady),
        row("GPU busy", s["gpu_busy_ns"]),
        row("GPU idle (steady)", s["idle_ns"] - startup),
        *[row(f"  {label}", s[col]) for col, label in idle_labels(a).items()
          if s[col] or col in ("launch_overhead_ns", "sync_idle_ns")],
        *waves_rows,
    ]  # fmt: skip
    if s["comm_ns"]:
        rows += [
            row("communication", s["comm_ns"]),
            row("  exposed (no compute alongside)", s["exposed_comm_ns"]),
            row("  waiting for other ranks", s["comm_wait_ns"]),
            ["  overlap ratio (overlap / communication)", "", fmt_pct(s["overlap_ratio"])],
        ]
    return Section("Where the GPU time went (device time, summed over devices)", cols, rows)


def quantization(a: Analysis, top: int) -> Section:
    """Kernels by quantization idle (tail + under-fill)."""
    k = a.kernel_table()
    floor = load_yaml("thresholds.yaml")["quantization_min_launch_ns"]
    short = k["median_ns"] < floor if len(k) else pd.Series(dtype=bool)
    note = (
        f"{int(short.sum())} kernel group(s) with launches under {fmt_ns(floor)} left out: their "
        "cost is launch overhead (see the launch gaps)"
        if short.any() else ""
    )  # fmt: skip
    k = k[~short] if len(k) else k
    cols = [Col("kernel", text=True, min=24, identifies=True),
            Col("dev", drop=6, identifies=True), Col("grid", drop=5, identifies=True),
            Col("block", drop=8, identifies=True), Col("launches", drop=7), Col("total", drop=1),
            Col("CTAs/SM (limit)", drop=9), Col("waves", drop=3), Col("idle share", drop=2),
            Col("quant. idle"), Col("kind", text=True, drop=4, min=10)]  # fmt: skip
    title = "Kernels by quantization idle (tail + under-fill)"
    if not a.trace.gpus:  # (every row would read "-": nothing was computed)
        return Section(title, cols, [], "not computed without GPU facts (--gpu NAME gives "
                       "them; `advisor gpus` lists the known GPUs)")  # fmt: skip
    rows = []
    k = k.head(top)
    no_grid = without_grid(k)
    for r, name, gridless in zip(k.itertuples(), kernel_names(k), no_grid, strict=True):
        kind = "underfill" if r.underfilled else "tail" if r.tail_fraction > 0 else "full waves"
        kind = "comm" if r.comm else "persistent" if r.persistent else kind
        # (without waves, e.g. no valid grid in the trace, no idle was computed: not 0)
        unknown = pd.isna(r.waves)
        if unknown:  # (the trace holds no valid grid or block for it, or its GPU no facts)
            kind = "no grid" if gridless else "no facts"
        rows.append([
            name, str(r.device), dims(r.grid_x, r.grid_y, r.grid_z),
            "-" if pd.isna(r.block_x) else str(r.block_threads),
            _count(r.launches), fmt_ns(r.total_ns),
            "-" if pd.isna(r.ctas_per_sm) else f"{int(r.ctas_per_sm)} ({r.limiter})",
            "-" if unknown else f"{r.waves:.3f}",
            # comm and persistent kernels do not quantize by grid: no idle share for them
            "-" if (r.comm or r.persistent or unknown) else fmt_pct(r.tail_fraction),
            "-" if unknown else fmt_ns(r.tail_idle_ns + r.underfill_idle_ns), kind,
        ])  # fmt: skip
    return Section(title, cols, rows, note)


def top_kernels(a: Analysis, top: int) -> Section:
    """Kernels by GPU time, with their share of the device's kernel time."""
    t = views.top_kernels(a)
    cols = [Col("kernel", text=True, min=24, identifies=True),
            Col("dev", drop=3, identifies=True), Col("launches", drop=4), Col("total"),
            Col("median", drop=2), Col("share", drop=1)]  # fmt: skip
    rows = [[r.name, str(r.device), _count(r.launches), fmt_ns(r.total_ns),
             fmt_ns(r.median_ns), fmt_pct(r.share)] for r in t.head(top).itertuples()]  # fmt: skip
    note = f"{len(t) - top} more kernel(s) in --format json" if len(t) > top else ""
    return Section("Top kernels by GPU time (share of the device's kernel time)", cols, rows,
                   note)  # fmt: skip


def copies(a: Analysis) -> Section:
    """Memory copies and sets per direction and host memory kind."""
    t = views.copies(a)
    cols = [Col("dev", drop=5, identifies=True), Col("kind", text=True, identifies=True),
            Col("host memory", text=True, identifies=True), Col("count", drop=3),
            Col("bytes", drop=2), Col("time"), Col("GB/s", drop=4)]  # fmt: skip
    rows = [[str(r.device), r.kind, r.host_memory, _count(r.count), _bytes(r.bytes),
             fmt_ns(r.total_ns), "-" if pd.isna(r.gb_per_s) else f"{r.gb_per_s:.2f}"]
            for r in t.itertuples()]  # fmt: skip
    return Section("Memory copies and sets by direction and host memory", cols, rows)


def sync_stalls(a: Analysis, origin: int) -> Section:
    """The blocking host calls behind synchronization gaps."""
    t = views.sync_stalls(a)
    cols = [Col("dev", drop=3, identifies=True),
            Col("blocking call", text=True, min=21, identifies=True), Col("gaps", drop=1),
            Col("total"), Col("median", drop=4), Col("max", drop=2),
            Col("worst at", drop=5)]  # fmt: skip
    rows = [[str(r.device), r.call, _count(r.gaps), fmt_ns(r.total_ns), fmt_ns(r.median_ns),
             fmt_ns(r.max_ns), f"+{fmt_ns(r.worst_at_ns - origin)}"]
            for r in t.itertuples()]  # fmt: skip
    return Section("Synchronization stalls by blocking call ('worst at': from the first "
                   "GPU op)", cols, rows)  # fmt: skip


def regions(a: Analysis, top: int) -> Section:
    """Top-level NVTX ranges, worst first."""
    cols = [Col("range", text=True, min=20, identifies=True),
            Col("dev", drop=7, identifies=True), Col("n", drop=8), Col("busy"), Col("idle"),
            Col("tail idle", drop=9), Col("under-fill", drop=10), Col("launch ovh.", drop=3),
            Col("sync", drop=4), Col("exposed comm", drop=5), Col("overlap", drop=6)]  # fmt: skip
    if not a.region_count():
        return Section("Top-level NVTX ranges on the GPU (worst first)", cols, [])
    g = a.region_totals().sort_values("recoverable_ns", ascending=False)
    rows = [[x.name, str(x.device), _count(x.instances), fmt_ns(x.gpu_busy_ns),
             fmt_ns(x.idle_ns), fmt_ns(x.tail_idle_ns), fmt_ns(x.underfill_idle_ns),
             fmt_ns(x.launch_overhead_ns), fmt_ns(x.sync_idle_ns), fmt_ns(x.exposed_comm_ns),
             fmt_pct(x.overlap_ratio)]
            for x in g.head(top).itertuples()]  # fmt: skip
    return Section("Top-level NVTX ranges on the GPU (worst first)", cols, rows)


def gaps(a: Analysis) -> Section:
    cols = [Col("dev", identifies=True), Col("cause", text=True, min=15, identifies=True),
            Col("gaps", drop=3), Col("total"), Col("median", drop=2),
            Col("max", drop=1)]  # fmt: skip
    rows = [[str(g.device), g.cause, _count(g.count), fmt_ns(g.total_ns), fmt_ns(g.median_ns),
             fmt_ns(g.max_ns)] for g in a.gaps.itertuples()]  # fmt: skip
    return Section("Device idle gaps by cause", cols, rows)


def streams(a: Analysis, top: int) -> Section:
    cols = [Col("dev", identifies=True), Col("stream", identifies=True), Col("ops", drop=1),
            Col("busy"), Col("stream gaps")]  # fmt: skip
    rows = [[str(r.device), str(r.stream), _count(r.ops), fmt_ns(r.busy_ns), fmt_ns(r.gap_ns)]
            for r in a.streams.head(top).itertuples()]  # fmt: skip
    return Section("Streams (busy time; own gaps)", cols, rows)


def comm(a: Analysis) -> Section:
    """Communication and compute per device."""
    cols = [Col("dev", identifies=True), Col("comm"), Col("compute", drop=3),
            Col("overlap", drop=4), Col("exposed"), Col("overlap ratio"),
            Col("waiting for ranks", drop=2), Col("same-stream comm", drop=1)]  # fmt: skip
    rows = [[str(r.device), fmt_ns(r.comm_ns), fmt_ns(r.compute_ns), fmt_ns(r.overlap_ns),
             fmt_ns(r.exposed_comm_ns), fmt_pct(r.overlap_ratio), fmt_ns(r.comm_wait_ns),
             fmt_ns(r.same_stream_comm_ns)] for r in a.devices.itertuples()]  # fmt: skip
    return Section("Communication and compute per device", cols, rows)


def pipeline(a: Analysis) -> Section:
    """Pipeline stages: per stage, the median step, its compute and its bubble (time without
    compute) against the schedule's ideal."""
    t = views.pipeline_stages(a)
    cols = [Col("stage", identifies=True), Col("dev", identifies=True), Col("step", drop=3),
            Col("compute", drop=4), Col("bubble"), Col("bubble share"), Col("ideal", drop=1),
            Col("m", drop=2)]  # fmt: skip
    rows = [[f"{r.stage} of {r.stages}", str(r.device), fmt_ns(r.step_ns), fmt_ns(r.compute_ns),
             fmt_ns(r.bubble_ns), fmt_pct(r.bubble_fraction), fmt_pct(r.ideal_fraction),
             str(r.microbatches)] for r in t.itertuples()]  # fmt: skip
    note = (f"medians over {int(t['steps'].max())} step(s); ideal: (p - 1) / (m + p - 1) for "
            "GPipe and 1F1B" if len(t) else "")  # fmt: skip
    return Section("Pipeline stages (bubble: time per step without compute)", cols, rows, note)


def ranks(rows: list[dict]) -> Section:
    """The traces of a job analysed as one: which devices each became."""
    cols = [Col("rank", identifies=True), Col("trace", text=True, min=20, identifies=True),
            Col("devices", text=True), Col("trace dev", text=True, drop=1)]  # fmt: skip
    out = [["-" if r["rank"] is None else str(r["rank"]), r["path"],
            ", ".join(map(str, r["devices"])) if r["devices"] else "error",
            ", ".join(map(str, r["trace_devices"]))] for r in rows]  # fmt: skip
    return Section("Ranks (one trace each, analysed as one job)", cols, out)
