"""Cross-check advisor against Meta's Holistic Trace Analysis (HTA) on the same Kineto traces:
GPU time split (HTA's temporal breakdown vs advisor's summary over the same steps: HTA leaves
the last ProfilerStep out, so advisor reads a copy without it) and communication/computation
overlap; optionally the speed of HTA's load + idle-time breakdown against ``advisor analyze``.

    pip install holistictraceanalysis     # optional: it pulls jupyterlab; not a test extra
    python benchmarks/hta_crosscheck.py TRACE.json.gz ...
    python benchmarks/hta_crosscheck.py --speed [--kernels 100000] [--workdir /tmp/advisor-hta]
        [--hta-python VENV/bin/python]   # HTA in an environment of its own (its pins differ)

Prints one row per trace, in microseconds (HTA's unit) and percent; docs/metrics.md
("Agreement with HTA") records a run and explains each difference.
"""

from __future__ import annotations

import argparse
import gzip
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def hta_numbers(trace: Path) -> dict:
    """HTA's temporal breakdown and comm/comp overlap of one trace (its own folder)."""
    from hta.trace_analysis import TraceAnalysis

    folder = Path(tempfile.mkdtemp())
    shutil.copy(trace, folder)
    try:
        ta = TraceAnalysis(trace_dir=str(folder))
        tb = ta.get_temporal_breakdown(visualize=False).iloc[0]
        try:
            overlap = float(ta.get_comm_comp_overlap(visualize=False).iloc[0, 1])
        except (IndexError, ZeroDivisionError):  # no communication (HTA: empty or 0/0)
            overlap = float("nan")
    finally:
        shutil.rmtree(folder)
    return {
        "span_us": float(tb["kernel_time(us)"]),
        "idle_us": float(tb["idle_time(us)"]),
        "compute_us": float(tb["compute_time(us)"]),
        "non_compute_us": float(tb["non_compute_time(us)"]),
        "overlap_pct": overlap,
    }


def advisor_numbers(trace: Path) -> dict:
    """The same quantities from advisor's summary (ns -> us)."""
    from advisor.analysis import analyze
    from advisor.trace.load import load_trace

    s = analyze(load_trace(trace)).summary()
    ratio = s["overlap_ratio"]
    return {
        "span_us": s["window_ns"] / 1e3,
        "idle_us": s["idle_ns"] / 1e3,  # start-up included, as HTA counts it
        "busy_us": s["gpu_busy_ns"] / 1e3,
        "compute_us": s["compute_ns"] / 1e3,
        "comm_us": s["comm_ns"] / 1e3,
        "overlap_pct": float("nan") if ratio is None else 100 * ratio,
    }


GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")


def without_last_step(trace: Path, out: Path) -> Path:
    """A copy of ``trace`` holding what HTA analyses: HTA's loader keeps the ProfilerStep
    iterations but the last, so the last step's host events, and the GPU work they launched,
    are left out here too (a trace without steps is copied whole)."""
    doc = json.loads(gzip.decompress(trace.read_bytes()))
    events = doc["traceEvents"]
    steps = [e["ts"] for e in events if str(e.get("name", "")).startswith("ProfilerStep#")]
    if len(steps) > 1:
        cut = max(steps)
        host = [e for e in events if e.get("cat") not in GPU_CATS and e.get("ts", 0) < cut]
        launched = {e["args"]["correlation"] for e in host
                    if isinstance(e.get("args"), dict) and "correlation" in e["args"]}  # fmt: skip
        gpu = [e for e in events if e.get("cat") in GPU_CATS
               and e.get("args", {}).get("correlation") in launched]  # fmt: skip
        doc["traceEvents"] = host + gpu
    path = out / trace.name
    path.write_bytes(gzip.compress(json.dumps(doc).encode()))
    return path


