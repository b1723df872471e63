"""split_k reference GEMM emitted by advisor.

Where: tiled_gemm_kernel, range underfilled_long_k, device 0

Finding (underfilled-gemm): only 4 CTAs for 264 slots (1.5 % of one wave) while each launch runs
    488.16 us; shape M=256 N=256 K=65536

Estimated savings: 2.41 ms (an estimate).

Run (numerics vs float64 matmul; median time and TFLOP/s vs torch.matmul):
    python 03_split_k_tiled_gemm_kernel_dev0.py --check --bench
Another size:
    python 03_split_k_tiled_gemm_kernel_dev0.py --m 512 --n 512 --k 4096 --check
On the CPU (Triton's interpreter, numerics only):
    TRITON_INTERPRET=1 python 03_split_k_tiled_gemm_kernel_dev0.py --check --m 64 --n 64 --k 256
"""

import os

import torch
import triton
import triton.language as tl

CONFIG = {'BLOCK_M': 128,
 'BLOCK_N': 128,
 'BLOCK_K': 64,
 'num_warps': 8,
 'num_stages': 4,
 'GROUP_M': 8,
 'ctas_per_sm': 1,
 'slots': 132,
 'tiles': 4,
 'k_iters': 1024,
 'SPLITS': 32,
 'model_ns': 13464,
 'waves': 0.9696969696969697,
 'ATOMIC': 0,
 'strategy': 'split_k',
 'M': 256,
 'N': 256,
 'K': 65536,
 'trace_kernel_ns': 488159,
 'gpu': 'NVIDIA H200'}

# ---- shared Triton helpers --------------------------------------------------------------


