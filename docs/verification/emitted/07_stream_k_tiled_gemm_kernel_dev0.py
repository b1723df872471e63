"""stream_k reference GEMM emitted by advisor.

Where: tiled_gemm_kernel, range tail_gemm, device 0

Finding (wave-tail-gemm): 133 CTAs on 132 slots (1 CTA/SM): 1.008 waves, the last one 0.8 %
    full, so 49.6 % of the GPU idles over 5 launch(es)

Estimated savings: 464.55 us (an estimate).

Run (numerics vs float64 matmul; median time and TFLOP/s vs torch.matmul):
    python 07_stream_k_tiled_gemm_kernel_dev0.py --check --bench
Another size:
    python 07_stream_k_tiled_gemm_kernel_dev0.py --m 512 --n 512 --k 4096 --check
On the CPU (Triton's interpreter, numerics only):
    TRITON_INTERPRET=1 python 07_stream_k_tiled_gemm_kernel_dev0.py --check --m 64 --n 64 --k 256
"""

import os

import torch
import triton
import triton.language as tl

CONFIG = {'BLOCK_M': 128,
 'BLOCK_N': 256,
 'BLOCK_K': 64,
 'num_warps': 8,
 'num_stages': 3,
 'GROUP_M': 8,
 'ctas_per_sm': 1,
 'slots': 132,
 'tiles': 133,
 'k_iters': 128,
 'model_ns': 79457,
 'sk_tiles': 133,
 'NUM_PROGS': 132,
 'strategy': 'stream_k',
 'M': 896,
 'N': 4864,
 'K': 8192,
 'trace_kernel_ns': 187072,
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


# ---- strategy: Stream-K (data-parallel waves + a stream-K remainder) --------------------
# NUM_PROGS CTAs first run whole tiles data-parallel (full waves), then share the
# K-iterations of the remaining tiles equally: each CTA takes a contiguous run of
# iterations, possibly spanning tile boundaries. Tiles it covers whole are stored at once;
# a tile shared by several CTAs is finished by the CTA holding its last iteration, which
# waits on a per-tile counter for the others' fp32 partials and adds them in CTA order
# (deterministic). All NUM_PROGS CTAs must be resident at once (NUM_PROGS <= SMs x CTAs/SM).


@triton.jit
def _owner(it, iters_per_prog, extra_iters):
    """The CTA whose stream-K share holds global iteration ``it``."""
    big = extra_iters * (iters_per_prog + 1)  # the first extra_iters CTAs take one more
    return tl.where(it < big, it // (iters_per_prog + 1),
                    extra_iters + (it - big) // tl.maximum(iters_per_prog, 1))


@triton.jit
def stream_k_kernel(a_ptr, b_ptr, c_ptr, ws_ptr, flag_ptr, M, N, K, stride_am, stride_ak,
                    stride_bk, stride_bn, stride_cm, stride_cn, tiles_m, tiles_n, dp_tiles,
                    iters_per_tile, iters_per_prog, extra_iters, NUM_PROGS,
                    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                    GROUP_M: tl.constexpr, EVEN_K: tl.constexpr):
    pid = tl.program_id(0)
    for tile in range(pid, dp_tiles, NUM_PROGS):  # data-parallel full waves
        pid_m, pid_n = _tile_coords(tile, tiles_m, tiles_n, GROUP_M)
        acc = _mac(a_ptr, b_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, pid_m,
                   pid_n, 0, iters_per_tile, BM, BN, BK, EVEN_K)
        _store_tile(c_ptr, acc, M, N, stride_cm, stride_cn, pid_m, pid_n, BM, BN, False)
    # stream-K: this CTA's contiguous share [start, end) of the remaining iterations, walked
    # from its last tile to its first: the partial it hands on (the head of a tile that a
    # later CTA finishes) is written first, and the tile it finishes (its first, whose head
    # earlier CTAs computed) comes last, when those partials are long written.
    start = pid * iters_per_prog + tl.minimum(pid, extra_iters)
    end = start + iters_per_prog + (pid < extra_iters).to(tl.int32)
    first = start // iters_per_tile
    last = (end - 1) // iters_per_tile
    offs = tl.arange(0, BM)[:, None] * BN + tl.arange(0, BN)[None, :]
    for step in range(0, last - first + 1):
        sk_tile = last - step
        lo = tl.maximum(start - sk_tile * iters_per_tile, 0)
        hi = tl.minimum(end - sk_tile * iters_per_tile, iters_per_tile)
        pid_m, pid_n = _tile_coords(dp_tiles + sk_tile, tiles_m, tiles_n, GROUP_M)
        acc = _mac(a_ptr, b_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, pid_m,
                   pid_n, lo, hi, BM, BN, BK, EVEN_K)
        if hi < iters_per_tile:  # a later CTA finishes this tile: hand the partial on
            tl.store(ws_ptr + pid * BM * BN + offs, acc)
            tl.atomic_add(flag_ptr + sk_tile, 1, sem="release")
        else:
            if lo > 0:  # finish a shared tile: wait for and add the earlier CTAs' partials
                p_first = _owner(sk_tile * iters_per_tile, iters_per_prog, extra_iters)
                while tl.atomic_add(flag_ptr + sk_tile, 0, sem="acquire") < pid - p_first:
                    pass
                for p in range(p_first, pid):
                    acc += tl.load(ws_ptr + p * BM * BN + offs, cache_modifier=".cg")
            _store_tile(c_ptr, acc, M, N, stride_cm, stride_cn, pid_m, pid_n, BM, BN, False)


def plan(m: int, n: int, k: int, cfg: dict) -> dict:
    """Split tiles into data-parallel full waves and a stream-K remainder."""
    tiles_m, tiles_n = _tiles(m, n, cfg)
    tiles = tiles_m * tiles_n
    iters_per_tile = triton.cdiv(k, cfg["BLOCK_K"])
    progs = min(cfg["NUM_PROGS"], tiles * iters_per_tile)
    full_waves = tiles // progs
    # keep one full wave (plus the partial one) in stream-K so the remainder is balanced
    dp_tiles = max(full_waves - 1, 0) * progs if tiles % progs else tiles
    sk_iters = (tiles - dp_tiles) * iters_per_tile
    return dict(tiles_m=tiles_m, tiles_n=tiles_n, progs=progs, dp_tiles=dp_tiles,
                sk_tiles=tiles - dp_tiles, iters_per_tile=iters_per_tile,
                iters_per_prog=sk_iters // progs, extra_iters=sk_iters % progs)


def gemm(a: torch.Tensor, b: torch.Tensor, cfg: dict) -> torch.Tensor:
    m, k = a.shape
    n = b.shape[1]
    p = plan(m, n, k, cfg)
    bm, bn = cfg["BLOCK_M"], cfg["BLOCK_N"]
    c = torch.empty((m, n), device=a.device, dtype=a.dtype)
    # one partial-tile slot per CTA, written before its flag is raised
    ws = torch.empty((p["progs"], bm, bn), device=a.device, dtype=torch.float32)
    flags = torch.zeros((max(p["sk_tiles"], 1),), device=a.device, dtype=torch.int32)
    stream_k_kernel[(p["progs"],)](
        a, b, c, ws, flags, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
        c.stride(0), c.stride(1), p["tiles_m"], p["tiles_n"], p["dp_tiles"],
        p["iters_per_tile"], p["iters_per_prog"], p["extra_iters"], p["progs"],
        BM=bm, BN=bn, BK=cfg["BLOCK_K"], GROUP_M=cfg["GROUP_M"],
        EVEN_K=k % cfg["BLOCK_K"] == 0, num_warps=cfg["num_warps"],
        num_stages=cfg["num_stages"])
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
