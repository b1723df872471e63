"""Issue 29: what cuBLAS runs where the emitted Stream-K script is slower, and the two side
by side under the profilers (diagnosis for the kernels, not a timing: sk_round13.py times).

    python benchmarks/sk_gap_profile.py STREAM_K_SCRIPT --shapes MxNxK:dtype,... --out DIR
        [--configs LABEL,...]      # more configs of sk_round13.configs to run beside them
        [--ncu]                    # under ncu: no torch.profiler (both would use CUPTI)

Per shape, after each kernel's warm-up (Triton/Gluon compile, cuBLAS's heuristic): cuBLAS
(``a @ b``), the script's choice and each --configs label that exists at that shape, each
run 3 times inside ``torch.profiler``; with --ncu instead once each between
cudaProfilerStart and Stop (``ncu --profile-from-start off``; the order printed). Writes
DIR/gap.pt.trace.json (the Kineto trace: kernel names, grid, block, registers, shared
memory, durations) and prints one JSON line per shape and run: its kernels' names, grids,
blocks and median duration (us).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from sk_round10 import _inputs, warmed_module  # noqa: E402
from sk_round13 import configs, parse_shapes  # noqa: E402


def runs_of(mod, m: int, n: int, k: int, a, b, labels: list[str]) -> dict:
    """label -> a call: cuBLAS, the script's choice and the given config labels."""
    chosen = {**mod.CONFIG, **mod.replan(m, n, k)}
    runs = {"cublas": lambda: a @ b, "chosen": lambda: mod.gemm(a, b, chosen)}
    for label, (cfg, _) in configs(mod, m, n, k).items():
        if label in labels:
            runs[label] = lambda cfg=cfg: mod.gemm(a, b, cfg)
    return runs


def main() -> None:
    import torch
    from torch.profiler import ProfilerActivity, profile

    ap = argparse.ArgumentParser()
    ap.add_argument("script")
    ap.add_argument("--shapes", required=True)
    ap.add_argument("--configs", default="")
    ap.add_argument("--out", required=True)
    ap.add_argument("--ncu", action="store_true")
    a = ap.parse_args()
    mod = warmed_module(a.script)
    labels = [x for x in a.configs.split(",") if x]
    plan = []
    for m, n, k, dt in parse_shapes(a.shapes):
        x, y, ref, tol = _inputs(m, n, k, dt)
        runs = runs_of(mod, m, n, k, x, y, labels)
        for label, fn in runs.items():
            err = float((fn().double() - ref).norm() / ref.norm())
            assert err <= tol, (m, n, k, label, err)
            fn()
        plan.append((f"{m}x{n}x{k}:{dt}", runs))
    torch.cuda.synchronize()
    if a.ncu:
        torch.cuda.profiler.start()  # (ncu --profile-from-start off: only these calls)
        for shape, runs in plan:
            for label, fn in runs.items():
                print(json.dumps({"ncu order": f"{shape} {label}"}), flush=True)
                fn()
                torch.cuda.synchronize()
        torch.cuda.profiler.stop()
        return
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for shape, runs in plan:
            for label, fn in runs.items():
                with torch.profiler.record_function(f"{shape} {label}"):
                    for _ in range(3):
                        fn()
                torch.cuda.synchronize()
    Path(a.out).mkdir(parents=True, exist_ok=True)
    trace = Path(a.out) / "gap.pt.trace.json"
    prof.export_chrome_trace(str(trace))
    summarize(trace)


def summarize(trace: Path) -> None:
    """One JSON line per profiled run: its GPU kernels (name, grid, block, registers, shared
    memory) and the median of its calls' summed kernel time (us)."""
    events = json.loads(trace.read_text())["traceEvents"]
    ranges = [e for e in events if e.get("cat") == "user_annotation"]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    calls = ("cuda_runtime", "cuda_driver")  # (Triton launches through the driver)
    launches = {e["args"]["correlation"]: e for e in events
                if e.get("cat") in calls and "correlation" in e.get("args", {})}  # fmt: skip
    for r in ranges:
        lo, hi = r["ts"], r["ts"] + r["dur"]
        mine = [kn for kn in kernels if lo <= launches.get(kn["args"]["correlation"],
                                                           {"ts": -1})["ts"] <= hi]  # fmt: skip
        names = {}
        for kn in mine:
            args = kn["args"]
            names.setdefault(kn["name"], {"grid": args.get("grid"), "block": args.get("block"),
                                          "registers": args.get("registers per thread"),
                                          "shared_bytes": args.get("shared memory"),
                                          "calls": 0})["calls"] += 1  # fmt: skip
        per_call = len(mine) / 3 if mine else 1
        durs = [kn["dur"] for kn in mine]
        sums = [sum(durs[i : i + int(per_call)]) for i in range(0, len(durs), int(per_call))]
        print(json.dumps({"run": r["name"], "kernels": names,
                          "us": round(statistics.median(sums), 2) if sums else None}))  # fmt: skip


if __name__ == "__main__":
    main()
