"""Build large PyTorch profiler (Kineto) JSON traces from a real capture by repeating its
events later in time (as benchmarks/scale.py does for Nsight exports), then time
``advisor analyze --format json`` on them (wall time and peak RSS, fresh processes).

    python benchmarks/kineto_scale.py [--sample KINETO.json.gz] [--kernels 100000 1000000]
                                      [--workdir /tmp/advisor-kineto] [--repeat 3]

(default sample: sample_traces/kineto/h200_train_steps.pt.trace.json.gz)

Each copy shifts ``ts`` past the previous copy and offsets correlation ids and flow ids, so
launches still join their kernels. Every event is written as the sample has it (Kineto's own
layout: an event per block of lines, indented, numbers as Kineto formats them), uncompressed.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import re
import statistics
import subprocess
import sys
import time
from decimal import Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


_SLOTS = re.compile(r'(?<="ts": )-?[0-9.]+|(?<="correlation": )[0-9]+|(?<="id": )[0-9]+')


def _ns(text: str) -> int:
    """Microseconds as Kineto writes them ("5267163998020.851") -> integer ns, exactly."""
    return int(Decimal(text) * 1000)


def _us(ns: int) -> str:
    return f"{ns // 1000}.{ns % 1000:03d}"


def build(sample: Path, kernels: int, out: Path) -> Path:
    """Write ``kineto_<kernels>.pt.trace.json`` into ``out``: the sample's events repeated
    until ``kernels`` kernels, each copy later in time by the sample's span + 1 ms, its
    correlation ids (and the ids of its ac2g flows) offset past the sample's. Each event is
    the sample's own text (Kineto's layout: an event per block of lines, its indentation and
    number formats) with those numbers replaced."""
    text = gzip.decompress(sample.read_bytes()).decode()
    open_at = text.index("[", text.index('"traceEvents"')) + 1
    close_at = text.rindex("\n  ]")
    head, body, tail = text[:open_at], text[open_at:close_at], text[close_at:]
    raw = [t if t.startswith("{") else "{" + t for t in body.removeprefix("\n  ").split(",\n  {")]
    events = [json.loads(t) for t in raw]
    per_copy = sum(e.get("cat") == "kernel" for e in events)
    copies = math.ceil(kernels / per_copy)
    stamps = [(e["ts"], e.get("dur", 0)) for e in events if isinstance(e.get("ts"), int | float)]
    t0 = min(ts for ts, _ in stamps)
    t1 = max(ts + dur for ts, dur in stamps)
    shift = round((t1 - t0) * 1000) + 1_000_000  # ns
    corr = max(int(e.get("args", {}).get("correlation", 0)) for e in events) + 1
    # each event as literal pieces and the numbers to offset: (piece, kind, value, piece, ...)
    templates = []
    for t, e in zip(raw, events, strict=True):
        parts, last = [], 0
        for m in _SLOTS.finditer(t):
            key = t[max(0, m.start() - 14) : m.start()]
            if '"id": ' in key and e.get("cat") != "ac2g":
                continue
            kind = "ts" if '"ts": ' in key else "corr"
            value = _ns(m.group()) if kind == "ts" else int(m.group())
            parts += [t[last : m.start()], (kind, value)]
            last = m.end()
        parts.append(t[last:])
        templates.append((e.get("ph") == "M", parts))
    path = out / f"kineto_{kernels}.pt.trace.json"
    with open(path, "w") as fh:
        fh.write(head)
        sep = "\n  "
        for c in range(copies):
            for meta, parts in templates:
                if meta and c:
                    continue
                pieces = [sep]
                for x in parts:
                    if isinstance(x, str):
                        pieces.append(x)
                    elif x[0] == "ts":
                        pieces.append(_us(x[1] + c * shift))
                    else:
                        pieces.append(str(x[1] + c * corr))
                fh.write("".join(pieces))
                sep = ",\n  "
        fh.write(tail)
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
