# ---- strategy: a warp-specialized persistent GEMM --------------------------------------
# On Hopper (cc 9.x) with Triton's Gluon: a producer warp issues TMA loads of A and B tiles
# into a STAGES-deep shared-memory ring (mbarriers: `ready` when a stage has landed, `empty`
# when its MMA has read it), and the consumer warpgroups issue asynchronous wgmma on the
# stages as they land, persistent over the tiles (NUM_PROGS CTAs, one per SM). The epilogue
# stores each tile through shared memory with a TMA store that overlaps the next tile.
# WARP_SPECIALIZE=0 runs what it replaces: Triton's persistent TMA kernel (tl.dot, software
# pipelined); on cc >= 10 Triton splits that kernel's warps itself (WARP_SPECIALIZE=1);
# without a GPU (TRITON_INTERPRET=1) the Triton kernel checks the numerics.


@triton.jit
def tma_persistent_kernel(a_ptr, b_ptr, c_ptr, M, N, K, tiles_m, tiles_n, NUM_PROGS,
                          BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                          GROUP_M: tl.constexpr, WARP_SPECIALIZE: tl.constexpr):
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BM, BK])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[N, 1], block_shape=[BK, BN])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    k_iters = tl.cdiv(K, BK)
    for tile in tl.range(tl.program_id(0), tiles_m * tiles_n, NUM_PROGS, flatten=True,
                         warp_specialize=WARP_SPECIALIZE):
        pid_m, pid_n = _tile_coords(tile, tiles_m, tiles_n, GROUP_M)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for ki in range(k_iters):
            a = a_desc.load([pid_m * BM, ki * BK])
            b = b_desc.load([ki * BK, pid_n * BN])
            acc = tl.dot(a, b, acc)
        c_desc.store([pid_m * BM, pid_n * BN], acc.to(c_desc.dtype))


