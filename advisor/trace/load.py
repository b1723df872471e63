"""Open any supported trace file: validate the path, pick the reader, settle GPU facts."""

from __future__ import annotations

import os
from pathlib import Path

from advisor.errors import AdvisorInputError
from advisor.trace.amd_counters import looks_like_amd_counters, read_amd_counters
from advisor.trace.counters import counter_shares
from advisor.trace.gpus import gpu_from_option, match_gpu
from advisor.trace.kineto import looks_like_kineto, read_head, read_kineto
from advisor.trace.model import GpuSpec, Trace
from advisor.trace.ncu import is_ncu_report, looks_like_ncu_csv, read_ncu, read_ncu_report
from advisor.trace.nsys import SQLITE_ERRORS, expected_kernels, looks_like_sqlite, read_nsys
from advisor.trace.nsys_rep import export_report, is_report
from advisor.trace.quality import drop_impossible_rows, slow_host_ops
from advisor.trace.rocpd import is_rocpd, read_rocpd
from advisor.trace.rocprof import read_rocprof, read_rocprof_json

NO_GPU = "none"  # --gpu none: analyze without occupancy/wave metrics


def check_readable_file(path: Path) -> None:
    """Raise AdvisorInputError unless ``path`` is an existing, non-empty, readable file."""
    if not path.exists():
        raise AdvisorInputError(str(path), "no such file")
    if path.is_dir():
        raise AdvisorInputError(str(path), "is a directory, expected a trace file")
    if not path.is_file():
        raise AdvisorInputError(str(path), "not a regular file")
    if not os.access(path, os.R_OK):
        raise AdvisorInputError(str(path), "permission denied")
    if path.stat().st_size == 0:
        raise AdvisorInputError(str(path), "empty file (0 bytes)")


def expected_rows(path: str | Path) -> int:
    """About how many GPU ops ``path`` holds where its format says so without reading them
    (an Nsight export's kernel table; a rocpd database has none); 0 otherwise, and for
    anything load_trace would refuse (it says why)."""
    p = Path(path)
    try:
        if p.is_file() and looks_like_sqlite(p):
            return expected_kernels(p)
    except (OSError, *SQLITE_ERRORS):
        return 0
    return 0


def load_trace(
    path: str | Path, gpu: str | GpuSpec | None = None, cores: int | None = None,
    lean: bool = False,
) -> Trace:  # fmt: skip
    """Read ``path`` into a Trace and attach a GpuSpec to every active device.

    GPU facts come from the trace; ``gpu`` (a --gpu name, or a GpuSpec from --gpu-spec)
    overrides them, with a warning where it contradicts the trace's own facts; ``gpu='none'``
    drops them (wave metrics are then left empty and a warning says so). ``cores``: how many
    threads or processes the reader may use (default: the reader's own). ``lean``: read for
    an analysis: a reader may leave out the kernel columns no metric reads (the cluster
    dims: trace.model, KERNEL_UNREAD_BY_ANALYSIS), which an analysis would drop unread.
    """
    p = Path(path)
    if p.is_dir():
        trace = read_rocprof(p)
    else:
        check_readable_file(p)
        trace = _read_file(p, cores, lean)
    drop_impossible_rows(trace)
    trace.warnings.extend(slow_host_ops(trace))
    if trace.kernels.empty and trace.graphs.empty:
        raise AdvisorInputError(str(p), "no kernel with valid timestamps: no GPU work to analyze")
    _settle_gpus(trace, gpu)
    trace.warnings.extend(counter_shares(trace))  # (counters given as bytes, cycles: AMD's)
    if trace.epoch_offset_ns is None and _first_ns(trace) >= EPOCH_CLOCK_NS:
        trace.epoch_offset_ns = 0  # (timestamps that are UTC ns since the epoch already)
    return trace


# timestamps at or above this are taken as counted from the epoch (1973-03-03): a clock
# that counts from boot or from the session start does not reach it
EPOCH_CLOCK_NS = 10**17


def _first_ns(trace: Trace) -> float:
    """The first GPU op's start (trace ns; 0 when there is none)."""
    starts = [t["start"].min() for t in (trace.kernels, trace.graphs) if len(t)]
    return float(min(starts)) if starts else 0.0


def _read_file(p: Path, cores: int | None, lean: bool) -> Trace:
    """Pick the reader from the file's content (SQLite header, JSON, CSV text)."""
    if is_report(p):  # an .nsys-rep: exported with nsys into the cache, then read
        export = export_report(p)
        trace = read_nsys(export, cores, lean)
        trace.path = str(p)
        trace.sources.append(f"{export} (nsys export)")
        return trace
    if is_ncu_report(p):  # an .ncu-rep: its raw and details pages exported with ncu
        return read_ncu_report(p)
    try:
        if looks_like_sqlite(p):
            return read_rocpd(p) if is_rocpd(p) else read_nsys(p, cores, lean)
        name = p.name.lower()
        if name.endswith((".json", ".json.gz")) or name.endswith(".json.gz"):
            if looks_like_kineto(read_head(p)):
                return read_kineto(p, cores)
            return read_rocprof_json(p)
        with open(p, "rb") as fh:
            head = fh.read(4096)
    except OSError as exc:
        raise AdvisorInputError(str(p), f"cannot read: {exc.strerror}") from exc
    if name.endswith(".gz") or (b"," in head and b"\0" not in head):
        return read_ncu(p) if looks_like_ncu_csv(p) else read_rocprof(p)
    raise AdvisorInputError(
        str(p),
        "not a supported trace: expected an Nsight Systems SQLite export or .nsys-rep, a PyTorch "
        "profiler (Kineto) JSON, a rocprofv3 rocpd database or rocprof CSV/JSON, or an Nsight "
        "Compute report (.ncu-rep or its raw page CSV)",
    )


