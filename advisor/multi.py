"""Many traces at once (one per rank): each analysed in its own worker process, results
merged into per-rank rows, stragglers per NVTX range, cross-rank collective skew and one
combined findings list.

Workers return only small tables, so memory stays bounded by the largest trace times the
number of workers. The per-trace step (``analyze_one``) is a plain function of a path: on a
cluster it maps onto one task per file (a Dask ``client.map`` or a Ray remote function)
with ``merge`` unchanged. Timestamps of different traces are compared directly: right for
ranks of one node (one clock), approximate across nodes.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field

import pandas as pd

from advisor.errors import AdvisorInputError
from advisor.metrics.comm import collective_skew
from advisor.options import AnalysisOptions

REGION_COLS = ["name", "device", "start_ns", "end_ns", "gpu_busy_ns", "idle_ns", "compute_ns",
               "exposed_comm_ns", "comm_wait_ns"]  # fmt: skip


@dataclass
class RankResult:
    """What one worker sends back for one trace."""

    path: str
    error: str | None = None
    summary: dict = field(default_factory=dict)
    gpus: list[str] = field(default_factory=list)
    devices: list[int] = field(default_factory=list)
    regions: pd.DataFrame | None = None
    comm: pd.DataFrame | None = None  # comm kernels: name, start, end
    findings: list[dict] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # data-quality notes of the trace


def analyze_one(path: str, options: AnalysisOptions) -> RankResult:
    """Analyse one trace into a RankResult (bad input becomes its ``error``)."""
    from advisor.pipeline import run

    try:
        a, findings = run(path, options)
    except AdvisorInputError as exc:
        return RankResult(path=path, error=str(exc))
    except Exception as exc:  # a bug on one trace must not lose the other ranks
        return RankResult(path=path, error=f"{path}: internal error: {type(exc).__name__}: {exc}")
    ops = a.ops
    comm = ops.loc[ops["op_class"].eq("comm") & ops["kind"].eq("kernel"), ["name", "start", "end"]]
    return RankResult(
        path=path,
        summary=a.summary(),
        gpus=sorted({s.name for d, s in a.trace.gpus.items() if d in a.trace.devices}),
        devices=a.trace.devices,
        regions=a.regions[REGION_COLS].copy() if not a.regions.empty else None,
        comm=comm.reset_index(drop=True),
        findings=[{k: v for k, v in f.items() if not k.startswith("_")} for f in findings],
        warnings=a.warnings,
    )


def analyze_many(
    paths: list[str],
    options: AnalysisOptions | None = None,
    on_done: Callable[[RankResult], None] | None = None,
) -> list[RankResult]:
    """Analyse every path, in ``options.jobs`` worker processes (default: one per core);
    results in the order of ``paths``; ``on_done`` is called as each trace finishes."""
    options = options or AnalysisOptions()
    jobs = max(1, min(options.jobs or os.cpu_count() or 1, len(paths)))
    notify = on_done or (lambda _: None)
    if jobs == 1:
        results = []
        for p in paths:
            results.append(analyze_one(p, options))
            notify(results[-1])
        return results
    threads = max(1, (os.cpu_count() or 1) // jobs)  # cores per worker for its reads
    with ProcessPoolExecutor(max_workers=jobs, initializer=_set_read_threads,
                             initargs=(threads,)) as pool:  # fmt: skip
        futures = [pool.submit(analyze_one, p, options) for p in paths]
        for future in as_completed(futures):
            notify(future.result())
        return [f.result() for f in futures]


def _set_read_threads(threads: int) -> None:
    """Worker start-up: share the cores among the workers' concurrent trace reads."""
    from advisor.trace import nsys

    nsys.READ_THREADS = threads


def stragglers(results: list[RankResult]) -> pd.DataFrame:
    """Per NVTX range name present on several ranks: each rank's compute time in it (GPU
    time outside collectives: a rank that computes longer makes the others wait in the
    next collective), the slowest rank and the spread (slowest - fastest, ns)."""
    parts = []
    for rank, r in enumerate(results):
        if r.regions is not None:
            parts.append(r.regions.groupby("name")["compute_ns"].sum().rename(rank))
    if len(parts) < 2:
        return pd.DataFrame(columns=["name", "ranks", "slowest_rank", "spread_ns", "ratio"])
    table = pd.concat(parts, axis=1)
    table = table[table.notna().sum(axis=1) >= 2]
    out = pd.DataFrame({
        "name": table.index,
        "ranks": table.notna().sum(axis=1).to_numpy(),
        "slowest_rank": table.idxmax(axis=1).to_numpy(),
        "spread_ns": (table.max(axis=1) - table.min(axis=1)).to_numpy(),
        "ratio": (table.max(axis=1) / table.min(axis=1)).to_numpy(),
    })  # fmt: skip
    return out.sort_values("spread_ns", ascending=False, ignore_index=True)


def rank_skew(results: list[RankResult]) -> pd.DataFrame:
    """The n-th launch of each comm kernel matched across ranks: skew and waits per
    instance (``collective_skew`` with ranks in place of devices)."""
    frames = [r.comm.assign(device=rank, kind="kernel") for rank, r in enumerate(results)
              if r.comm is not None and len(r.comm)]  # fmt: skip
    if len(frames) < 2:
        return pd.DataFrame(columns=["device", "start", "name", "instance", "skew_ns",
                                     "wait_ns", "last_device"])  # fmt: skip
    ops = pd.concat(frames, ignore_index=True)
    return collective_skew(ops, pd.Series("comm", index=ops.index))


def merge(results: list[RankResult]) -> dict:
    """Per-rank rows, stragglers, collective skew (per name) and the combined findings."""
    ok = [r for r in results if r.error is None]
    gpus = {g for r in ok for g in r.gpus}
    ranks = [{"rank": i, "path": r.path, "error": r.error, "devices": r.devices,
              "warnings": r.warnings,
              **{k: r.summary.get(k) for k in ("span_ns", "gpu_busy_ns", "idle_ns",
                                                "launch_overhead_ns", "exposed_comm_ns",
                                                "comm_wait_ns")}}
             for i, r in enumerate(results)]  # fmt: skip
    skew = rank_skew([r if r.error is None else RankResult(r.path) for r in results])
    per_name = []
    if len(skew):
        inst = skew.groupby("instance").agg(name=("name", "first"), skew=("skew_ns", "first"),
                                            last=("last_device", "first"))  # fmt: skip
        for name, g in inst.groupby("name"):
            per_name.append({"name": name, "instances": len(g),
                             "median_skew_ns": int(g["skew"].median()),
                             "max_skew_ns": int(g["skew"].max()),
                             "most_often_last_rank": int(g["last"].mode().iloc[0])})  # fmt: skip
    findings = [{**f, "trace": r.path, "rank": rank} for rank, r in enumerate(results)
                if r.error is None for f in r.findings]  # fmt: skip
    findings.sort(key=lambda f: -f["est_savings_ns"])
    return {
        "gpus": sorted(gpus),
        "ranks": ranks,
        "stragglers": stragglers(
            [r if r.error is None else RankResult(r.path) for r in results]
        ).to_dict("records"),  # fmt: skip
        "collective_skew": sorted(per_name, key=lambda x: -x["max_skew_ns"]),
        "findings": findings,
        "errors": [{"path": r.path, "error": r.error} for r in results if r.error],
    }
