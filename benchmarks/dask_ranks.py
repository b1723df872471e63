"""Many-rank benchmark: the ranks of a job analysed with local worker processes
(``--jobs``) against a Dask cluster of as many single-threaded workers started as separate
processes on loopback (a scheduler and ``dask worker`` processes, as on a cluster's nodes).

    python benchmarks/dask_ranks.py [--ranks 16 64 256] [--kernels 100000] [--workers 2]
                                    [--workdir /tmp/advisor-ranks] [--repeat 1]

The per-rank traces are the two ranks of sample_traces/h200x2_allreduce.sqlite (split per
process, sample_traces/split_ranks.py), each repeated in time to ``--kernels`` kernels as
benchmarks/scale.py does; rank i is a link to rank i % 2, so the collectives match across
every rank. For each rank count and runner, one fresh client process runs
``multi.analyze_ranks`` (read, analyse and reduce every rank on the workers, merge and apply
the rules on the client) and reports its wall time, the client's peak RSS (the workers'
memory is their own) and the bytes of the parts that travelled back. Prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "sample_traces"))

CLIENT = """
import json, pickle, resource, sys, time
from advisor.cluster import DaskRunner, LocalRunner
from advisor.multi import analyze_ranks
from advisor.options import AnalysisOptions
paths, mode, workers = json.loads(sys.argv[1]), sys.argv[2], int(sys.argv[3])
sizes = []
def done(part):
    sizes.append(len(pickle.dumps(part, protocol=5)))
t0 = time.perf_counter()
run = LocalRunner(workers) if mode == "local" else DaskRunner(mode)
job = analyze_ranks(paths, AnalysisOptions(), on_read=done, runner=run)
wall = time.perf_counter() - t0
assert not job.errors, job.errors[:3]
print(json.dumps({"wall_s": wall, "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                  / 1024, "part_kb": sum(sizes) / len(sizes) / 1024, "findings": len(job.findings),
                  "collectives": len(job.analysis.collectives)}))
"""


def rank_traces(workdir: Path, kernels: int) -> list[Path]:
    """The two allreduce ranks, each repeated to ``kernels`` kernels (built once)."""
    from scale import build
    from split_ranks import split

    out = [workdir / f"base_rank{r}_{kernels}.sqlite" for r in (0, 1)]
    if all(p.exists() for p in out):
        return out
    with tempfile.TemporaryDirectory() as tmp:
        for src, dst in zip(split(str(ROOT / "sample_traces" / "h200x2_allreduce.sqlite"), tmp),
                            out, strict=True):  # fmt: skip
            n = build(Path(src), kernels, dst)
            print(f"built {dst} ({n} kernels, {dst.stat().st_size / 2**20:.0f} MB)", flush=True)
    return out


def job(workdir: Path, bases: list[Path], ranks: int) -> list[str]:
    """``ranks`` paths, rank i a link to base i % 2."""
    folder = workdir / f"job_{ranks}"
    folder.mkdir(exist_ok=True)
    paths = []
    for i in range(ranks):
        link = folder / f"rank{i:04d}.sqlite"
        if not link.exists():
            link.symlink_to(bases[i % 2])
        paths.append(str(link))
    return paths


def start_cluster(workers: int, folder: Path) -> tuple[str, list[subprocess.Popen]]:
    """A scheduler and ``workers`` single-threaded worker processes on 127.0.0.1."""
    info = folder / "scheduler.json"
    info.unlink(missing_ok=True)
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    procs = [subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler", "--host",
                               "127.0.0.1", "--port", "0", "--scheduler-file", str(info),
                               "--no-dashboard"], **quiet)]  # fmt: skip
    while not info.exists():
        time.sleep(0.2)
    address = json.loads(info.read_text())["address"]
    procs.append(subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker",
                                   "--scheduler-file", str(info), "--nworkers", str(workers),
                                   "--nthreads", "1", "--no-dashboard"], **quiet))  # fmt: skip
    from distributed import Client

    with Client(address, timeout="60s") as c:
        c.wait_for_workers(workers, timeout=120)
    return address, procs


def run_client(paths: list[str], mode: str, workers: int) -> dict:
    out = subprocess.run([sys.executable, "-c", CLIENT, json.dumps(paths), mode, str(workers)],
                         capture_output=True, text=True, check=True)  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ranks", type=int, nargs="+", default=[16, 64, 256])
    p.add_argument("--kernels", type=int, default=100_000)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--workdir", default="/tmp/advisor-ranks")
    p.add_argument("--repeat", type=int, default=1)
    args = p.parse_args()
    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    bases = rank_traces(work, args.kernels)
    address, procs = start_cluster(args.workers, work)
    rows = []
    try:
        for ranks in args.ranks:
            paths = job(work, bases, ranks)
            for _ in range(args.repeat):  # alternating, so drift hits both alike
                for mode in ("local", address):
                    r = run_client(paths, mode, args.workers)
                    r.update(ranks=ranks, runner="local --jobs" if mode == "local" else "dask")
                    rows.append(r)
                    print(json.dumps(r), flush=True)
    finally:
        for proc in reversed(procs):
            proc.terminate()
            proc.wait(timeout=30)
    print(f"\n{args.workers} workers, {args.kernels:,} kernels per rank, {os.cpu_count()} cores\n")
    print("| ranks | runner | wall (s) | client peak RSS (MB) | part per rank (KB) |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['ranks']} | {r['runner']} | {r['wall_s']:.1f} | {r['peak_mb']:.0f} "
              f"| {r['part_kb']:.0f} |")  # fmt: skip


if __name__ == "__main__":
    main()