try:  # Gluon (Triton >= 3.4): the Hopper producer/consumer kernel
    import inspect

    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.language.nvidia.hopper import (
        fence_async_shared, mbarrier, tma, warpgroup_mma, warpgroup_mma_wait)
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    # warp_specialize's signature changed: a list of (function, args), or the default
    # partition's args and function, then the workers'
    _WS_LIST = "functions_and_args" in inspect.signature(gl.warp_specialize).parameters

    @gluon.jit
    def _ws_tile(tile, tiles_m, tiles_n, GROUP_M: gl.constexpr):
        per_group = GROUP_M * tiles_n
        first_m = (tile // per_group) * GROUP_M
        rows = gl.minimum(tiles_m - first_m, GROUP_M)
        return first_m + (tile % per_group) % rows, (tile % per_group) // rows

    @gluon.jit
    def _ws_producer(a_desc, b_desc, a_ring, b_ring, ready, empty, tiles_m, tiles_n,
                     k_iters, NUM_PROGS, GROUP_M: gl.constexpr):
        """One warp: TMA loads of each tile's K-slices into the ring, a stage at a time once
        the consumers have released it."""
        BM: gl.constexpr = a_desc.block_type.shape[0]
        BK: gl.constexpr = a_desc.block_type.shape[1]
        BN: gl.constexpr = b_desc.block_type.shape[1]
        STAGES: gl.constexpr = a_ring.type.shape[0]
        nbytes: gl.constexpr = a_desc.block_type.nbytes + b_desc.block_type.nbytes
        it = 0
        for tile in range(gl.program_id(0), tiles_m * tiles_n, NUM_PROGS):
            pid_m, pid_n = _ws_tile(tile, tiles_m, tiles_n, GROUP_M)
            for ki in range(k_iters):
                s = it % STAGES
                # (barriers start in phase 1 complete: the first pass finds every stage free)
                mbarrier.wait(empty.index(s), ((it // STAGES) & 1) ^ 1)
                mbarrier.expect(ready.index(s), nbytes)
                tma.async_copy_global_to_shared(a_desc, [pid_m * BM, ki * BK], ready.index(s),
                                                a_ring.index(s))
                tma.async_copy_global_to_shared(b_desc, [ki * BK, pid_n * BN], ready.index(s),
                                                b_ring.index(s))
                it += 1

    @gluon.jit
    def _ws_consumer(c_desc, a_ring, b_ring, ready, empty, c_smem, tiles_m, tiles_n, k_iters,
                     NUM_PROGS, GROUP_M: gl.constexpr):
        """The consumer warpgroups: async wgmma on each stage as it lands (one in flight),
        releasing the stage before it; the tile's epilogue through shared memory."""
        BM: gl.constexpr = c_desc.block_type.shape[0]
        BN: gl.constexpr = c_desc.block_type.shape[1]
        STAGES: gl.constexpr = a_ring.type.shape[0]
        layout: gl.constexpr = gl.NVMMADistributedLayout(
            version=[3, 0], warps_per_cta=[gl.num_warps(), 1], instr_shape=[16, BN, 16])
        it = 0
        for tile in range(gl.program_id(0), tiles_m * tiles_n, NUM_PROGS):
            pid_m, pid_n = _ws_tile(tile, tiles_m, tiles_n, GROUP_M)
            acc = gl.zeros((BM, BN), dtype=gl.float32, layout=layout)
            for ki in range(k_iters):
                s = it % STAGES
                mbarrier.wait(ready.index(s), (it // STAGES) & 1)
                acc = warpgroup_mma(a_ring.index(s), b_ring.index(s), acc, is_async=True)
                acc = warpgroup_mma_wait(num_outstanding=1, deps=(acc,))
                # the MMA before this one is done: its stage goes back to the producer
                mbarrier.arrive(empty.index((it + STAGES - 1) % STAGES), count=1, pred=ki > 0)
                it += 1
            acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
            mbarrier.arrive(empty.index((it + STAGES - 1) % STAGES), count=1)
            tma.store_wait(pendings=0)  # (the previous tile's store has left c_smem)
            c_smem.store(acc.to(c_desc.dtype))
            fence_async_shared()
            tma.async_copy_shared_to_global(c_desc, [pid_m * BM, pid_n * BN], c_smem)
        tma.store_wait(pendings=0)

    @gluon.jit
    def ws_gemm_kernel(a_desc, b_desc, c_desc, tiles_m, tiles_n, k_iters, NUM_PROGS,
                       GROUP_M: gl.constexpr, STAGES: gl.constexpr, WS_LIST: gl.constexpr,
                       num_warps: gl.constexpr):
        a_ring = gl.allocate_shared_memory(a_desc.dtype, [STAGES] + a_desc.block_type.shape,
                                           a_desc.layout)
        b_ring = gl.allocate_shared_memory(b_desc.dtype, [STAGES] + b_desc.block_type.shape,
                                           b_desc.layout)
        c_smem = gl.allocate_shared_memory(c_desc.dtype, c_desc.block_type.shape, c_desc.layout)
        ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        for i in gl.static_range(STAGES):
            mbarrier.init(ready.index(i), count=1)
            mbarrier.init(empty.index(i), count=1)
        consumer = (c_desc, a_ring, b_ring, ready, empty, c_smem, tiles_m, tiles_n, k_iters,
                    NUM_PROGS, GROUP_M)
        producer = (a_desc, b_desc, a_ring, b_ring, ready, empty, tiles_m, tiles_n, k_iters,
                    NUM_PROGS, GROUP_M)
        if WS_LIST:
            gl.warp_specialize([(_ws_consumer, consumer), (_ws_producer, producer)], [1], [24])
        else:
            gl.warp_specialize(consumer, _ws_consumer, producer, [_ws_producer], [1], [24])

    HAVE_GLUON = True
except Exception:  # (no Gluon in this Triton: the Triton kernel runs)
    HAVE_GLUON = False


def _gluon_ws(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, cfg: dict, progs: int):
    """The Gluon warp-specialized kernel on a Hopper GPU (cc 9.x)."""
    bm, bn, bk = cfg["BLOCK_M"], cfg["BLOCK_N"], cfg["BLOCK_K"]
    dtype = {torch.float16: gl.float16, torch.bfloat16: gl.bfloat16}[a.dtype]

    def desc(t, block):
        layout = gl.NVMMASharedLayout.get_default_for(block, dtype)
        return TensorDescriptor.from_tensor(t, block, layout)

    m, n, k = a.shape[0], b.shape[1], a.shape[1]
    tiles_m, tiles_n = _tiles(m, n, cfg)
    warps = cfg["num_warps"]
    # the consumers' registers: (consumer warps + the producer's warpgroup) share 64K
    maxnreg = min(240, 65536 // ((warps + 4) * 32) // 8 * 8)
    ws_gemm_kernel[(progs,)](
        desc(a, [bm, bk]), desc(b, [bk, bn]), desc(c, [bm, bn]), tiles_m, tiles_n,
        triton.cdiv(k, bk), progs, GROUP_M=cfg["GROUP_M"], STAGES=cfg["num_stages"],
        WS_LIST=_WS_LIST, num_warps=warps, maxnreg=maxnreg)


def _gluon_fits(a: torch.Tensor, cfg: dict) -> bool:
    """The Gluon kernel runs here: Hopper, fp16/bf16, BLOCK_M rows over the consumer warps
    in 16-row wgmma slices, BLOCK_N a wgmma width."""
    return (HAVE_GLUON and a.is_cuda and torch.cuda.get_device_capability(a.device)[0] == 9
            and a.dtype in (torch.float16, torch.bfloat16) and cfg["num_warps"] in (4, 8)
            and cfg["BLOCK_M"] % (16 * cfg["num_warps"]) == 0 and cfg["BLOCK_N"] <= 256
            and cfg["BLOCK_N"] % 16 == 0 and cfg["BLOCK_K"] % 16 == 0)  # fmt: skip


def _scratch(size: int, alignment: int, stream):
    return torch.empty(size, device="cuda", dtype=torch.int8)


@padded  # (TMA also needs 16-byte row strides)
def gemm(a: torch.Tensor, b: torch.Tensor, cfg: dict) -> torch.Tensor:
    m, k = a.shape
    n = b.shape[1]
    a, b = a.contiguous(), b.contiguous()
    if a.is_cuda:
        triton.set_allocator(_scratch)  # device-side descriptors need scratch memory
    tiles_m, tiles_n = _tiles(m, n, cfg)
    progs = min(cfg["NUM_PROGS"], tiles_m * tiles_n)
    ws = bool(cfg["WARP_SPECIALIZE"]) and a.is_cuda
    c = torch.empty((m, n), device=a.device, dtype=a.dtype)
    if ws and _gluon_fits(a, cfg):
        _gluon_ws(a, b, c, cfg, progs)
        return c
    tma_persistent_kernel[(progs,)](
        a, b, c, m, n, k, tiles_m, tiles_n, progs, BM=cfg["BLOCK_M"], BN=cfg["BLOCK_N"],
        BK=cfg["BLOCK_K"], GROUP_M=cfg["GROUP_M"], WARP_SPECIALIZE=ws,
        num_warps=cfg["num_warps"], num_stages=cfg["num_stages"])
    return c
