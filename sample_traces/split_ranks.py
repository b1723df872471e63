"""Split a multi-process Nsight Systems export into one export per process (rank).

    python split_ranks.py TRACE.sqlite OUTDIR

Writes OUTDIR/rank<N>.sqlite, each a copy of TRACE holding only one process's GPU work,
host calls and NVTX ranges (device facts kept whole), as `nsys profile` would have written
had each rank been profiled alone. Tests use it on sample_traces/h200x2_allreduce.sqlite to
exercise `advisor analyze` on one trace per rank.
"""

from __future__ import annotations

import shutil
import sqlite3
import sys
from pathlib import Path

BY_PID = {  # table -> the column whose (value >> 24) & 0xFFFFFF is the process id
    "CUPTI_ACTIVITY_KIND_KERNEL": "globalPid",
    "CUPTI_ACTIVITY_KIND_MEMCPY": "globalPid",
    "CUPTI_ACTIVITY_KIND_MEMSET": "globalPid",
    "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION": "globalPid",
    "CUPTI_ACTIVITY_KIND_RUNTIME": "globalTid",
    "NVTX_EVENTS": "globalTid",
}


def split(trace: str, out_dir: str) -> list[Path]:
    src = sqlite3.connect(f"file:{trace}?mode=ro", uri=True)
    pids = [r[0] for r in src.execute(
        "SELECT DISTINCT (globalPid >> 24) & 16777215 FROM CUPTI_ACTIVITY_KIND_KERNEL "
        "ORDER BY 1")]  # fmt: skip
    src.close()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for rank, pid in enumerate(pids):
        dst = out / f"rank{rank}.sqlite"
        shutil.copyfile(trace, dst)
        db = sqlite3.connect(dst)
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        for table, col in BY_PID.items():
            if table in tables:
                db.execute(f"DELETE FROM {table} WHERE (({col} >> 24) & 16777215) != ?", (pid,))
        db.commit()
        db.execute("VACUUM")
        db.close()
        written.append(dst)
    return written


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    for path in split(sys.argv[1], sys.argv[2]):
        print(path)
