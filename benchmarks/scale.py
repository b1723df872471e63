"""Scaling benchmark: `advisor analyze --format json` on synthetic large traces built from a
real sample by repeating its activity later in time.

    python benchmarks/scale.py [--sample sample_traces/h200_scheduling.sqlite]
                               [--sizes 100000 1000000] [--workdir /tmp/advisor-scale]
                               [--repeat 3] [--settle 5]

For each size N the sample's kernels, runtime API calls, copies, memsets, synchronizations
and NVTX ranges are copied k times (k = ceil(N / sample kernels)), each copy shifted past
the previous one in time, with correlation ids kept unique. It then measures, in fresh
processes: wall time and peak RSS of the full analysis, and the floor: the reader reading
only the kernel table as the analysis reads it (before issue 33's thirteenth pass,
2026-12-05: the ADBC driver reading the kernel columns). Each is run ``--repeat`` times,
each run after ``--settle`` idle seconds (so that it starts cold, as a user's single run
does: on a VM the memory a previous run freed goes back to the host and costs page faults
again); the table gives the median wall time and the largest peak RSS. Prints a table and
the scaling exponent (slope of log median time over log kernels between consecutive sizes;
1.0 is linear).
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TIMED = ["CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME",
         "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
         "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", "NVTX_EVENTS"]  # fmt: skip
FLOOR = """
import sys
from pathlib import Path
from advisor.trace import nsys
r = nsys._Reader(Path(sys.argv[1]))
print(len(nsys._read_kernels(r, lean=True)))  # (as an analysis reads them)
"""


def build(sample: Path, n_kernels: int, out: Path) -> int:
    """Copy ``sample`` to ``out`` and repeat its activity until it holds >= n kernels."""
    shutil.copyfile(sample, out)
    db = sqlite3.connect(out)
    base = db.execute("SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    lo, hi = db.execute("SELECT MIN(start), MAX(end) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()
    shift = (hi - lo) + 1_000_000
    corr = db.execute("SELECT MAX(correlationId) FROM CUPTI_ACTIVITY_KIND_RUNTIME").fetchone()[0]
    copies = math.ceil(n_kernels / base)
    tables = [t for t in TIMED if db.execute(
        "SELECT 1 FROM sqlite_master WHERE name = ?", (t,)).fetchone()]  # fmt: skip
    for table in tables:
        cols = [r[1] for r in db.execute(f"PRAGMA table_info({table})")]
        n0 = db.execute(f"SELECT MAX(rowid) FROM {table}").fetchone()[0] or 0
        done = 1
        while done < copies:  # double until enough copies, then top up
            step = min(done, copies - done)
            exprs = []
            for c in cols:  # copies 0..step-1 become copies done..done+step-1
                if c in ("start", "end"):
                    exprs.append(f"{c} + {done} * {shift}")
                elif c == "correlationId":
                    exprs.append(f"{c} + {done} * {corr + 1}")
                else:
                    exprs.append(c)
            db.execute(f"INSERT INTO {table} ({', '.join(cols)}) SELECT {', '.join(exprs)} "
                       f"FROM {table} WHERE rowid <= {n0 * step}")  # fmt: skip
            done += step
        db.commit()
    n = db.execute("SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    db.execute("VACUUM")
    db.close()
    return n


def measure(
    cmd: list[str], repeat: int, settle: float, cwd: str | None = None,
    env: dict[str, str] | None = None,
) -> tuple[float, float, list[float]]:  # fmt: skip
    """(median wall seconds, largest peak RSS in MB, every wall time) of ``repeat`` runs of
    one command, each in a fresh child process (in ``cwd``, with ``env``: default this
    process's) after ``settle`` idle seconds. (Linux counts the parent's resident size at
    the spawn as a floor of a child's peak; this script stays far below the peaks it
    measures.)"""
    walls, peaks = [], []
    for _ in range(repeat):
        time.sleep(settle)
        t0 = time.perf_counter()
        child = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, cwd=cwd, env=env)
        _, status, usage = os.wait4(child.pid, 0)
        walls.append(time.perf_counter() - t0)
        child.returncode = os.waitstatus_to_exitcode(status)
        if child.returncode:
            raise subprocess.CalledProcessError(child.returncode, cmd)
        peaks.append(usage.ru_maxrss / 1024)  # (Linux: kB)
    return statistics.median(walls), max(peaks), walls


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sample", default=str(ROOT / "sample_traces" / "h200_scheduling.sqlite"))
    p.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    p.add_argument("--workdir", default="/tmp/advisor-scale")
    p.add_argument("--repeat", type=int, default=3, help="runs per measurement (median)")
    p.add_argument("--settle", type=float, default=5.0, help="idle seconds before each run")
    args = p.parse_args()
    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    rows = []
    for size in args.sizes:
        path = work / f"trace_{size}.sqlite"
        if not path.exists():
            t0 = time.perf_counter()
            n = build(Path(args.sample), size, path)
            print(f"built {path} ({n} kernels) in {time.perf_counter() - t0:.1f} s", flush=True)
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        n = db.execute("SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
        api = db.execute("SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME").fetchone()[0]
        db.close()
        floor = measure([sys.executable, "-c", FLOOR, str(path)], args.repeat, args.settle)
        full = measure([sys.executable, "-m", "advisor", "analyze", str(path), "--format",
                        "json"], args.repeat, args.settle)  # fmt: skip
        rows.append((n, api, path.stat().st_size / 2**20, floor, full))
        print(
            f"{n} kernels: floor {floor[0]:.2f} s, analyze {full[0]:.2f} s "
            f"(runs: {', '.join(f'{w:.2f}' for w in full[2])}), {full[1]:.0f} MB",
            flush=True,
        )
    print(
        "\n| kernels | API rows | file (MB) | read floor (s) | analyze (s, median) "
        "| peak RSS (MB) |"
    )
    print("|---|---|---|---|---|---|")
    for n, api, mb, floor, full in rows:
        print(f"| {n:,} | {api:,} | {mb:.0f} | {floor[0]:.2f} | {full[0]:.2f} | {full[1]:.0f} |")
    for (n0, *_, f0), (n1, *_, f1) in zip(rows, rows[1:], strict=False):
        slope = math.log(f1[0] / f0[0]) / math.log(n1 / n0)
        print(f"scaling exponent {n0:,} -> {n1:,} kernels: {slope:.2f}")


if __name__ == "__main__":
    main()