def compare(traces: list[Path]) -> None:
    logging.disable(logging.WARNING)
    head = ("trace", "span HTA", "span adv", "idle HTA", "idle adv", "compute HTA",
            "compute adv", "overlap % HTA", "overlap % adv")  # fmt: skip
    print(" | ".join(head))
    for t in traces:
        try:
            h = hta_numbers(t)
        except (IndexError, KeyError, ValueError) as exc:  # HTA cannot break this one down
            print(f"{t.name} | HTA fails: {type(exc).__name__}: {exc}")
            continue
        a = advisor_numbers(without_last_step(t, Path(tempfile.mkdtemp())))
        row = [t.name, h["span_us"], a["span_us"], h["idle_us"], a["idle_us"], h["compute_us"],
               a["compute_us"], h["overlap_pct"], a["overlap_pct"]]  # fmt: skip
        print(" | ".join(f"{v:,.1f}" if isinstance(v, float) else v for v in row))


def _timed(cmd: list[str]) -> tuple[float, float]:
    """Wall seconds and peak RSS (MB) of a child process."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    if status:
        raise SystemExit(f"failed: {' '.join(cmd)}")
    return wall, usage.ru_maxrss / 1024


HTA_LOAD = (
    "import logging, sys; logging.disable(logging.WARNING)\n"
    "from hta.trace_analysis import TraceAnalysis\n"
    "ta = TraceAnalysis(trace_dir=sys.argv[1])\n"
    "ta.get_idle_time_breakdown(visualize=False)\n"
)


def _warm(path: Path) -> None:
    """Read the file once so that both tools find it in the page cache (the first one to
    read it would otherwise pay the disk for the other)."""
    with path.open("rb") as f:
        while f.read(1 << 24):
            pass


def speed(kernels: int, workdir: Path, rounds: int = 3, hta_python: str | None = None) -> None:
    """HTA's load + idle-time breakdown vs advisor analyze on one Kineto trace of
    ``kernels`` kernels built by benchmarks/kineto_scale.py, in fresh processes: ``rounds``
    rounds, each with the file in the page cache, the two tools' order alternating; the
    medians and the ratio of the medians. ``hta_python``: the interpreter that runs HTA
    (default: this one)."""
    import statistics

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from kineto_scale import build

    sample = ROOT / "sample_traces" / "kineto" / "h200_train_steps.pt.trace.json.gz"
    folder = workdir / f"hta_{kernels}"
    folder.mkdir(parents=True, exist_ok=True)
    trace = next(folder.glob("*.json"), None) or build(sample, kernels, folder)
    print(f"{trace.name}: {trace.stat().st_size / 1e6:,.0f} MB")
    cmds = {"advisor": [sys.executable, "-m", "advisor", "analyze", str(trace), "--format", "json"],
            "HTA": [hta_python or sys.executable, "-c", HTA_LOAD, str(folder)]}  # fmt: skip
    times: dict[str, list[float]] = {"advisor": [], "HTA": []}
    for i in range(rounds):
        for tool in ("advisor", "HTA") if i % 2 == 0 else ("HTA", "advisor"):
            _warm(trace)
            wall, peak = _timed(cmds[tool])
            times[tool].append(wall)
            print(f"round {i + 1}: {tool} {wall:.2f} s, peak {peak:,.0f} MB", flush=True)
    adv, hta = (statistics.median(times[t]) for t in ("advisor", "HTA"))
    print(f"medians: advisor {adv:.2f} s, HTA {hta:.2f} s: advisor is {hta / adv:.1f}x faster")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("traces", nargs="*", type=Path)
    ap.add_argument("--speed", action="store_true")
    ap.add_argument("--kernels", type=int, default=100_000)
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/advisor-hta"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--hta-python", help="the interpreter of an environment with HTA installed")
    args = ap.parse_args()
    if args.traces:
        compare(args.traces)
    if args.speed:
        speed(args.kernels, args.workdir, args.rounds, args.hta_python)


if __name__ == "__main__":
    main()
