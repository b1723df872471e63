"""Issue 29 round 11: the two knobs rounds 6-10 never swept, at the planner's choice per
shape: GROUP_M (the L2 swizzle of the tile order) and, where the tile's shared memory holds
more, num_stages. Timed against cuBLAS inside a CUDA graph, interleaved; every variant
checked against a float32 matmul first.

    python benchmarks/sk_round11.py STREAM_K_SCRIPT [--out rows.jsonl] [--rep MS]

Per shape: the script's choice (``replan``) as is (GROUP_M 8), the same with GROUP_M in
{1, 4, 16, 32}, and with GROUP_M 8 and every num_stages above the chosen one that the
Gluon kernel's shared memory allows (``gluon_config``: 128x128x64 bf16 up to 6).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from replan_table import _module  # noqa: E402
from sk_round10 import _graph_us, _inputs, _timed_row  # noqa: E402

# the 16 Stream-K shapes of round 10's before/after, the ones below 1.0x cuBLAS first
SHAPES = [
    (2304, 2304, 9000, "bf16"),
    (1408, 1664, 16384, "bf16"),
    (896, 4864, 8192, "bf16"),
    (1792, 1536, 12288, "bf16"),
    (768, 5120, 7000, "fp16"),
    (1536, 1792, 4096, "bf16"),
    (4224, 512, 20480, "bf16"),
    (3072, 1152, 16384, "fp16"),
    (2048, 2176, 8192, "fp16"),
    (3000, 1000, 10000, "bf16"),
    (1152, 3584, 6144, "bf16"),
    (1000, 3000, 5000, "bf16"),
    (1280, 2560, 12000, "bf16"),
    (640, 6912, 8192, "fp16"),
    (896, 2432, 32768, "bf16"),
    (999, 4865, 8191, "bf16"),
]
GROUP_MS = (1, 4, 16, 32)


def knob_rows(mod, rep: int, rounds: int, sink: str | None) -> list[dict]:
    rows = []
    for m, n, k, dt in SHAPES:
        a, b, ref, tol = _inputs(m, n, k, dt)
        chosen = {**mod.CONFIG, **mod.replan(m, n, k)}
        variants = {"chosen": chosen}
        for g in GROUP_MS:
            variants[f"g{g}"] = {**chosen, "GROUP_M": g}
        run_as = mod._hopper(a, chosen)  # the knobs the Gluon kernel runs (stages capped)
        most = mod.gluon_config(a, {**chosen, "num_stages": 16}, a.element_size())
        if run_as and most:
            for s in range(run_as["num_stages"] + 1, most["num_stages"] + 1):
                variants[f"s{s}"] = {**chosen, "num_stages": s}
        runs = {"cublas": lambda a=a, b=b: a @ b}
        for label, cfg in variants.items():
            runs[label] = lambda a=a, b=b, cfg=cfg: mod.gemm(a, b, cfg)
        knobs = {key: chosen[key] for key in mod.KNOBS if key in chosen}
        row = {"M": m, "N": n, "K": k, "dtype": dt, "chosen_knobs": knobs,
               "run_stages": run_as and run_as["num_stages"], "rep_ms": rep}  # fmt: skip
        _timed_row(row, runs, ref, tol, rounds, rep)
        if isinstance(row.get("chosen"), float):
            row["chosen_vs_cublas"] = round(row["cublas"] / row["chosen"], 4)
            for label in variants:
                if label != "chosen" and isinstance(row.get(label), float):
                    row[f"{label}/chosen"] = round(row[label] / row["chosen"], 4)
        rows.append(row)
        print(json.dumps({key: v for key, v in row.items() if "rel_error" not in key}),
              flush=True)  # fmt: skip
        if sink:
            with open(sink, "a") as f:
                f.write(json.dumps(row) + "\n")
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("script")
    ap.add_argument("--out")
    ap.add_argument("--rep", type=int, default=60, help="ms per do_bench_cudagraph replay")
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    import torch

    mod = _module(Path(a.script))
    warm = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    _graph_us(lambda: warm @ warm, 100)
    if a.out:
        Path(a.out).write_text("")
    knob_rows(mod, a.rep, a.rounds, a.out)


if __name__ == "__main__":
    main()
