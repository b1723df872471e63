"""Time ``advisor analyze --format json`` with this checkout and with another one, side by
side in one run (alternating, fresh processes), on traces already built by
benchmarks/scale.py and benchmarks/kineto_scale.py.

    git worktree add /tmp/before <commit>            # the code to compare with
    (cd /tmp/before && python setup.py build_ext --inplace)   # its Kineto scanner
    python benchmarks/before_after.py /tmp/before TRACE... [--repeat 3] [--settle 5]

Each trace: ``--repeat`` runs of each version, alternating which goes first, each after
``--settle`` idle seconds; prints per trace the median wall time (s) and the median (and, in
brackets, the largest) peak RSS (MB) of each, as a markdown table, and every run on stderr.
Each version runs from its checkout (also first on PYTHONPATH), with this environment's
libraries.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scale import measure  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def compare(before: str, trace: str, repeat: int, settle: float) -> dict[str, dict]:
    """Per version ("before": the checkout ``before``, "now": this one): every wall time (s)
    and peak RSS (MB) of ``repeat`` fresh runs of ``advisor analyze TRACE
    --format json``, alternating which version goes first. Each runs from its checkout with
    it first on PYTHONPATH (``-m`` puts the working folder first on the path)."""
    versions = {"before": str(Path(before).resolve()), "now": str(ROOT)}
    trace = os.path.abspath(trace)
    out: dict[str, dict] = {v: {"walls": [], "peaks": []} for v in versions}
    cmd = [sys.executable, "-m", "advisor", "analyze", trace, "--format", "json"]
    for i in range(repeat):
        for name in list(versions) if i % 2 == 0 else list(versions)[::-1]:
            where = versions[name]
            env = {**os.environ, "PYTHONPATH": where}
            _, peak, wall = measure(cmd, 1, settle, cwd=where, env=env)
            out[name]["walls"] += wall
            out[name]["peaks"].append(round(peak))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("before", help="a checkout of the code to compare with")
    ap.add_argument("traces", nargs="+")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--settle", type=float, default=5.0)
    args = ap.parse_args()
    print("| trace | before (s) | before peak (MB) | now (s) | now peak (MB) | now / before |")
    print("|---|---|---|---|---|---|")
    # (the time: each version's median; the peak: its median, and in brackets its largest)
    for trace in args.traces:
        got = compare(args.before, trace, args.repeat, args.settle)
        b, n = (statistics.median(got[v]["walls"]) for v in ("before", "now"))
        peak = {v: f"{statistics.median(got[v]['peaks']):.0f} ({max(got[v]['peaks'])})"
                for v in ("before", "now")}  # fmt: skip
        print(f"| {Path(trace).name} | {b:.2f} | {peak['before']} | {n:.2f} | {peak['now']} | "
              f"{n / b:.2f}x |", flush=True)  # fmt: skip
        for v in ("before", "now"):
            walls = ", ".join(f"{w:.2f}" for w in got[v]["walls"])
            print(f"  ({v}: runs {walls} s, peaks {got[v]['peaks']} MB)", file=sys.stderr)


if __name__ == "__main__":
    main()
