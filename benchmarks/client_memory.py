"""Where a many-rank client's memory goes, per rank: the parts it holds, the merge and the
rules, without running the workers again (issue 33's "client flat in the number of ranks").

    python benchmarks/client_memory.py [--ranks 16 64] [--kernels 100000]
                                       [--workdir /tmp/advisor-ranks]

The two ranks of benchmarks/dask_ranks.py (the 2-GPU sample's ranks repeated to --kernels
kernels, built once) are each analysed into their part once; then, for each rank count N,
a fresh process unpickles N parts (rank i a copy of part i % 2, as a worker would send it),
merges them (parts.merge_parts, each part released as it is merged, as the command does)
and applies the rules (findings.find_on_device), sampling its resident size every 2 ms.
Prints per N and stage the resident size before and after and the peak (MB), and the
largest tables of the merged analysis.
"""

from __future__ import annotations

import argparse
import json
import pickle
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "sample_traces"))

CLIENT = """
import json, pickle, sys, threading, time
import pandas as pd
import advisor.cli  # (the libraries, as the command line has them)
from advisor.findings import find_on_device
from advisor.options import AnalysisOptions
from advisor.parts import merge_parts

def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 1e6

peak = [0.0]
def sample():
    while True:
        peak[0] = max(peak[0], rss())
        time.sleep(0.002)

threading.Thread(target=sample, daemon=True).start()
blobs = [open(p, "rb").read() for p in json.loads(sys.argv[1])]
n = int(sys.argv[2])
stages = {}
def stage(name, fn):
    time.sleep(0.01)
    before = peak[0] = rss()
    out = fn()
    time.sleep(0.01)
    stages[name] = {"before_mb": round(before), "after_mb": round(rss()), "peak_mb": round(peak[0])}
    return out

def unpickled():
    parts = [pickle.loads(blobs[i % len(blobs)]) for i in range(n)]
    for i, p in enumerate(parts):
        p.path = f"rank{i:04d}"
    return parts

parts = stage("parts", unpickled)
merged = stage("merge", lambda: merge_parts(parts, release=True))  # (as the command merges)
stage("rules", lambda: find_on_device(merged, None, AnalysisOptions().rules()))
mb = lambda t: float(t.memory_usage(index=True, deep=True).sum()) / 1e6
tables = {k: round(mb(v), 1) for k, v in vars(merged).items() if isinstance(v, pd.DataFrame)}
print(json.dumps({"ranks": n, "stages": stages,
                  "largest": dict(sorted(tables.items(), key=lambda x: -x[1])[:4])}))
"""


def parts(workdir: Path, kernels: int) -> list[Path]:
    """The two ranks' parts, pickled as a worker sends them (made once)."""
    from dask_ranks import rank_traces

    from advisor.options import AnalysisOptions
    from advisor.parts import rank_part

    out = [workdir / f"part{r}_{kernels}.pkl" for r in (0, 1)]
    if all(p.exists() for p in out):
        return out
    for trace, dst in zip(rank_traces(workdir, kernels), out, strict=True):
        part = rank_part(str(trace), AnalysisOptions())
        if part.error:
            raise SystemExit(part.error)
        dst.write_bytes(pickle.dumps(part, protocol=5))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, nargs="+", default=[16, 64])
    ap.add_argument("--kernels", type=int, default=100_000)
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/advisor-ranks"))
    args = ap.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    blobs = json.dumps([str(p) for p in parts(args.workdir, args.kernels)])
    for n in args.ranks:
        out = subprocess.run([sys.executable, "-c", CLIENT, blobs, str(n)], check=True,
                             capture_output=True, text=True)  # fmt: skip
        print(out.stdout.strip().splitlines()[-1], flush=True)


if __name__ == "__main__":
    main()