COUNTER_FILES = (
    "an Nsight Compute report (.ncu-rep) or its raw page (ncu --import R.ncu-rep --csv --page "
    "raw > R.ncu.raw.csv), a rocprofv3 counter_collection.csv or rocpd database with counters "
    "(rocprofv3 --pmc ...), or a rocprof-compute pmc_perf.csv"
)


def load_counters(path: str | Path) -> Trace:
    """The hardware counters of ``--counters PATH``, read as a Trace whose ``counters`` name
    their launches: an Nsight Compute report (``.ncu-rep``) or its raw page (``.csv``,
    ``.csv.gz``); AMD's rocprofv3 counter_collection.csv, rocpd database with PMC events, or
    rocprof-compute pmc_perf.csv (amd_counters.py)."""
    p = Path(path)
    check_readable_file(p)
    if is_ncu_report(p):
        return read_ncu_report(p)
    if looks_like_ncu_csv(p):
        return read_ncu(p)
    if looks_like_amd_counters(p):
        return read_amd_counters(p, alone=False)
    if looks_like_sqlite(p) and is_rocpd(p):
        trace = read_rocpd(p)
        if trace.counters.empty:
            raise AdvisorInputError(str(p), "--counters: a rocpd database without hardware "
                                    "counters (no PMC events: profile with rocprofv3 --pmc "
                                    "COUNTER ...)")  # fmt: skip
        return trace
    raise AdvisorInputError(
        str(p),
        f"--counters: not an Nsight Compute report or AMD counters file: expected {COUNTER_FILES}",
    )


def _settle_gpus(trace: Trace, gpu: str | GpuSpec | None) -> None:
    devices = trace.devices
    if isinstance(gpu, str) and gpu.lower() == NO_GPU:
        trace.gpus = {}
        trace.warnings.append(
            "no GPU facts used (--gpu none): occupancy, waves and tails are not computed"
        )
        return
    if gpu:
        spec = gpu if isinstance(gpu, GpuSpec) else gpu_from_option(gpu)
        trace.warnings.extend(_contradictions(trace, spec))
        trace.gpus = {d: spec for d in devices}
        return
    missing = [d for d in devices if d not in trace.gpus]
    if not missing:
        return
    # No device facts in the trace: a name elsewhere would do, but the export has none.
    guess: GpuSpec | None = None
    names = {s.name for s in trace.gpus.values()}
    if len(names) == 1:
        guess = match_gpu(next(iter(names)))
    if guess is None:
        trace.warnings.append(missing_facts_warning(trace, missing))
        return
    for d in missing:
        trace.gpus[d] = GpuSpec(**{**guess.to_dict(), "source": f"built-in table ({guess.name})"})


def missing_facts_warning(trace: Trace, devices: list[int]) -> str:
    """What a trace without GPU facts limits, and how to supply them, in the vendor's terms
    (the analysis goes on: gaps, sync, comm and ranges need no occupancy)."""
    ids = ", ".join(map(str, devices))
    limited = (
        "occupancy, waves, tails and the GEMM findings that need them (split-K, Stream-K) are "
        "not computed; gaps, synchronization, communication and ranges are"
    )
    if trace.format.startswith(("rocprof", "rocpd")):
        where = {"rocpd": "the database's agent rows have no properties",
                 "rocprof-counters": "no agent_info.csv (rocprofv3) or sysinfo.csv "
                 "(rocprof-compute) beside the counters file"}.get(
            trace.format, "no agent_info.csv beside the kernel trace")  # fmt: skip
        return (
            f"no GPU facts for agent(s) {ids} ({where}): "
            f"{limited}; pass --gpu NAME (e.g. --gpu MI300X; `advisor gpus` lists them)"
        )
    amd = len(trace.api) > 0 and trace.api["name"].astype(str).str.startswith("hip").any()
    example = "MI300X" if amd else "H100-SXM"
    if trace.format.startswith("kineto"):
        where = "the trace's deviceProperties do not describe it"
    else:
        where = "the export has no TARGET_INFO_GPU"
    return (
        f"no GPU facts for device(s) {ids} ({where}): {limited}; "
        f"pass --gpu NAME (e.g. --gpu {example}; `advisor gpus` lists them)"
    )


def _contradictions(trace: Trace, spec: GpuSpec) -> list[str]:
    """Warnings where the trace's own facts disagree with the GPU the user gave."""
    out = []
    for device, own in sorted(trace.gpus.items()):
        if own.source.startswith("built-in") or own.source.startswith("--gpu"):
            continue
        matched = match_gpu(own.name)
        same_name = matched is not None and matched.name == spec.name
        if own.sm_count != spec.sm_count or not (same_name or own.name == spec.name):
            out.append(
                f"{spec.source} ({spec.name}, {spec.sm_count} SMs/CUs) overrides what the trace "
                f"reports for device {device} ({own.name}, {own.sm_count} SMs/CUs): occupancy, "
                "waves and tails follow the option"
            )
    return out
