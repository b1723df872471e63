"""Why Stream-K shares under one tile run slow: data-parallel against all-Stream-K with the
same tile, at shapes whose M x N tiles are fixed and whose K (so the operands' bytes)
grows, in a CUDA graph. If the Stream-K iterations lose their L2 reuse (each CTA at another
K offset, where data-parallel CTAs walk K in step), their time per iteration over the
data-parallel one grows once A and B no longer fit the L2.

    python benchmarks/sk_locality.py STREAM_K_SCRIPT [--out rows.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from replan_table import _module  # noqa: E402
from sk_grid import _graph_ms  # noqa: E402

SHAPES = [(1000, 3000, k) for k in (1024, 2048, 3072, 5000, 8192)] + [
    (1536, 1792, k) for k in (1024, 2048, 4096, 8192)
]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("script")
    ap.add_argument("--out")
    a = ap.parse_args()
    import torch

    mod = _module(Path(a.script))
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    rows = []
    for m, n, k in SHAPES:
        x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        y = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
        ref = x.float() @ y.float()
        row = {"M": m, "N": n, "K": k, "operand_mb": (m + n) * k * 2 / 1e6}
        row["cublas_ms"] = _graph_ms(lambda x=x, y=y: torch.matmul(x, y))
        tiles, iters = -(-m // 128) * -(-n // 256), -(-k // 64)
        for policy in (0, -1):
            cfg = {**mod.CONFIG, "BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64,
                   "num_warps": 8, "num_stages": 3, "GROUP_M": 8, "NUM_PROGS": sms,
                   "SK_TILES": policy, "GLUON": 1}  # fmt: skip
            err = float((mod.gemm(x, y, cfg).float() - ref).norm() / ref.norm())
            ms = _graph_ms(lambda cfg=cfg, x=x, y=y: mod.gemm(x, y, cfg))
            # iterations on the busiest CTA: a whole tile's (one wave), or the even share
            per_cta = iters if policy == 0 else -(-tiles * iters // sms)
            row[f"p{policy}"] = {"ms": ms, "rel_error": err, "us_per_iter": ms * 1e3 / per_cta}
        row["sk_over_dp_per_iter"] = row["p-1"]["us_per_iter"] / row["p0"]["us_per_iter"]
        rows.append(row)
        print(f"{m}x{n}x{k} ({row['operand_mb']:.0f} MB of A+B): cuBLAS "
              f"{row['cublas_ms'] * 1e3:.1f} us, data-parallel {row['p0']['ms'] * 1e3:.1f} us, "
              f"all Stream-K {row['p-1']['ms'] * 1e3:.1f} us; per iteration Stream-K / "
              f"data-parallel {row['sk_over_dp_per_iter']:.2f}", flush=True)  # fmt: skip
    if a.out:
        Path(a.out).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
