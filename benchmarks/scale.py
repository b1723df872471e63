"""Scaling benchmark: `advisor analyze --format json` on synthetic large traces built from a
real sample by repeating its activity later in time.

    python benchmarks/scale.py [--sample sample_traces/h200_scheduling.sqlite]
                               [--sizes 100000 1000000] [--workdir /tmp/advisor-scale]

For each size N the sample's kernels, runtime API calls, copies, memsets, synchronizations
and NVTX ranges are copied k times (k = ceil(N / sample kernels)), each copy shifted past
the previous one in time, with correlation ids kept unique. It then measures, in fresh
processes: wall time and peak RSS of the full analysis, and the floor: reading only the
kernel columns the analysis needs. Prints a table and the scaling exponent (slope of log
time over log kernels between consecutive sizes; 1.0 is linear).
"""

from __future__ import annotations

import argparse
import math
import resource
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TIMED = ["CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME",
         "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
         "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", "NVTX_EVENTS"]  # fmt: skip
FLOOR = """
import sys, adbc_driver_sqlite.dbapi as a, pathlib
c = a.connect(pathlib.Path(sys.argv[1]).resolve().as_uri() + "?mode=ro&immutable=1")
cur = c.cursor()
cur.execute("SELECT start, end, deviceId, streamId, correlationId, globalPid, shortName, "
            "gridX, gridY, gridZ, blockX, blockY, blockZ, registersPerThread, "
            "staticSharedMemory, dynamicSharedMemory FROM CUPTI_ACTIVITY_KIND_KERNEL")
print(cur.fetch_arrow_table().num_rows)
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


def measure(cmd: list[str]) -> tuple[float, float]:
    """Wall seconds and peak RSS (MB) of one child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return wall, max(peak, before) / 1024


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sample", default=str(ROOT / "sample_traces" / "h200_scheduling.sqlite"))
    p.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    p.add_argument("--workdir", default="/tmp/advisor-scale")
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
        floor = measure([sys.executable, "-c", FLOOR, str(path)])
        full = measure([sys.executable, "-m", "advisor", "analyze", str(path), "--format",
                        "json"])  # fmt: skip
        rows.append((n, api, path.stat().st_size / 2**20, floor, full))
        print(
            f"{n} kernels: floor {floor[0]:.2f} s, analyze {full[0]:.2f} s, {full[1]:.0f} MB",
            flush=True,
        )
    print("\n| kernels | API rows | file (MB) | read floor (s) | analyze (s) | peak RSS (MB) |")
    print("|---|---|---|---|---|---|")
    for n, api, mb, floor, full in rows:
        print(f"| {n:,} | {api:,} | {mb:.0f} | {floor[0]:.2f} | {full[0]:.2f} | {full[1]:.0f} |")
    for (n0, *_, f0), (n1, *_, f1) in zip(rows, rows[1:], strict=False):
        slope = math.log(f1[0] / f0[0]) / math.log(n1 / n0)
        print(f"scaling exponent {n0:,} -> {n1:,} kernels: {slope:.2f}")


if __name__ == "__main__":
    main()
