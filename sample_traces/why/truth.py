"""The truth about the why_idle captures, worked out without advisor (plain json / sqlite3).

    python3 sample_traces/why/truth.py [TRACE...]   (default: every why_*.pt.trace.json.gz
                                                     and why_*.sqlite beside this file)

For each trace, on its device with the most GPU ops: the idle gaps (an op's start minus the
latest end of every earlier op, when positive; g0 = where the gap began, g1 = the op's
start), each op's launch call (same correlation id), and, for the part [g0, min(call end,
g1)) in which the host was late, how long the launching thread (same process and thread)
spent inside:
  - a DataLoader range (a record_function / NVTX range whose name holds "DataLoader"),
  - a copy call (cudaMemcpy*, cudaMemset*) that blocked: a synchronous one, or an async one
    whose copy involves pageable memory;
  - each range the workloads plant around host work (HOST_RANGES: "load_checkpoint",
    "log_metrics", "prepare_batch"), by name ("late_in");
and, when the trace holds a planted start-up ("load_checkpoint"), the same window, idle
and host-late totals from the first op after it ("after_startup");
the gaps whose op had been enqueued (its launch call ended) more than 100 us before it
started, with the time from that later of (call end, g0) to g1 ("queued"), and how many of
them follow an event-wait call (cudaStreamWaitEvent / hipStreamWaitEvent) made by the
launching thread in the 1 ms before the launch; and the launch chains between blocking
reads (cudaStreamSynchronize / cudaDeviceSynchronize calls on the launching thread):
launches per chain; and, where the workload marks its steps (ranges named step_N or
train_step_N), the same DataLoader / copy / planted-range times of the gap that ends at the
first step's first op ("first_step_lead": that gap began in the warm-up before the profiled
steps, and Nsight Systems, which records the whole process, has it) and those times summed
over the gaps after that one ("after_first_step"). Printed as JSON; the tests in
tests/test_why_idle.py compare advisor's answers with these numbers.
"""

from __future__ import annotations

import gzip
import json
import re
import sqlite3
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
HOST_RANGES = ("load_checkpoint", "log_metrics", "prepare_batch")


def kineto_events(path: Path):
    """(gpu ops, runtime calls by correlation, per-thread ranges and calls) of a Kineto trace."""
    with gzip.open(path, "rt") as fh:
        ev = json.load(fh)["traceEvents"]
    ns = lambda e: (round(e["ts"] * 1000), round(e["ts"] * 1000) + round(e.get("dur", 0) * 1000))  # noqa: E731
    ops, calls, ranges, pageable = [], {}, {}, set()
    for e in ev:
        if e.get("ph") != "X":
            continue
        cat, args = e.get("cat"), e.get("args", {})
        if cat in ("kernel", "gpu_memcpy", "gpu_memset"):
            s, t = ns(e)
            ops.append((s, t, args.get("device"), args.get("correlation"), e["name"]))
            if cat == "gpu_memcpy" and "Pageable" in e["name"]:
                pageable.add(args.get("correlation"))
        elif cat in ("cuda_runtime", "cuda_driver"):
            s, t = ns(e)
            calls[args.get("correlation")] = (s, t, e["pid"], e["tid"], e["name"])
            row = (s, t, "api:" + e["name"], args.get("correlation"))
            ranges.setdefault((e["pid"], e["tid"]), []).append(row)
        elif cat in ("user_annotation", "cpu_op"):
            s, t = ns(e)
            ranges.setdefault((e["pid"], e["tid"]), []).append((s, t, e["name"], None))
    return ops, calls, ranges, pageable


