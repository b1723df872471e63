"""Issue 29 round 14: do tiles sized to fill one wave close the gap to cuBLAS? At the shapes
where every config the planner has runs 13-25 % behind cuBLAS (round 13), cuBLAS ran tiles
of 96x192, 192x96, 128x144 and 192x176 whose count lands just under one wave of 132 SMs
(benchmarks/sk_gap_profile.py, docs/verification/README.md "Round 14"). The emitted
script's two-accumulator Gluon kernel (``gluon_dp2``) runs any 128 x BN tile with BN a
multiple of 16 up to 256 (a power-of-two accumulator and the rest): this times such tiles,
whole tiles in one wave, against cuBLAS and the script's choice inside a CUDA graph.

    python benchmarks/sk_round14.py STREAM_K_SCRIPT --shapes MxNxK:dtype,...
        [--bn 144,160,176,192,208,224,240] [--rounds 3] [--rep 50] [--out rows.jsonl]

Per shape: cuBLAS, the script's choice, and 128 x BN for each BN (8 warps, the stages
gluon_config gives, NUM_PROGS 132: the kernel loops over the tiles left past one wave);
each checked against a float32 matmul first (sk_round10._timed_row), timed in interleaved
rounds (median us). Rows as JSON lines, with each config's tile count.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from sk_round10 import _inputs, _timed_row, warmed_module  # noqa: E402
from sk_round13 import parse_shapes  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("script")
    ap.add_argument("--shapes", required=True)
    ap.add_argument("--bn", default="144,160,176,192,208,224,240")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rep", type=int, default=50)
    ap.add_argument("--out")
    a = ap.parse_args()
    mod = warmed_module(a.script)
    if a.out:
        Path(a.out).write_text("")
    for m, n, k, dt in parse_shapes(a.shapes):
        x, y, ref, tol = _inputs(m, n, k, dt)
        chosen = {**mod.CONFIG, **mod.replan(m, n, k)}
        runs = {"cublas": lambda x=x, y=y: x @ y,
                "chosen": lambda x=x, y=y, cfg=chosen: mod.gemm(x, y, cfg)}  # fmt: skip
        tiles = {}
        for bn in map(int, a.bn.split(",")):
            cfg = {**mod.CONFIG, "BLOCK_M": 128, "BLOCK_N": bn, "BLOCK_K": 64, "num_warps": 8,
                   "num_stages": 4, "GROUP_M": 8, "NUM_PROGS": 132, "GLUON": 1,
                   "SK_TILES": 0}  # fmt: skip
            label = f"128x{bn}"
            runs[label] = lambda x=x, y=y, cfg=cfg: mod.gemm(x, y, cfg)
            tiles[label] = math.ceil(m / 128) * math.ceil(n / bn)
        knobs = {key: chosen[key] for key in mod.KNOBS if key in chosen}
        row = {"M": m, "N": n, "K": k, "dtype": dt, "tiles": tiles, "chosen_knobs": knobs}
        _timed_row(row, runs, ref, tol, a.rounds, a.rep)
        timed = {lab: row[lab] for lab in tiles if isinstance(row.get(lab), float)}
        if timed:
            row["best"] = min(timed, key=timed.__getitem__)
        print(json.dumps({key: v for key, v in row.items() if "rel_error" not in key}),
              flush=True)  # fmt: skip
        if a.out:
            with open(a.out, "a") as f:
                f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
