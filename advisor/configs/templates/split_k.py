# ---- strategy: split-K -----------------------------------------------------------------
# Each output tile gets SPLITS CTAs, each over a contiguous slice of the K-iterations; the
# fp32 partial sums are reduced in a second pass (ATOMIC=0, deterministic) or added with
# atomics into one fp32 buffer (ATOMIC=1) that the same pass then casts. With GLUON=1 (the
# planner's choice where it models that kernel faster and at least
# gluon_launch.min_model_us) a Hopper GPU
# computes the partials with the Gluon warp-specialized kernel above; GLUON=0 (and
# elsewhere): the Triton kernel.


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


def _plan(m: int, n: int, k: int, cfg: dict) -> tuple[int, int, int, int]:
    """(tiles_m, tiles_n, splits, K-iterations per split), no split left empty."""
    tiles_m, tiles_n = _tiles(m, n, cfg)
    k_iters = cdiv(k, cfg["BLOCK_K"])
    splits = max(1, min(cfg["SPLITS"], k_iters))
    per_split = cdiv(k_iters, splits)
    return tiles_m, tiles_n, cdiv(k_iters, per_split), per_split


def _reduce(part: torch.Tensor, m: int, n: int, splits: int, stride: int, dtype) -> torch.Tensor:
    c = torch.empty((m, n), device=part.device, dtype=dtype)
    block = 1024
    split_k_reduce[(cdiv(m * n, block),)](part, c, m * n, splits, stride, BLOCK=block,
                                                 num_warps=4)
    return c


def gemm(a: torch.Tensor, b: torch.Tensor, cfg: dict) -> torch.Tensor:
    cfg = power_of_two_tile(cfg)  # (the planner never splits a data-parallel-only tile)
    hopper = cfg["GLUON"] and not cfg["ATOMIC"] and gluon_config(a, cfg, 0)
    if hopper:  # (TMA needs 16-byte row strides only: fewer shapes are copied to pad)
        return padded(_gemm_gluon, TMA_ALIGN)(a, b, hopper)
    return padded(_gemm_triton)(a, b, cfg)


def _gemm_gluon(a: torch.Tensor, b: torch.Tensor, cfg: dict) -> torch.Tensor:
    """The warp-specialized TMA/wgmma kernel computes the partials (split s in rows
    [s * tiles_m * BLOCK_M, ...) of one fp32 buffer), then the reduce pass."""
    m, n, k = a.shape[0], b.shape[1], a.shape[1]
    tiles_m, tiles_n, splits, per_split = _plan(m, n, k, cfg)
    rows = tiles_m * cfg["BLOCK_M"]
    part = torch.empty((splits * rows, n), device=a.device, dtype=torch.float32)
    progs = min(sm_count(a), tiles_m * tiles_n * splits)
    gluon_ws(a, b, part, cfg, progs, splits, per_split)
    return _reduce(part, m, n, splits, rows * n, a.dtype)


def _gemm_triton(a: torch.Tensor, b: torch.Tensor, cfg: dict) -> torch.Tensor:
    m, k = a.shape
    n = b.shape[1]
    bm, bn, bk = cfg["BLOCK_M"], cfg["BLOCK_N"], cfg["BLOCK_K"]
    tiles_m, tiles_n, splits, per_split = _plan(m, n, k, cfg)
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
    return _reduce(part, m, n, 1 if atomic else splits, part.stride(0), a.dtype)
