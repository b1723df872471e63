# ---- strategy: Stream-K (data-parallel waves + a stream-K remainder) --------------------
# NUM_PROGS CTAs first run whole tiles data-parallel (full waves), then share the
# K-iterations of the remaining tiles equally: each CTA takes a contiguous run of
# iterations, possibly spanning tile boundaries. Tiles it covers whole are stored at once;
# a tile shared by several CTAs is finished by the CTA holding its last iteration, which
# waits on a per-tile counter for the others' fp32 partials and adds them in CTA order
# (deterministic). All NUM_PROGS CTAs must be resident at once (NUM_PROGS <= SMs x CTAs/SM).
# How many tiles go to Stream-K is the policy SK_TILES (Stream-K++'s policies, chosen per
# shape by the planner: 0 data-parallel only, 1 / 2 the partial wave's tiles / one more full
# wave too, so each CTA gets under one / one to two tiles' iterations, -1 every tile).
# With GLUON=1 (the planner's choice where it models that kernel faster and at least
# gluon_launch.min_model_us) a Hopper GPU runs the same schedule in the Gluon
# warp-specialized kernel above, one CTA per SM; GLUON=0 (and elsewhere): the Triton kernel
# below. A 128 x 192 tile (planner.data_parallel_only) runs whole tiles only, in the Gluon
# two-accumulator kernel; elsewhere as 128 x 256 (planner.power_of_two_tile).


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
    # ceil(end / iters_per_tile) - 1: an empty share (data-parallel only: end 0) walks no
    # segment (integer division truncates: (end - 1) // iters_per_tile is 0 there, one
    # segment of no iterations that stored a partial of zeros and raised a flag)
    last = (end + iters_per_tile - 1) // iters_per_tile - 1
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
                for p in range(p_first, pid):  # (plain loads after the acquire)
                    acc += tl.load(ws_ptr + p * BM * BN + offs)
            _store_tile(c_ptr, acc, M, N, stride_cm, stride_cn, pid_m, pid_n, BM, BN, False)


def plan(m: int, n: int, k: int, cfg: dict) -> dict:
    """Split tiles into data-parallel full waves and a stream-K remainder, as the Stream-K
    policy SK_TILES says (the planner's sk_data_parallel_tiles: 0 data-parallel only, 1 or 2
    the last one or two waves' tiles in Stream-K, -1 all of them)."""
    tiles_m, tiles_n = _tiles(m, n, cfg)
    tiles = tiles_m * tiles_n
    iters_per_tile = cdiv(k, cfg["BLOCK_K"])
    progs = min(cfg["NUM_PROGS"], tiles * iters_per_tile)
    dp_tiles = sk_data_parallel_tiles(tiles, progs, cfg.get("SK_TILES", 2))
    if dp_tiles == tiles:  # data-parallel only: one CTA per tile at most (no idle CTAs)
        progs = min(progs, tiles)
    sk_iters = (tiles - dp_tiles) * iters_per_tile
    return dict(tiles_m=tiles_m, tiles_n=tiles_n, progs=progs, dp_tiles=dp_tiles,
                sk_tiles=tiles - dp_tiles, iters_per_tile=iters_per_tile,
                iters_per_prog=sk_iters // progs, extra_iters=sk_iters % progs)


def gemm(a: torch.Tensor, b: torch.Tensor, cfg: dict) -> torch.Tensor:
    hopper = _hopper(a, cfg)
    if hopper and data_parallel_only(cfg["BLOCK_M"], cfg["BLOCK_N"]) and plan(
            a.shape[0], b.shape[1], a.shape[1], hopper)["sk_tiles"]:  # fmt: skip
        hopper = _hopper(a, power_of_two_tile(cfg))  # (a Stream-K share: below)
    if hopper:  # one CTA per SM; TMA needs 16-byte row strides only (fewer pad copies),
        # and a copy made anyway gets 128-byte rows (LINE_ALIGN); where A's and B's rows
        # both sit off 32-byte sectors, A may be copied to 128-byte rows (line_copy_a)
        if line_copy_a(Problem(a.shape[0], b.shape[1], a.shape[1], GPU), hopper["BLOCK_M"],
                       hopper["BLOCK_N"]):  # fmt: skip
            a = to_lines(a)
        return padded(_gemm_gluon, TMA_ALIGN, LINE_ALIGN)(a, b, hopper)
    # the two-accumulator tile runs whole tiles in the Gluon kernel only: the Triton
    # kernel (and a Stream-K share) runs it rounded up to powers of two (128 x 256)
    return padded(_gemm_triton)(a, b, power_of_two_tile(cfg))


def _hopper(a: torch.Tensor, cfg: dict) -> dict | None:
    """The Gluon kernel's knobs (gluon_config) with at most one CTA per SM, or None; a
    power-of-two tile whose ring fits its num_stages only with the output stored in halves
    runs so (EPI_SPLIT 2: 128 x 256 with 4 stages, not 3; round 12)."""
    split = not data_parallel_only(cfg["BLOCK_M"], cfg["BLOCK_N"])
    hopper = cfg["GLUON"] and gluon_config(a, cfg, a.element_size(), split)
    if hopper:
        hopper["NUM_PROGS"] = min(hopper["NUM_PROGS"], sm_count(a))
    return hopper or None


def _gemm_gluon(a: torch.Tensor, b: torch.Tensor, cfg: dict) -> torch.Tensor:
    c = torch.empty((a.shape[0], b.shape[1]), device=a.device, dtype=a.dtype)
    p = plan(a.shape[0], b.shape[1], a.shape[1], cfg)
    if data_parallel_only(cfg["BLOCK_M"], cfg["BLOCK_N"]):  # (whole tiles: gemm checked)
        gluon_dp2(a, b, c, cfg, p["progs"])
    else:
        gluon_stream_k(a, b, c, cfg, p)
    return c


def _gemm_triton(a: torch.Tensor, b: torch.Tensor, cfg: dict) -> torch.Tensor:
    m, k = a.shape
    n = b.shape[1]
    c = torch.empty((m, n), device=a.device, dtype=a.dtype)
    p = plan(m, n, k, cfg)
    bm, bn = cfg["BLOCK_M"], cfg["BLOCK_N"]
    ws = sk_workspace(p, cfg, a.device)  # one partial tile per CTA (none: data-parallel)
    flags = sk_flags(p, a.device)
    stream_k_kernel[(p["progs"],)](
        a, b, c, ws, flags, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
        c.stride(0), c.stride(1), p["tiles_m"], p["tiles_n"], p["dp_tiles"],
        p["iters_per_tile"], p["iters_per_prog"], p["extra_iters"], p["progs"],
        BM=bm, BN=bn, BK=cfg["BLOCK_K"], GROUP_M=cfg["GROUP_M"],
        EVEN_K=k % cfg["BLOCK_K"] == 0, num_warps=cfg["num_warps"],
        num_stages=cfg["num_stages"])
    return c
