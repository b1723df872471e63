"""Stream-K++ policies measured: every Stream-K policy (knobs.SK_POLICIES) x kernel at many
shapes, against cuBLAS, inside a CUDA graph (issue 29's policy table).

    python benchmarks/sk_policies.py STREAM_K_SCRIPT [--out rows.json]
    python benchmarks/sk_policies.py STREAM_K_SCRIPT --before OLD_SCRIPT [--changed-only]
        [--out rows.json]
    python benchmarks/sk_policies.py STREAM_K_SCRIPT --chosen [--shapes MxNxK:dtype,...]
        [--out rows.json]

STREAM_K_SCRIPT is an emitted Stream-K script (`advisor analyze ... --emit DIR`); its own
planner (advisor's planner.py, inlined) gives, per shape, kernel (Gluon / Triton) and policy,
the tile it models fastest, and its overall choice. Each config is checked against a float32
matmul (relative error <= 1e-2 bf16, 5e-3 fp16), then it and torch.matmul are timed with
triton.testing.do_bench_cudagraph (median of 3 medians, interleaved). One row per shape,
kernel and policy: modelled and measured time, cuBLAS time, and whether the planner chose it.

With --before: per shape, the knobs each script's planner chooses (OLD_SCRIPT: one emitted
before the policy choice, with its fixed policy), both checked and timed in a CUDA graph
with cuBLAS, interleaved (median of 3 rounds of the three). With --chosen: the script's
choice alone against cuBLAS, the same way. Both print the median and min ratio to cuBLAS
over the shapes and how many reach 0.9x and 1.0x.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from replan_table import DTYPES, HELD_OUT, SHAPES, _module, checked_time  # noqa: E402


def _graph_ms(fn) -> float:
    import triton.testing

    return statistics.median(
        triton.testing.do_bench_cudagraph(fn, rep=100, return_mode="median") for _ in range(3)
    )


def rows_for(mod, shapes) -> list[dict]:
    import torch

    warm = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    _graph_ms(lambda: warm @ warm)  # a warm GPU first
    out = []
    for m, n, k, dt in shapes:
        dtype, tol = getattr(torch, DTYPES[dt][0]), DTYPES[dt][1]
        p = mod.Problem(m, n, k, mod.GPU)
        chosen = mod.stream_k(p)
        g = torch.Generator(device="cpu").manual_seed(0)
        a = torch.randn(m, k, generator=g).to("cuda", dtype)
        b = torch.randn(k, n, generator=g).to("cuda", dtype)
        ref = (a.float() @ b.float()).double()
        cublas = _graph_ms(lambda a=a, b=b: torch.matmul(a, b))
        for kernel in p.kernels:
            for policy in mod.SK_POLICIES:
                best = mod._cheapest(mod.stream_k_ns(p, base, policy)
                                     for base in mod._feasible(p, (kernel,)))  # fmt: skip
                cfg = {**mod.CONFIG, **mod._finish(best, "stream_k", GLUON=int(kernel == "gluon"))}
                knobs = {key: cfg[key] for key in mod.KNOBS if key in cfg}
                row = {"M": m, "N": n, "K": k, "dtype": dt, "kernel": kernel, "policy": policy,
                       "knobs": knobs, "model_us": cfg["model_ns"] / 1e3,
                       "chosen": all(chosen.get(key) == v for key, v in knobs.items()),
                       "cublas_ms": cublas}  # fmt: skip
                row.update(checked_time(lambda a=a, b=b, cfg=cfg: mod.gemm(a, b, cfg), ref, tol,
                                        _graph_ms))  # fmt: skip
                if "ms" in row:
                    row["vs_cublas"] = cublas / row["ms"]
                out.append(row)
                print(json.dumps(row), flush=True)
    return out


def before_after(mod, old, shapes, changed_only: bool = False) -> list[dict]:
    """Per shape, OLD's (``before``) and ``mod``'s (``after``) choices and cuBLAS."""
    return compare({"before": old, "after": mod}, shapes, changed_only)


def compare(scripts: dict, shapes, changed_only: bool = False) -> list[dict]:
    """Per shape, each script's choice (``replan``; named by ``scripts``' keys) checked
    against a float32 matmul, then timed with cuBLAS inside a CUDA graph in 3 interleaved
    rounds (medians). ``changed_only``: only the shapes where the scripts' knobs differ."""
    import torch

    warm = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    _graph_ms(lambda: warm @ warm)
    out = []
    for m, n, k, dt in shapes:
        row = {"M": m, "N": n, "K": k, "dtype": dt}
        cfgs = {}
        for name, script in scripts.items():
            cfgs[name] = {**script.CONFIG, **script.replan(m, n, k)}
            row[f"{name}_knobs"] = {key: cfgs[name][key] for key in script.KNOBS
                                    if key in cfgs[name]}  # fmt: skip
        if changed_only and len({json.dumps(row[f"{name}_knobs"]) for name in scripts}) == 1:
            row["same_knobs"] = True  # the same kernel
            out.append(row)
            print(json.dumps(row), flush=True)
            continue
        dtype, tol = getattr(torch, DTYPES[dt][0]), DTYPES[dt][1]
        g = torch.Generator(device="cpu").manual_seed(0)
        a = torch.randn(m, k, generator=g).to("cuda", dtype)
        b = torch.randn(k, n, generator=g).to("cuda", dtype)
        ref = (a.float() @ b.float()).double()
        fns = {"cublas": lambda a=a, b=b: torch.matmul(a, b)}
        for name, script in scripts.items():
            cfg = cfgs[name]
            err = float((script.gemm(a, b, cfg).double() - ref).norm() / ref.norm())
            row[f"{name}_rel_error"] = err
            if err <= tol:
                fns[name] = lambda a=a, b=b, cfg=cfg, s=script: s.gemm(a, b, cfg)
        times: dict[str, list[float]] = {name: [] for name in fns}
        for _ in range(3):  # interleaved rounds
            for name, fn in fns.items():
                times[name].append(_graph_ms_once(fn))
        for name, t in times.items():
            row[f"{name}_ms"] = statistics.median(t)
        for name in scripts:
            if f"{name}_ms" in row:
                row[f"{name}_vs_cublas"] = row["cublas_ms"] / row[f"{name}_ms"]
        out.append(row)
        print(json.dumps(row), flush=True)
    return out