@triton.jit
def _tile_coords(tile, tiles_m, tiles_n, GROUP_M: tl.constexpr):
    """Grouped tile order: GROUP_M row-tiles walk the columns together (L2 reuse of B)."""
    per_group = GROUP_M * tiles_n
    first_m = (tile // per_group) * GROUP_M
    rows = tl.minimum(tiles_m - first_m, GROUP_M)
    pid_m = first_m + (tile % per_group) % rows
    pid_n = (tile % per_group) // rows
    return pid_m, pid_n


@triton.jit
def _mac(a_ptr, b_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, pid_m, pid_n,
         it_lo, it_hi, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
         EVEN_K: tl.constexpr):
    """fp32 accumulator of tile (pid_m, pid_n) over K-iterations [it_lo, it_hi)."""
    rm = (pid_m * BM + tl.arange(0, BM)) % M  # wrap rows/cols: loads stay in bounds,
    rn = (pid_n * BN + tl.arange(0, BN)) % N  # the store masks them out
    rm = tl.max_contiguous(tl.multiple_of(rm, BM), BM)
    rn = tl.max_contiguous(tl.multiple_of(rn, BN), BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for it in range(it_lo, it_hi):
        kk = it * BK + rk
        a_ptrs = a_ptr + rm[:, None] * stride_am + kk[None, :] * stride_ak
        b_ptrs = b_ptr + kk[:, None] * stride_bk + rn[None, :] * stride_bn
        if EVEN_K:
            a = tl.load(a_ptrs)
            b = tl.load(b_ptrs)
        else:
            a = tl.load(a_ptrs, mask=kk[None, :] < K, other=0.0)
            b = tl.load(b_ptrs, mask=kk[:, None] < K, other=0.0)
        acc = tl.dot(a, b, acc)
    return acc


@triton.jit
def _store_tile(c_ptr, acc, M, N, stride_cm, stride_cn, pid_m, pid_n, BM: tl.constexpr,
                BN: tl.constexpr, ATOMIC: tl.constexpr):
    """Write (or atomically add, fp32) one tile, masked at the matrix edges."""
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    ptrs = c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    if ATOMIC:
        tl.atomic_add(ptrs, acc, mask=mask)
    else:
        tl.store(ptrs, acc.to(c_ptr.dtype.element_ty), mask=mask)


def _tiles(m: int, n: int, cfg: dict) -> tuple[int, int]:
    return triton.cdiv(m, cfg["BLOCK_M"]), triton.cdiv(n, cfg["BLOCK_N"])


# ---- strategy: split-K -----------------------------------------------------------------
# Each output tile gets SPLITS CTAs, each over a contiguous slice of the K-iterations; the
# fp32 partial sums are reduced in a second pass (ATOMIC=0, deterministic) or added with
# atomics into one fp32 buffer (ATOMIC=1) that the same pass then casts.


@triton.jit
def split_k_kernel(a_ptr, b_ptr, p_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                   stride_ps, stride_pm, stride_pn, tiles_m, tiles_n, iters_per_split,
                   BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr,
                   EVEN_K: tl.constexpr, ATOMIC: tl.constexpr):
    pid_m, pid_n = _tile_coords(tl.program_id(0), tiles_m, tiles_n, GROUP_M)
    split = tl.program_id(1)
    lo = split * iters_per_split
    hi = tl.minimum(lo + iters_per_split, tl.cdiv(K, BK))
    acc = _mac(a_ptr, b_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, pid_m, pid_n,
               lo, hi, BM, BN, BK, EVEN_K)
    if ATOMIC:
        _store_tile(p_ptr, acc, M, N, stride_pm, stride_pn, pid_m, pid_n, BM, BN, True)
    else:
        _store_tile(p_ptr + split * stride_ps, acc, M, N, stride_pm, stride_pn, pid_m, pid_n,
                    BM, BN, False)


@triton.jit
def split_k_reduce(p_ptr, c_ptr, numel, splits, stride_ps, BLOCK: tl.constexpr):
    """Sum the fp32 partials over the splits and cast; 1-D over all M*N outputs so the
    pass has many CTAs however small M and N are (partials are contiguous [S, M, N])."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < numel
    total = tl.zeros((BLOCK,), dtype=tl.float32)
    for s in range(0, splits):
        total += tl.load(p_ptr + s * stride_ps + offs, mask=mask, other=0.0)
    tl.store(c_ptr + offs, total.to(c_ptr.dtype.element_ty), mask=mask)


def gemm(a: torch.Tensor, b: torch.Tensor, cfg: dict) -> torch.Tensor:
    m, k = a.shape
    n = b.shape[1]
    bm, bn, bk = cfg["BLOCK_M"], cfg["BLOCK_N"], cfg["BLOCK_K"]
    tiles_m, tiles_n = _tiles(m, n, cfg)
    k_iters = triton.cdiv(k, bk)
    splits = max(1, min(cfg["SPLITS"], k_iters))
    per_split = triton.cdiv(k_iters, splits)
    splits = triton.cdiv(k_iters, per_split)  # no empty splits
    atomic = bool(cfg["ATOMIC"])
    if atomic:
        part = torch.zeros((1, m, n), device=a.device, dtype=torch.float32)
    else:
        part = torch.empty((splits, m, n), device=a.device, dtype=torch.float32)
    split_k_kernel[(tiles_m * tiles_n, splits)](
        a, b, part, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
        part.stride(0), part.stride(1), part.stride(2), tiles_m, tiles_n, per_split,
        BM=bm, BN=bn, BK=bk, GROUP_M=cfg["GROUP_M"], EVEN_K=k % bk == 0, ATOMIC=atomic,
        num_warps=cfg["num_warps"], num_stages=cfg["num_stages"])
    c = torch.empty((m, n), device=a.device, dtype=a.dtype)
    block = 1024
    split_k_reduce[(triton.cdiv(m * n, block),)](
        part, c, m * n, 1 if atomic else splits, part.stride(0), BLOCK=block, num_warps=4)
    return c


# ---- harness (shared by every emitted GEMM script) ---------------------------------------
# The strategy part above defines `gemm(a, b, cfg) -> c`. CONFIG holds the knobs chosen by
# advisor for the trace's shape; --m/--n/--k run the same strategy at another size.
import argparse  # noqa: E402
import sys  # noqa: E402


def _device() -> str:
    if torch.cuda.is_available():
        return "cuda"
    if os.environ.get("TRITON_INTERPRET") == "1":
        return "cpu"  # Triton's interpreter: numerics only, no timing
    sys.exit("needs a CUDA GPU (or TRITON_INTERPRET=1 to check numerics on the CPU)")


def _inputs(m: int, n: int, k: int, dtype: torch.dtype, device: str, seed: int):
    g = torch.Generator(device="cpu").manual_seed(seed)
    a = torch.randn(m, k, generator=g).to(device=device, dtype=dtype)
    b = torch.randn(k, n, generator=g).to(device=device, dtype=dtype)
    return a, b


def _check(m, n, k, dtype, device, tol) -> bool:
    ok = True
    for seed in (0, 1):  # fresh random inputs each time
        a, b = _inputs(m, n, k, dtype, device, seed)
        c = gemm(a, b, CONFIG)
        ref = a.double() @ b.double()
        err = float((c.double() - ref).norm() / ref.norm())
        bad = not (err <= tol)  # NaN fails too
        ok &= not bad
        print(f"check seed={seed} M={m} N={n} K={k} {str(dtype)[6:]}: rel. error {err:.2e} "
              f"(tolerance {tol:.0e}) {'FAIL' if bad else 'ok'}")
    return ok


def _bench(m, n, k, dtype, rounds: int = 3) -> None:
    """Median time per call (do_bench), config and torch.matmul interleaved over rounds;
    the median of the rounds is reported with the spread (max - min) as the noise."""
    import statistics

    import triton.testing

    a, b = _inputs(m, n, k, dtype, "cuda", 0)
    flop = 2.0 * m * n * k
    runs = {"mine": [], "torch": []}
    for _ in range(rounds):
        runs["mine"].append(triton.testing.do_bench(
            lambda: gemm(a, b, CONFIG), warmup=100, rep=400, return_mode="median"))
        runs["torch"].append(triton.testing.do_bench(
            lambda: torch.matmul(a, b), warmup=100, rep=400, return_mode="median"))
    mine, base = statistics.median(runs["mine"]), statistics.median(runs["torch"])
    spread = {key: max(v) - min(v) for key, v in runs.items()}
    print(f"bench M={m} N={n} K={k} {str(dtype)[6:]} (median of {rounds} do_bench medians, ms):")
    print(f"  {CONFIG['strategy']:<20} {mine:8.4f} ms  {flop / mine / 1e9:8.1f} TFLOP/s"
          f"  (spread {spread['mine']:.4f} ms)")
    print(f"  {'torch.matmul':<20} {base:8.4f} ms  {flop / base / 1e9:8.1f} TFLOP/s"
          f"  (spread {spread['torch']:.4f} ms)")
    trace_ns = CONFIG.get("trace_kernel_ns")
    if trace_ns and (m, n, k) == (CONFIG["M"], CONFIG["N"], CONFIG["K"]):
        ms = trace_ns / 1e6
        print(f"  {'kernel in the trace':<20} {ms:8.4f} ms  {flop / ms / 1e9:8.1f} TFLOP/s"
              f"  -> speed-up {ms / mine:.2f}x")


def main() -> None:
    p = argparse.ArgumentParser(description=f"{CONFIG['strategy']} GEMM emitted by advisor")
    p.add_argument("--m", type=int, default=CONFIG["M"])
    p.add_argument("--n", type=int, default=CONFIG["N"])
    p.add_argument("--k", type=int, default=CONFIG["K"])
    p.add_argument("--dtype", choices=["bf16", "fp16", "fp32"], default=None,
                   help="default bf16 on a GPU, fp32 under TRITON_INTERPRET=1")
    p.add_argument("--check", action="store_true", help="compare with float64 matmul")
    p.add_argument("--bench", action="store_true", help="time with triton.testing.do_bench")
    p.add_argument("--set", action="append", default=[], metavar="KNOB=INT",
                   help="override a knob of CONFIG, e.g. --set BLOCK_M=64 (repeatable)")
    args = p.parse_args()
    for item in args.set:
        key, _, value = item.partition("=")
        if key not in CONFIG or not value.lstrip("-").isdigit():
            sys.exit(f"--set {item!r}: expected KNOB=INT with KNOB one of {sorted(CONFIG)}")
        CONFIG[key] = int(value)
    device = _device()
    name = args.dtype or ("bf16" if device == "cuda" else "fp32")
    if device == "cpu" and name != "fp32":
        sys.exit("on the CPU interpreter only --dtype fp32 is exact; 16-bit runs need a GPU")
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[name]
    tol = {"bf16": 1e-2, "fp16": 5e-3, "fp32": 2e-3}[name]
    if not (args.check or args.bench):
        args.check = True
    if args.check and not _check(args.m, args.n, args.k, dtype, device, tol):
        sys.exit(1)
    if args.bench:
        if device != "cuda":
            sys.exit("--bench needs a CUDA GPU")
        _bench(args.m, args.n, args.k, dtype)


if __name__ == "__main__":
    main()
