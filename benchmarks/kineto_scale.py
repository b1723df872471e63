"""Build large PyTorch profiler (Kineto) JSON traces from a real capture by repeating its
events later in time (as benchmarks/scale.py does for Nsight exports), then time
``advisor analyze --format json`` on them (wall time and peak RSS, fresh processes).

    python benchmarks/kineto_scale.py [--sample KINETO.json.gz] [--kernels 100000 1000000]
                                      [--workdir /tmp/advisor-kineto] [--repeat 3]

(default sample: sample_traces/kineto/h200_train_steps.pt.trace.json.gz)

Each copy shifts ``ts`` past the previous copy and offsets correlation ids and flow ids, so
launches still join their kernels. The file is written the way Kineto writes it (one event
per block of lines), uncompressed.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def build(sample: Path, kernels: int, out: Path) -> Path:
    doc = json.loads(gzip.decompress(sample.read_bytes()))
    events = doc.pop("traceEvents")
    per_copy = sum(e.get("cat") == "kernel" for e in events)
    copies = math.ceil(kernels / per_copy)
    t0 = min(e["ts"] for e in events if "ts" in e)
    t1 = max(e["ts"] + e.get("dur", 0) for e in events if "ts" in e)
    shift = (t1 - t0) + 1000.0  # us
    corr = max(int(e.get("args", {}).get("correlation", 0)) for e in events) + 1
    path = out / f"kineto_{kernels}.pt.trace.json"
    with open(path, "w") as fh:
        head = json.dumps(doc, indent=2)[:-2]  # the document without its closing brace
        fh.write(head + ',\n  "traceEvents": [\n')
        first = True
        for c in range(copies):
            for e in events:
                if e.get("ph") == "M" and c:
                    continue
                e2 = dict(e)
                if "ts" in e2 and isinstance(e2["ts"], int | float):
                    e2["ts"] = round(e2["ts"] + c * shift, 3)
                args = e2.get("args")
                if isinstance(args, dict) and "correlation" in args:
                    e2["args"] = {**args, "correlation": args["correlation"] + c * corr}
                if e2.get("cat") in ("ac2g",) and "id" in e2:
                    e2["id"] = e2["id"] + c * corr
                fh.write(("" if first else ",\n") + "  " + json.dumps(e2))
                first = False
        fh.write("\n  ]\n}\n")
    return path


def measure(cmd: list[str], repeat: int) -> tuple[float, float]:
    walls, peaks = [], []
    for _ in range(repeat):
        start = time.perf_counter()
        child = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
        _, status, usage = os.wait4(child.pid, 0)
        walls.append(time.perf_counter() - start)
        peaks.append(usage.ru_maxrss / 1024)
        if os.waitstatus_to_exitcode(status) != 0:
            raise SystemExit(f"failed: {' '.join(cmd)}")
        time.sleep(2)
    return statistics.median(walls), max(peaks)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument(
        "--sample", default=str(ROOT / "sample_traces/kineto/h200_train_steps.pt.trace.json.gz")
    )
    ap.add_argument("--kernels", type=int, nargs="+", default=[100_000])
    ap.add_argument("--workdir", default="/tmp/advisor-kineto")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    out = Path(args.workdir)
    out.mkdir(parents=True, exist_ok=True)
    print("| kernels | events | file (MB) | analyze (s, median) | peak RSS (MB) |")
    print("|---|---|---|---|---|")
    for n in args.kernels:
        path = out / f"kineto_{n}.pt.trace.json"
        if not path.exists():
            build(Path(args.sample), n, out)
        size = path.stat().st_size / 1e6
        wall, peak = measure([sys.executable, "-m", "advisor", "analyze", str(path), "--format",
                              "json"], args.repeat)  # fmt: skip
        with open(path, "rb") as fh:
            events = sum(line.startswith(b"  {") for line in fh)
        print(f"| {n:,} | {events:,} | {size:.0f} | {wall:.2f} | {peak:.0f} |")


if __name__ == "__main__":
    main()
