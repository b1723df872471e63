# ---- strategy: Stream-K (data-parallel waves + a stream-K remainder) --------------------
# NUM_PROGS CTAs first run DP_TILES whole tiles data-parallel (full waves), then share the
# K-iterations of the remaining tiles equally: each CTA takes a contiguous run of
# iterations, possibly spanning tile boundaries, and adds its partial tiles into an fp32
# workspace; a fix-up pass casts those tiles into C.


@triton.jit
def stream_k_kernel(a_ptr, b_ptr, c_ptr, ws_ptr, M, N, K, stride_am, stride_ak, stride_bk,
                    stride_bn, stride_cm, stride_cn, tiles_m, tiles_n, dp_tiles,
                    iters_per_tile, iters_per_prog, extra_iters, NUM_PROGS,
                    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                    GROUP_M: tl.constexpr, EVEN_K: tl.constexpr):
    pid = tl.program_id(0)
    for tile in range(pid, dp_tiles, NUM_PROGS):  # data-parallel full waves
        pid_m, pid_n = _tile_coords(tile, tiles_m, tiles_n, GROUP_M)
        acc = _mac(a_ptr, b_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, pid_m,
                   pid_n, 0, iters_per_tile, BM, BN, BK, EVEN_K)
        _store_tile(c_ptr, acc, M, N, stride_cm, stride_cn, pid_m, pid_n, BM, BN, False)
    # stream-K: this CTA's share of the remaining iterations
    start = pid * iters_per_prog + tl.minimum(pid, extra_iters)
    end = start + iters_per_prog + (pid < extra_iters).to(tl.int32)
    cur = start
    while cur < end:
        sk_tile = cur // iters_per_tile
        lo = cur % iters_per_tile
        hi = tl.minimum(iters_per_tile, lo + end - cur)
        pid_m, pid_n = _tile_coords(dp_tiles + sk_tile, tiles_m, tiles_n, GROUP_M)
        acc = _mac(a_ptr, b_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, pid_m,
                   pid_n, lo, hi, BM, BN, BK, EVEN_K)
        offs = tl.arange(0, BM)[:, None] * BN + tl.arange(0, BN)[None, :]
        tl.atomic_add(ws_ptr + sk_tile * BM * BN + offs, acc)
        cur += hi - lo


@triton.jit
def stream_k_fixup(ws_ptr, c_ptr, M, N, stride_cm, stride_cn, tiles_m, tiles_n, dp_tiles,
                   BM: tl.constexpr, BN: tl.constexpr, GROUP_M: tl.constexpr):
    sk_tile = tl.program_id(0)
    pid_m, pid_n = _tile_coords(dp_tiles + sk_tile, tiles_m, tiles_n, GROUP_M)
    offs = tl.arange(0, BM)[:, None] * BN + tl.arange(0, BN)[None, :]
    acc = tl.load(ws_ptr + sk_tile * BM * BN + offs)
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
    ws = torch.zeros((max(p["sk_tiles"], 1), bm, bn), device=a.device, dtype=torch.float32)
    stream_k_kernel[(p["progs"],)](
        a, b, c, ws, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0),
        c.stride(1), p["tiles_m"], p["tiles_n"], p["dp_tiles"], p["iters_per_tile"],
        p["iters_per_prog"], p["extra_iters"], p["progs"], BM=bm, BN=bn, BK=cfg["BLOCK_K"],
        GROUP_M=cfg["GROUP_M"], EVEN_K=k % cfg["BLOCK_K"] == 0, num_warps=cfg["num_warps"],
        num_stages=cfg["num_stages"])
    if p["sk_tiles"]:
        stream_k_fixup[(p["sk_tiles"],)](
            ws, c, m, n, c.stride(0), c.stride(1), p["tiles_m"], p["tiles_n"], p["dp_tiles"],
            BM=bm, BN=bn, GROUP_M=cfg["GROUP_M"], num_warps=cfg["num_warps"])
    return c
