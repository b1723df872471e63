"""Issue 29 round 11: the two knobs rounds 6-10 never swept, at the planner's choice per
shape: GROUP_M (the L2 swizzle of the tile order) and, where the tile's shared memory holds
more, num_stages. Timed against cuBLAS inside a CUDA graph, interleaved; every variant
checked against a float32 matmul first.

    python benchmarks/sk_round11.py STREAM_K_SCRIPT [--out rows.jsonl] [--rep MS]
        [--rounds N] [--shapes MxNxK,...]

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

from replan_table import HELD_OUT, _module  # noqa: E402
from replan_table import SHAPES as REPLAN_SHAPES  # noqa: E402
from sk_round10 import _graph_us, _inputs, _timed_row  # noqa: E402

# the 16 Stream-K shapes of the before/after runs (sk_policies.py: replan_table's 12 and its 4
# held out)
SHAPES = REPLAN_SHAPES["stream_k"] + HELD_OUT["stream_k"]
GROUP_MS = (1, 4, 16, 32)


def knob_rows(mod, rep: int, rounds: int, sink: str | None, only=None) -> list[dict]:
    rows = []
    for m, n, k, dt in SHAPES:
        if only and f"{m}x{n}x{k}" not in only:
            continue
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
    ap.add_argument("--shapes", help="MxNxK,... of the 16: only these")
    a = ap.parse_args()
    import torch

    mod = _module(Path(a.script))
    warm = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    _graph_us(lambda: warm @ warm, 100)
    if a.out:
        Path(a.out).write_text("")
    knob_rows(mod, a.rep, a.rounds, a.out, a.shapes and a.shapes.split(","))


if __name__ == "__main__":
    main()
