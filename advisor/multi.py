"""Several traces of one job (one per rank) analysed as one: each trace is read (in worker
processes), the traces are merged into one Trace whose devices are the ranks' devices, and
that Trace is analysed like a single multi-device export. So per-rank files and one export
holding the same processes give the same cross-rank waits, skew, stragglers and findings,
and every option (--range, --device, --emit, --shape, --gemm, --rules) works the same.

Device ids are kept when they are distinct across the traces (ranks profiled on their own
GPUs) and renumbered in rank order when they collide (every rank's GPU is its device 0);
process and thread ids are made distinct likewise. Timestamps of different traces are
compared directly: right for ranks of one node (one clock), approximate across nodes.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from advisor.analysis import Analysis
from advisor.errors import AdvisorInputError
from advisor.options import AnalysisOptions
from advisor.rules.finding import Finding
from advisor.trace.model import Trace

PID_SPAN = 1 << 22  # Linux pids are below 2^22: a rank's pids are shifted by rank * PID_SPAN
TID_SHIFT = 52  # thread ids (nsys global tids < 2^48) are shifted by rank << TID_SHIFT


@dataclass
class RankLoad:
    """One trace as read: its Trace, or the one-line error that replaced it."""

    path: str
    trace: Trace | None = None
    error: str | None = None
    devices: dict[int, int] = field(default_factory=dict)  # its device id -> merged id


def load_one(path: str, gpu, cores: int | None = None) -> RankLoad:
    """Read one trace with ``cores`` for its reader (bad input becomes the load's
    ``error``)."""
    from advisor.trace.load import load_trace

    try:
        return RankLoad(path=path, trace=load_trace(path, gpu=gpu, cores=cores))
    except AdvisorInputError as exc:
        return RankLoad(path=path, error=str(exc))
    except Exception as exc:  # a bug on one trace must not lose the other ranks
        return RankLoad(path=path, error=f"{path}: internal error: {type(exc).__name__}: {exc}")


def load_ranks(
    paths: list[str],
    options: AnalysisOptions,
    on_done: Callable[[RankLoad], None] | None = None,
) -> list[RankLoad]:
    """Read every path, in ``options.jobs`` worker processes (default: one per core);
    results in the order of ``paths``; ``on_done`` is called as each trace is read."""
    jobs = max(1, min(options.jobs or os.cpu_count() or 1, len(paths)))
    notify = on_done or (lambda _: None)
    if jobs == 1:
        loads = []
        for p in paths:
            loads.append(load_one(p, options.gpu_override))
            notify(loads[-1])
        return loads
    cores = max(1, (os.cpu_count() or 1) // jobs)  # per worker for its reads
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        futures = [pool.submit(load_one, p, options.gpu_override, cores) for p in paths]
        for future in as_completed(futures):
            notify(future.result())
        return [f.result() for f in futures]


def merge_traces(loads: list[RankLoad]) -> Trace:
    """One Trace of every successfully read rank (sets each load's ``devices`` map)."""
    ok = [x for x in loads if x.trace is not None]
    if not ok:
        raise AdvisorInputError(None, "no trace could be read")
    ids = [d for x in ok for d in x.trace.devices]
    renumber = len(ids) != len(set(ids))
    pids = [set(x.trace.kernels["pid"].dropna().astype(int)) for x in ok]
    shift_ids = sum(len(p) for p in pids) != len(set().union(*pids))
    first = ok[0].trace
    parts: dict[str, list[pd.DataFrame]] = {
        t: [] for t in ("kernels", "api", "memcpy", "memset", "graphs", "sync", "nvtx")
    }
    merged = Trace(
        path=", ".join(x.path for x in ok), format=first.format,
        producer_version=first.producer_version, kernels=first.kernels.iloc[:0],
    )  # fmt: skip
    next_id = 0
    for rank, x in enumerate(ok):
        t = x.trace
        if renumber:
            x.devices = {d: next_id + i for i, d in enumerate(t.devices)}
            next_id += len(t.devices)
        else:
            x.devices = {d: d for d in t.devices}
        for name in parts:
            table = getattr(t, name)
            if table.empty:
                continue
            table = table.copy()
            if "device" in table:
                table["device"] = table["device"].map(x.devices).fillna(table["device"])
            if shift_ids and "pid" in table:
                table["pid"] = table["pid"] + rank * PID_SPAN
            if shift_ids and "tid" in table:
                table["tid"] = table["tid"] + (np.int64(rank) << TID_SHIFT)
            parts[name].append(table)
        for d, spec in t.gpus.items():
            if d in x.devices:
                merged.gpus[x.devices[d]] = spec
        merged.warnings += [f"rank {rank} ({x.path}): {w}" for w in t.warnings]
        merged.sources += t.sources
    for name, tables in parts.items():
        if tables:
            setattr(merged, name, pd.concat(tables, ignore_index=True))
    return merged


def rank_rows(loads: list[RankLoad]) -> list[dict]:
    """One row per trace: rank, path, error, its devices (merged ids) and what they were."""
    rows = []
    rank = 0
    for x in loads:
        row = {"rank": None, "path": x.path, "error": x.error, "devices": [], "trace_devices": []}
        if x.trace is not None:
            row.update(rank=rank, devices=sorted(x.devices.values()),
                       trace_devices=sorted(x.devices))  # fmt: skip
            rank += 1
        rows.append(row)
    return rows


class NoTraceRead(AdvisorInputError):
    """None of the traces could be read: ``errors`` holds one line per trace."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__(None, "no trace could be read")
        self.errors = errors


@dataclass
class RanksResult:
    """Several traces analysed as one job: the analysis, its findings (each with the
    ``rank`` of its device), one row per trace (rank_rows) and the unreadable traces'
    one-line errors."""

    analysis: Analysis
    findings: list[Finding]
    ranks: list[dict]
    errors: list[str]


def analyze_ranks(
    paths: list[str],
    options: AnalysisOptions,
    rules=None,
    on_read: Callable[[RankLoad], None] | None = None,
    step: Callable[[str | None], None] | None = None,
    memory_advice: Callable[[int], None] | None = None,
) -> RanksResult:
    """Read every trace (``on_read`` after each), merge the readable ones into one Trace and
    analyse it with ``options`` (``step``: pipeline progress). NoTraceRead when none could
    be read; the errors of the others are in the result, the rest is analysed.
    ``memory_advice``: pipeline.MemoryAdvice."""
    from advisor import pipeline

    loads = load_ranks(paths, options, on_done=on_read)
    errors = [x.error for x in loads if x.error]
    if len(errors) == len(loads):
        raise NoTraceRead(errors)
    trace = merge_traces(loads)
    analysis, findings = pipeline.run_trace(trace, options, rules, step, memory_advice)
    rows = rank_rows(loads)
    rank_of = {d: r["rank"] for r in rows for d in r["devices"]}
    findings = [f.with_rank(rank_of.get(f.device)) for f in findings]
    return RanksResult(analysis, findings, rows, errors)