def summary(rows: list[dict], names) -> str:
    """Median and min of each script's ratio to cuBLAS over the rows, and how many reach
    0.9x and 1.0x (a row without a time counts as a miss)."""
    lines = []
    for name in names:
        ratios = [r.get(f"{name}_vs_cublas", 0.0) for r in rows if not r.get("same_knobs")]
        if ratios:
            lines.append(f"{name}: median {statistics.median(ratios):.3f}x, min "
                         f"{min(ratios):.3f}x, >= 0.9x {sum(x >= 0.9 for x in ratios)}, "
                         f">= 1.0x {sum(x >= 1.0 for x in ratios)} of {len(ratios)}")  # fmt: skip
    return "\n".join(lines)


def _graph_ms_once(fn) -> float:
    import triton.testing

    return triton.testing.do_bench_cudagraph(fn, rep=100, return_mode="median")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("script")
    ap.add_argument("--out")
    ap.add_argument("--before", help="an emitted Stream-K script to compare with")
    ap.add_argument(
        "--chosen",
        action="store_true",
        help="only the script's own choice per shape against cuBLAS (no policy table)",
    )
    ap.add_argument(
        "--changed-only",
        action="store_true",
        help="with --before: time only the shapes whose knobs differ",
    )
    ap.add_argument(
        "--shapes",
        help="MxNxK:dtype,... (dtype bf16 or fp16) instead of the 16 (e.g. shapes no round "
        "has tuned on)",
    )
    a = ap.parse_args()
    mod = _module(Path(a.script))
    shapes = SHAPES["stream_k"] + HELD_OUT["stream_k"]
    if a.shapes:
        shapes = [(*map(int, mnk.split("x")), dt) for mnk, dt in
                  (item.split(":") for item in a.shapes.split(","))]  # fmt: skip
    if a.before:
        rows = before_after(mod, _module(Path(a.before)), shapes, a.changed_only)
        print(summary(rows, ("before", "after")))
    elif a.chosen:
        rows = compare({"chosen": mod}, shapes)
        print(summary(rows, ("chosen",)))
    else:
        rows = rows_for(mod, shapes)
    if a.out:
        Path(a.out).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