def nsys_events(path: Path):
    """The same from an Nsight Systems export."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    names = dict(db.execute("SELECT id, value FROM StringIds"))
    query = "SELECT start, end, deviceId, correlationId, shortName FROM CUPTI_ACTIVITY_KIND_KERNEL"
    ops = [(s, e, d, c, names.get(n, "?")) for s, e, d, c, n in db.execute(query)]
    pageable = set()
    for s, e, d, c, src, dst in db.execute(
        "SELECT start, end, deviceId, correlationId, srcKind, dstKind "
        "FROM CUPTI_ACTIVITY_KIND_MEMCPY"
    ):
        ops.append((s, e, d, c, "memcpy"))
        if 0 in (src, dst):  # CUPTI memory kind 0: pageable host memory
            pageable.add(c)
    has_memset = db.execute(
        "SELECT count(*) FROM sqlite_master WHERE name = 'CUPTI_ACTIVITY_KIND_MEMSET'"
    ).fetchone()[0]
    if has_memset:  # (GPU ops as the Kineto traces' gpu_memset events are)
        for s, e, d, c in db.execute(
            "SELECT start, end, deviceId, correlationId FROM CUPTI_ACTIVITY_KIND_MEMSET"
        ):
            ops.append((s, e, d, c, "memset"))
    calls, ranges = {}, {}
    for s, e, tid, c, n in db.execute(
        "SELECT start, end, globalTid, correlationId, nameId FROM CUPTI_ACTIVITY_KIND_RUNTIME"
    ):
        name = names.get(n, "?").split("_v")[0]
        calls[c] = (s, e, tid >> 24, tid, name)
        ranges.setdefault((tid >> 24, tid), []).append((s, e, "api:" + name, c))
    has_nvtx = db.execute(
        "SELECT count(*) FROM sqlite_master WHERE name = 'NVTX_EVENTS'").fetchone()[0]  # fmt: skip
    if has_nvtx:
        for s, e, tid, text, tid_text in db.execute(
            "SELECT start, end, globalTid, text, textId FROM NVTX_EVENTS WHERE end > start"
        ):
            text = text if text is not None else names.get(tid_text, "")
            ranges.setdefault((tid >> 24, tid), []).append((s, e, text or "", None))
    return ops, calls, ranges, pageable


def covered(intervals, lo, hi) -> int:
    """Time the union of ``intervals`` covers in [lo, hi)."""
    spans = sorted((max(s, lo), min(e, hi)) for s, e in intervals if e > lo and s < hi)
    total, reach = 0, lo
    for s, e in spans:
        s = max(s, reach)
        if e > s:
            total += e - s
            reach = e
    return total


def truth(path: Path) -> dict:
    ops, calls, ranges, pageable = (nsys_events if path.suffix == ".sqlite"
                                    else kineto_events)(path)  # fmt: skip
    devices = {}
    for o in ops:
        devices[o[2]] = devices.get(o[2], 0) + 1
    device = max(devices, key=devices.get)
    ops = sorted((o for o in ops if o[2] == device), key=lambda o: (o[0], o[1]))
    for key in ranges:
        ranges[key].sort()
    reach, out = None, {"trace": path.name, "device": device, "ops": len(ops), "idle_ns": 0,
                        "gaps": 0, "dataloader_ns": 0, "dataloader_gaps": 0,
                        "blocking_copy_ns": 0, "late_ns": 0, "queued_gaps": 0,
                        "queued_gap_ns": 0, "queued_held_ns": 0,
                        "queued_after_event_wait": 0,
                        "late_in": dict.fromkeys(HOST_RANGES, 0)}  # fmt: skip
    out["window_ns"] = max(o[1] for o in ops) - ops[0][0]
    planted = [b for spans in ranges.values() for _, b, n, _ in spans if n == "load_checkpoint"]
    after = max(planted) if planted else None  # (ops after the planted start-up)
    if after is not None:
        first = min(o[0] for o in ops if o[0] >= after)
        out["after_startup"] = {"window_ns": max(o[1] for o in ops) - first, "idle_ns": 0,
                                "late_ns": 0}  # fmt: skip
    step_starts = [a for spans in ranges.values() for a, _, n, _ in spans
                   if re.fullmatch(r"(train_)?step_\d+", n)]  # fmt: skip
    first_op = min((o[0] for o in ops if o[0] >= min(step_starts)), default=None) if (
        step_starts) else None  # fmt: skip
    for s, e, _, corr, _ in ops:
        if reach is not None and s > reach:
            g0, g1 = reach, s
            lead = s == first_op and "first_step_lead" not in out
            in_steps = first_op is not None and s > first_op
            if in_steps and "after_first_step" not in out:
                out["after_first_step"] = {"idle_ns": 0, "late_ns": 0, "dataloader_ns": 0,
                                           "blocking_copy_ns": 0,
                                           "late_in": dict.fromkeys(HOST_RANGES, 0)}  # fmt: skip
            if in_steps:
                out["after_first_step"]["idle_ns"] += g1 - g0
            out["idle_ns"] += g1 - g0
            out["gaps"] += 1
            call = calls.get(corr)
            steady = after is not None and g0 >= first
            if steady:
                out["after_startup"]["idle_ns"] += g1 - g0
            if call is not None and g1 - max(call[1], g0) > 100_000:
                out["queued_gaps"] += 1
                out["queued_gap_ns"] += g1 - g0
                out["queued_held_ns"] += g1 - max(call[1], g0)
                mine = ranges.get((call[2], call[3]), [])
                out["queued_after_event_wait"] += any(
                    n.startswith("api:") and "StreamWaitEvent" in n and call[0] - 1_000_000 <= a
                    <= call[0] for a, _, n, _ in mine)  # fmt: skip
            if call is not None and min(call[1], g1) > g0:
                hi = min(call[1], g1)
                out["late_ns"] += hi - g0
                if steady:
                    out["after_startup"]["late_ns"] += hi - g0
                mine = ranges.get((call[2], call[3]), [])
                loader = [(a, b) for a, b, n, _ in mine if "DataLoader" in n]
                part = covered(loader, g0, hi)
                out["dataloader_ns"] += part
                out["dataloader_gaps"] += part > 0
                copies = [(a, b) for a, b, n, c in mine if n.startswith("api:")
                          and ("Memcpy" in n or "Memset" in n)
                          and ("Async" not in n or c in pageable)]  # fmt: skip
                copy_ns = covered(copies, g0, hi)
                out["blocking_copy_ns"] += copy_ns
                in_ranges = {}
                for name in HOST_RANGES:
                    spans = [(a, b) for a, b, n, _ in mine if n == name]
                    in_ranges[name] = covered(spans, g0, hi)
                    out["late_in"][name] += in_ranges[name]
                if in_steps:
                    steps = out["after_first_step"]
                    steps["late_ns"] += hi - g0
                    steps["dataloader_ns"] += part
                    steps["blocking_copy_ns"] += copy_ns
                    for name, ns in in_ranges.items():
                        steps["late_in"][name] += ns
                if lead:
                    out["first_step_lead"] = {
                        "gap_ns": g1 - g0,
                        "dataloader_ns": part,
                        "blocking_copy_ns": copy_ns,
                        "late_in": in_ranges,
                    }
            elif lead:
                out["first_step_lead"] = {
                    "gap_ns": g1 - g0,
                    "dataloader_ns": 0,
                    "blocking_copy_ns": 0,
                    "late_in": {},
                }
        reach = e if reach is None else max(reach, e)
    # launch chains between synchronize calls, on the thread that launched the most
    launchers = {}
    for _, _, pid, tid, name in calls.values():
        if "Launch" in name:
            launchers[(pid, tid)] = launchers.get((pid, tid), 0) + 1
    if launchers:
        thread = max(launchers, key=launchers.get)
        chain, chains = 0, []
        for _, _, name, _ in ranges.get(thread, []):
            if not name.startswith("api:"):
                continue
            if "Synchronize" in name:
                chains.append(chain)
                chain = 0
            elif "Launch" in name or "Memcpy" in name:
                chain += 1
        out["chains"] = len(chains)
        out["max_launches_per_chain"] = max(chains) if chains else chain
    return out


def main() -> None:
    paths = [Path(p) for p in sys.argv[1:]] or sorted(
        [*HERE.glob("why_*.pt.trace.json.gz"), *HERE.glob("why_*.sqlite")])  # fmt: skip
    print(json.dumps([truth(p) for p in paths], indent=1))


if __name__ == "__main__":
    main()
