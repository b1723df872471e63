"""The Gluon Stream-K kernel's time per call that does not scale with K, against cuBLAS:
two emitted Stream-K scripts (before / after a template change) at short and long K,
data-parallel (SK_TILES=0) and all Stream-K (-1), and the plain persistent Gluon kernel
(gluon_ws, no Stream-K code) for the data-parallel schedule; CUDA graph, each checked
first. Prints each kernel's registers and spills as compiled.

    python benchmarks/sk_fixed.py NEW_SCRIPT OLD_SCRIPT [--out rows.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from replan_table import _module  # noqa: E402
from sk_grid import _graph_ms  # noqa: E402

SHAPES = [(1000, 3000, 64), (1000, 3000, 1024), (1000, 3000, 5000), (1536, 1792, 64),
          (1536, 1792, 4096), (896, 4864, 8192), (2304, 2304, 9000)]  # fmt: skip
TILES = {"128x256": (128, 256, 64, 8, 3), "128x128": (128, 128, 64, 4, 4)}


def _cfg(mod, tile, policy, sms):
    bm, bn, bk, warps, stages = TILES[tile]
    return {**mod.CONFIG, "BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "num_warps": warps,
            "num_stages": stages, "GROUP_M": 8, "NUM_PROGS": sms, "SK_TILES": policy,
            "GLUON": 1}  # fmt: skip


def _ws_dp(mod, sms):
    """The data-parallel schedule in the plain persistent Gluon kernel (split-K's, 1 split)."""
    import torch

    def run(x, y, cfg):
        hopper = mod.gluon_config(x, cfg, x.element_size())
        c = torch.empty((x.shape[0], y.shape[1]), device=x.device, dtype=x.dtype)
        tiles = -(-x.shape[0] // cfg["BLOCK_M"]) * -(-y.shape[1] // cfg["BLOCK_N"])
        mod.gluon_ws(x, y, c, hopper, min(sms, tiles))
        return c

    return run


def _compiled(fn) -> list[dict]:
    out = []
    for caches in getattr(fn, "device_caches", {}).values():
        for k in caches[0].values():
            out.append({"n_regs": getattr(k, "n_regs", None),
                        "n_spills": getattr(k, "n_spills", None),
                        "shared": getattr(k.metadata, "shared", None),
                        "constants": str(getattr(k, "src", None) and
                                         getattr(k.src, "constants", ""))[:200]})  # fmt: skip
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("new")
    ap.add_argument("old")
    ap.add_argument("--out")
    a = ap.parse_args()
    import torch

    scripts = {"new": _module(Path(a.new)), "old": _module(Path(a.old))}
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    rows = []
    for m, n, k in SHAPES:
        x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        y = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
        ref = (x.float() @ y.float()).double()
        row = {
            "M": m,
            "N": n,
            "K": k,
            "cublas_us": _graph_ms(lambda x=x, y=y: torch.matmul(x, y)) * 1e3,
        }
        variants = {}
        for name, mod in scripts.items():
            for tile, policy in (("128x256", 0), ("128x256", -1), ("128x128", -1)):
                variants[f"{name} {tile} SK_TILES={policy}"] = (
                    mod.gemm,
                    _cfg(mod, tile, policy, sms),
                )
        variants["new 128x256 plain persistent"] = (
            _ws_dp(scripts["new"], sms),
            _cfg(scripts["new"], "128x256", 0, sms),
        )
        for label, (fn, cfg) in variants.items():
            try:
                err = float((fn(x, y, cfg).double() - ref).norm() / ref.norm())
                if not err <= 1e-2:
                    row[label] = f"wrong ({err:.1e})"
                    continue
                row[label] = _graph_ms(lambda fn=fn, cfg=cfg, x=x, y=y: fn(x, y, cfg)) * 1e3
            except Exception as exc:  # reported, not hidden
                row[label] = f"{type(exc).__name__}: {str(exc)[:100]}"
        rows.append(row)
        print(json.dumps({key: (round(v, 1) if isinstance(v, float) else v)
                          for key, v in row.items()}), flush=True)  # fmt: skip
    for name, mod in scripts.items():
        for kernel in ("sk_gemm_kernel", "ws_gemm_kernel"):
            for c in _compiled(getattr(mod, kernel)):
                print(name, kernel, c["n_regs"], "regs", c["n_spills"], "spills", c["shared"],
                      "B shared", flush=True)  # fmt: skip
    if a.out:
        Path(a.out).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
