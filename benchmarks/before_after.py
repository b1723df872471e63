"""Time ``advisor analyze --format json`` with this checkout and with another one, side by
side in one run (alternating, fresh processes), on traces already built by
benchmarks/scale.py and benchmarks/kineto_scale.py.

    git worktree add /tmp/before <commit>            # the code to compare with
    (cd /tmp/before && python setup.py build_ext --inplace)   # its Kineto scanner
    python benchmarks/before_after.py /tmp/before TRACE... [--repeat 3] [--settle 5]

Each trace: ``--repeat`` runs of each version, alternating which goes first, each after
``--settle`` idle seconds; prints per trace the median wall time (s) and the largest peak
RSS (MB) of each, as a markdown table. Each version runs from its checkout (also first on
PYTHONPATH), with this environment's libraries.
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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("before", help="a checkout of the code to compare with")
    ap.add_argument("traces", nargs="+")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--settle", type=float, default=5.0)
    args = ap.parse_args()
    versions = {"before": str(Path(args.before).resolve()), "now": str(ROOT)}
    print("| trace | before (s) | before peak (MB) | now (s) | now peak (MB) | now / before |")
    print("|---|---|---|---|---|---|")
    for trace in map(os.path.abspath, args.traces):
        walls: dict[str, list[float]] = {v: [] for v in versions}
        peaks: dict[str, float] = dict.fromkeys(versions, 0.0)
        for i in range(args.repeat):
            order = list(versions) if i % 2 == 0 else list(versions)[::-1]
            for name in order:  # (run from the checkout: ``-m`` puts the cwd first)
                os.environ["PYTHONPATH"] = versions[name]
                os.chdir(versions[name])
                cmd = [sys.executable, "-m", "advisor", "analyze", trace, "--format", "json"]
                _, peak, wall = measure(cmd, 1, args.settle)
                walls[name] += wall
                peaks[name] = max(peaks[name], peak)
        b, n = statistics.median(walls["before"]), statistics.median(walls["now"])
        print(f"| {Path(trace).name} | {b:.2f} | {peaks['before']:.0f} | {n:.2f} | "
              f"{peaks['now']:.0f} | {n / b:.2f}x |", flush=True)  # fmt: skip
        print(f"  (runs: before {walls['before']}, now {walls['now']})", file=sys.stderr)


if __name__ == "__main__":
    main()
