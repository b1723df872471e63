"""Several traces of one job (one per rank) analysed as one: each trace is read and analysed
on its own and reduced to a RankPart (parts.py: in worker processes here, or on a Dask
cluster: cluster.py), the parts are merged into one Analysis (the cross-rank waits, skew,
stragglers and pipeline stages computed over all of them) and the rules run on that. So
per-rank files and one export holding the same processes give the same analysis, and every
option (--range, --device, --emit, --shape, --gemm, --rules) works the same.

Device ids are kept when they are distinct across the traces (ranks profiled on their own
GPUs) and renumbered in rank order when they collide (every rank's GPU is its device 0).
Timestamps of different traces are compared directly: right for ranks of one node (one
clock), approximate across nodes.

``merge_traces`` merges whole Traces into one instead (process and thread ids made
distinct too): the reference the per-rank path is tested against, and a library entry for
whoever wants one Trace of a job.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from advisor.analysis import MergedAnalysis
from advisor.cluster import Runner
from advisor.cluster import runner as runner_for
from advisor.commstore import CommStore
from advisor.errors import AdvisorInputError, NoTraceRead, error_line
from advisor.options import AnalysisOptions
from advisor.parts import RankPart, device_maps, hold_tables, merged_job, rank_rows, selected
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


def load_one(path: str, gpu) -> RankLoad:
    """Read one trace (bad input, or a bug, becomes the load's ``error`` line)."""
    from advisor.trace.load import load_trace

    try:
        return RankLoad(path=path, trace=load_trace(path, gpu=gpu, lean=True))
    except Exception as exc:  # (one trace must not lose the others)
        return RankLoad(path=path, error=error_line(path, exc))


def merge_traces(loads: list[RankLoad]) -> Trace:
    """One Trace of every successfully read rank (sets each load's ``devices`` map). A rank
    with thinned host events (Trace.host_sample) makes the whole host side thinned: no gap of
    the merged trace is attributed (the parts path leaves only that rank's unattributed)."""
    ok = [(x, x.trace) for x in loads if x.trace is not None]
    if not ok:
        raise AdvisorInputError(None, "no trace could be read")
    maps = device_maps([t.devices for _, t in ok])
    pids = [set(t.kernels["pid"].dropna().astype(int)) for _, t in ok]
    shift_ids = sum(len(p) for p in pids) != len(set().union(*pids))
    first = ok[0][1]
    parts: dict[str, list[pd.DataFrame]] = {
        t: [] for t in ("kernels", "api", "memcpy", "memset", "graphs", "sync", "nvtx", "cpu_ops")
    }
    merged = Trace(
        path=", ".join(x.path for x, _ in ok), paths=[x.path for x, _ in ok],
        format=first.format, producer_version=first.producer_version,
        kernels=first.kernels.iloc[:0],
    )  # fmt: skip
    for rank, ((x, t), device_map) in enumerate(zip(ok, maps, strict=True)):
        x.devices = device_map
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
        prefix = f"rank {rank} ({x.path}): " if len(ok) > 1 else ""
        merged.warnings += [prefix + w for w in t.warnings]
        merged.sources += t.sources
    for name, tables in parts.items():
        if tables:
            setattr(merged, name, pd.concat(tables, ignore_index=True))
    # a rank whose host events were thinned leaves the merged host side thinned too (as its
    # part does for its own gaps): their counts added, the largest share of holes
    thinned = [t.host_sample for _, t in ok if t.host_sample is not None]
    if thinned:
        merged.host_sample = (sum(x[0] for x in thinned), sum(x[1] for x in thinned),
                              max(x[2] for x in thinned))  # fmt: skip
    return merged


@dataclass
class RanksResult:
    """Several traces analysed as one job: the analysis, its findings (each with the
    ``rank`` of its device), one row per trace (rank_rows) and the unreadable traces'
    one-line errors."""

    analysis: MergedAnalysis
    findings: list[Finding]
    ranks: list[dict]
    errors: list[str]


def analyze_ranks(
    paths: list[str],
    options: AnalysisOptions,
    rules=None,
    on_read: Callable[[RankPart], None] | None = None,
    runner: Runner | None = None,
) -> RanksResult:
    """Analyse every trace into its part on ``runner`` (default: cluster.runner of the
    options: local worker processes, or Dask; ``on_read`` after each), merge the readable
    parts with the options' selection and apply ``rules`` (default: the options').
    NoTraceRead when none could be read; the errors of the others are in the result, the
    rest is analysed."""
    store = CommStore()  # (each part's comm ops and range instances held on disk as it arrives)

    def arrived(part: RankPart) -> None:
        if on_read is not None:  # (the part as it was sent)
            on_read(part)
        hold_tables(part, store)

    with runner or runner_for(options) as run:
        parts = run.map(paths, options, on_done=arrived)
    errors = [p.error for p in parts if p.error]
    if len(errors) == len(parts):
        raise NoTraceRead(errors)
    check_one_job(parts)
    analysis, findings = merge_and_find(parts, options, rules, store)
    rows = rank_rows(parts)
    if len(parts) > 1:  # (one trace, on Dask: as analysed here, no ranks)
        rank_of = {d: r["rank"] for r in rows for d in r["devices"]}
        findings = [f.with_rank(rank_of.get(f.device)) for f in findings]
    return RanksResult(analysis, findings, rows, errors)


def merge_and_find(
    parts: list[RankPart], options: AnalysisOptions, rules=None, store: CommStore | None = None
) -> tuple[MergedAnalysis, list[Finding]]:
    """The readable parts merged with the options' selection, and its findings: found on
    every device of the job, then those of the selected device (findings.find_on_device),
    so a device's findings are the ones the whole job gives it. The parts' tables are
    emptied as they are merged (merged_job's ``release``; ``store``: where their comm ops
    were held as they arrived)."""
    from advisor.findings import find_on_device

    job = merged_job(parts, release=True, store=store)
    whole = selected(job, options.range_text, None)
    found = find_on_device(whole, options.device, options.rules() if rules is None else rules)
    if options.device is None:
        return whole, found
    return selected(job, options.range_text, options.device), found


def check_one_job(parts: list[RankPart]) -> None:
    """AdvisorInputError (one line naming two of the traces and why) when the readable parts
    cannot be the ranks of one job, from what the traces record: different profilers (their
    clocks and tables differ), two that say they are the same rank, different world sizes,
    or GPU work further apart on the UTC clock than thresholds.yaml ``one_job`` allows."""
    from advisor.data import load_yaml

    ok = [p for p in parts if p.error is None]
    hint = "; analyse them one by one with --separate"

    def refuse(a: RankPart, b: RankPart, why: str) -> None:
        raise AdvisorInputError(None, f"{a.path} and {b.path} cannot be ranks of one job: "
                                      f"{why}{hint}")  # fmt: skip

    for b in ok[1:]:
        if b.format != ok[0].format:
            refuse(ok[0], b, f"one was recorded by {ok[0].producer_version}, the other by "
                             f"{b.producer_version}")  # fmt: skip
    said = [p for p in ok if p.rank is not None]
    for i, a in enumerate(said):
        for b in said[i + 1 :]:
            if a.rank == b.rank:
                refuse(a, b, f"both say they are rank {a.rank}")
            sizes = (a.world_size, b.world_size)
            if None not in sizes and sizes[0] != sizes[1]:
                refuse(a, b, f"their world sizes differ ({sizes[0]} and {sizes[1]})")
    timed = [(p, p.utc_window) for p in ok if p.utc_window is not None]
    if len(timed) > 1:
        first_end, (_, ended) = min(timed, key=lambda pw: pw[1][1])
        last_start, (began, _) = max(timed, key=lambda pw: pw[1][0])
        apart_ns = began - ended
        limit_s = float(load_yaml("thresholds.yaml")["one_job"]["max_apart_s"])
        if apart_ns > limit_s * 1e9:
            refuse(first_end, last_start,
                   f"their GPU work ran {_duration(apart_ns)} apart (the first ended "
                   f"{_utc(ended)}, the other began {_utc(began)}; ranks of one job run "
                   "together)")  # fmt: skip


def _utc(ns: int) -> str:
    """UTC ns since the epoch as ``2026-12-01 11:22:57 UTC``."""
    from datetime import datetime, timezone  # (datetime.UTC: Python 3.11 on)

    return datetime.fromtimestamp(ns / 1e9, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _duration(ns: int) -> str:
    """A long time span in words: ``61.2 days``, ``12.3 hours``, ``6.0 minutes``."""
    s = ns / 1e9
    for unit, size in (("days", 86400), ("hours", 3600), ("minutes", 60)):
        if s >= size:
            return f"{s / size:.1f} {unit}"
    return f"{s:.1f} s"
