# ---- Gluon: warp-specialized persistent GEMM kernels on Hopper ---------------------------
# A producer warp issues TMA loads of A and B tiles into a STAGES-deep shared-memory ring
# (mbarriers: `ready` when a stage has landed, `empty` when its MMA has read it); the
# consumer warpgroups issue asynchronous wgmma on the stages as they land, persistent over
# their work, one CTA per SM. Work is a list of segments (a tile and a run of its
# K-iterations): whole tiles, tiles x K-splits (split-K partials), or data-parallel tiles
# then a Stream-K share of the remaining iterations. Both partitions walk the same
# segments. A finished tile's epilogue goes through shared memory and a TMA store that
# overlaps the next segment. Gluon does not run in Triton's interpreter: there (and off
# Hopper) the strategy's Triton kernel runs.
import functools  # noqa: E402

try:  # Gluon (Triton >= 3.4): the Hopper producer/consumer kernels
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
    def _ws_work(w, tiles_m, tiles_n, k_iters, per_split, GROUP_M: gl.constexpr):
        """Work item w -> (pid_m, pid_n, split, first and end K-iteration): the tiles of
        split 0 first, then of split 1, ..."""
        tiles = tiles_m * tiles_n
        pid_m, pid_n = _ws_tile(w % tiles, tiles_m, tiles_n, GROUP_M)
        split = w // tiles
        lo = split * per_split
        return pid_m, pid_n, split, lo, gl.minimum(lo + per_split, k_iters)

    @gluon.jit
    def _produce(a_desc, b_desc, a_ring, b_ring, ready, empty, pid_m, pid_n, lo, hi, it):
        """TMA loads of K-iterations [lo, hi) of tile (pid_m, pid_n) into the ring, each
        stage once the consumers have released it; returns the ring position after them."""
        BM: gl.constexpr = a_desc.block_type.shape[0]
        BK: gl.constexpr = a_desc.block_type.shape[1]
        BN: gl.constexpr = b_desc.block_type.shape[1]
        STAGES: gl.constexpr = a_ring.type.shape[0]
        nbytes: gl.constexpr = a_desc.block_type.nbytes + b_desc.block_type.nbytes
        for ki in range(lo, hi):
            s = it % STAGES
            # (barriers start in phase 1 complete: the first pass finds every stage free)
            mbarrier.wait(empty.index(s), ((it // STAGES) & 1) ^ 1)
            mbarrier.expect(ready.index(s), nbytes)
            tma.async_copy_global_to_shared(a_desc, [pid_m * BM, ki * BK], ready.index(s),
                                            a_ring.index(s))
            tma.async_copy_global_to_shared(b_desc, [ki * BK, pid_n * BN], ready.index(s),
                                            b_ring.index(s))
            it += 1
        return it

    @gluon.jit
    def _consume(a_ring, b_ring, ready, empty, lo, hi, it, acc):
        """Async wgmma over K-iterations [lo, hi) as their stages land (one MMA in flight),
        releasing each stage once the MMA after it is issued; returns the accumulator and
        the ring position after them."""
        STAGES: gl.constexpr = a_ring.type.shape[0]
        for ki in range(lo, hi):
            s = it % STAGES
            mbarrier.wait(ready.index(s), (it // STAGES) & 1)
            acc = warpgroup_mma(a_ring.index(s), b_ring.index(s), acc, is_async=True)
            acc = warpgroup_mma_wait(num_outstanding=1, deps=(acc,))
            # the MMA before this one is done: its stage goes back to the producer
            mbarrier.arrive(empty.index((it + STAGES - 1) % STAGES), count=1, pred=ki > lo)
            it += 1
        acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
        mbarrier.arrive(empty.index((it + STAGES - 1) % STAGES), count=1, pred=hi > lo)
        return acc, it

    @gluon.jit
    def _store(c_desc, c_smem, acc, row, col):
        """The tile through shared memory and a TMA store (left in flight)."""
        tma.store_wait(pendings=0)  # (the previous tile's store has left c_smem)
        c_smem.store(acc.to(c_desc.dtype))
        fence_async_shared()
        tma.async_copy_shared_to_global(c_desc, [row, col], c_smem)

    @gluon.jit
    def _store_parts(c_desc, c_smem, acc, row, col):
        """The tile through shared memory and TMA stores, whole, or where C's block is half
        the tile's width (EPI_SPLIT 2) as two halves along N through that one half-sized
        buffer (the second half waits until the first has been read out of it), so that
        the ring gets the room of the other half (gluon_config)."""
        BN: gl.constexpr = acc.shape[1]
        if c_desc.block_type.shape[1] == BN:
            _store(c_desc, c_smem, acc, row, col)
        else:
            BM: gl.constexpr = acc.shape[0]
            HALF: gl.constexpr = BN // 2
            lo, hi = gl.split(gl.permute(gl.reshape(acc, [BM, 2, HALF]), [0, 2, 1]))
            _store(c_desc, c_smem, lo, row, col)
            _store(c_desc, c_smem, hi, row, col + HALF)

    @gluon.jit
    def _ws_producer(a_desc, b_desc, a_ring, b_ring, ready, empty, tiles_m, tiles_n,
                     k_iters, per_split, splits, NUM_PROGS, GROUP_M: gl.constexpr):
        it = 0
        for w in range(gl.program_id(0), tiles_m * tiles_n * splits, NUM_PROGS):
            pid_m, pid_n, split, lo, hi = _ws_work(w, tiles_m, tiles_n, k_iters, per_split,
                                                   GROUP_M)
            it = _produce(a_desc, b_desc, a_ring, b_ring, ready, empty, pid_m, pid_n, lo, hi,
                          it)

    @gluon.jit
    def _ws_consumer(c_desc, c_ptr, n_cols, a_ring, b_ring, ready, empty, c_smem, tiles_m,
                     tiles_n, k_iters, per_split, splits, split_rows, NUM_PROGS,
                     GROUP_M: gl.constexpr):
        """Each work item's tile; split s writes its partial tile ``s * split_rows`` rows
        down: through shared memory and TMA, or (fp32 partials) straight from the registers
        to ``c_ptr`` (row stride ``n_cols``), leaving shared memory to the ring."""
        DIRECT: gl.constexpr = c_desc.dtype == gl.float32
        BM: gl.constexpr = c_desc.block_type.shape[0]
        BN: gl.constexpr = c_desc.block_type.shape[1]
        layout: gl.constexpr = gl.NVMMADistributedLayout(
            version=[3, 0], warps_per_cta=[gl.num_warps(), 1], instr_shape=[16, BN, 16])
        rows = gl.arange(0, BM, layout=gl.SliceLayout(1, layout))
        cols = gl.arange(0, BN, layout=gl.SliceLayout(0, layout))
        it = 0
        for w in range(gl.program_id(0), tiles_m * tiles_n * splits, NUM_PROGS):
            pid_m, pid_n, split, lo, hi = _ws_work(w, tiles_m, tiles_n, k_iters, per_split,
                                                   GROUP_M)
            acc = gl.zeros((BM, BN), dtype=gl.float32, layout=layout)
            acc, it = _consume(a_ring, b_ring, ready, empty, lo, hi, it, acc)
            if DIRECT:
                r = (split * split_rows + pid_m * BM + rows).to(gl.int64)
                c = pid_n * BN + cols
                mask = (r[:, None] >= 0) & (c[None, :] < n_cols)
                gl.store(c_ptr + r[:, None] * n_cols + c[None, :], acc, mask=mask)
            else:
                _store(c_desc, c_smem, acc, split * split_rows + pid_m * BM, pid_n * BN)
        tma.store_wait(pendings=0)

    @gluon.jit
    def _rings(a_desc, b_desc, c_desc, STAGES: gl.constexpr, C_SMEM: gl.constexpr = True):
        a_ring = gl.allocate_shared_memory(a_desc.dtype, [STAGES] + a_desc.block_type.shape,
                                           a_desc.layout)
        b_ring = gl.allocate_shared_memory(b_desc.dtype, [STAGES] + b_desc.block_type.shape,
                                           b_desc.layout)
        if C_SMEM:
            c_smem = gl.allocate_shared_memory(c_desc.dtype, c_desc.block_type.shape,
                                               c_desc.layout)
        else:  # (the output goes straight from the registers: a placeholder)
            c_smem = a_ring
        ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        for i in gl.static_range(STAGES):
            mbarrier.init(ready.index(i), count=1)
            mbarrier.init(empty.index(i), count=1)
        return a_ring, b_ring, c_smem, ready, empty

    @gluon.jit
    def ws_gemm_kernel(a_desc, b_desc, c_desc, c_ptr, n_cols, tiles_m, tiles_n, k_iters,
                       per_split, splits, split_rows, NUM_PROGS, GROUP_M: gl.constexpr,
                       STAGES: gl.constexpr, WS_LIST: gl.constexpr, num_warps: gl.constexpr):
        # (fp32 split-K partials go from the registers: no output tile in shared memory)
        a_ring, b_ring, c_smem, ready, empty = _rings(a_desc, b_desc, c_desc, STAGES,
                                                      c_desc.dtype != gl.float32)
        consumer = (c_desc, c_ptr, n_cols, a_ring, b_ring, ready, empty, c_smem, tiles_m,
                    tiles_n, k_iters, per_split, splits, split_rows, NUM_PROGS, GROUP_M)
        producer = (a_desc, b_desc, a_ring, b_ring, ready, empty, tiles_m, tiles_n, k_iters,
                    per_split, splits, NUM_PROGS, GROUP_M)
        if WS_LIST:
            gl.warp_specialize([(_ws_consumer, consumer), (_ws_producer, producer)], [1], [24])
        else:
            gl.warp_specialize(consumer, _ws_consumer, producer, [_ws_producer], [1], [24])

    # -- a data-parallel-only tile whose BLOCK_N is not a power of two (128 x 192; planner's
    # data_parallel_only): two accumulators, BN1 (a power of two) and BN2 columns, fed from
    # one A stage and two B stages per K-iteration (two wgmma), each stored by its own TMA
    # store; whole tiles only, one CTA per SM (benchmarks/sk_tile192.py's prototype, round 8)
    @gluon.jit
    def _dp2_producer(a_desc, b1_desc, b2_desc, a_ring, b1_ring, b2_ring, ready, empty,
                      tiles_m, tiles_n, k_iters, NUM_PROGS, GROUP_M: gl.constexpr):
        BM: gl.constexpr = a_desc.block_type.shape[0]
        BK: gl.constexpr = a_desc.block_type.shape[1]
        BN1: gl.constexpr = b1_desc.block_type.shape[1]
        BN2: gl.constexpr = b2_desc.block_type.shape[1]
        STAGES: gl.constexpr = a_ring.type.shape[0]
        nbytes: gl.constexpr = (a_desc.block_type.nbytes + b1_desc.block_type.nbytes
                                + b2_desc.block_type.nbytes)
        it = 0
        for tile in range(gl.program_id(0), tiles_m * tiles_n, NUM_PROGS):
            pid_m, pid_n = _ws_tile(tile, tiles_m, tiles_n, GROUP_M)
            for ki in range(0, k_iters):
                s = it % STAGES
                mbarrier.wait(empty.index(s), ((it // STAGES) & 1) ^ 1)
                mbarrier.expect(ready.index(s), nbytes)
                tma.async_copy_global_to_shared(a_desc, [pid_m * BM, ki * BK], ready.index(s),
                                                a_ring.index(s))
                tma.async_copy_global_to_shared(b1_desc, [ki * BK, pid_n * (BN1 + BN2)],
                                                ready.index(s), b1_ring.index(s))
                tma.async_copy_global_to_shared(b2_desc, [ki * BK, pid_n * (BN1 + BN2) + BN1],
                                                ready.index(s), b2_ring.index(s))
                it += 1

    @gluon.jit
    def _dp2_consumer(c1_desc, c2_desc, a_ring, b1_ring, b2_ring, ready, empty, c1_smem,
                      c2_smem, tiles_m, tiles_n, k_iters, NUM_PROGS, GROUP_M: gl.constexpr):
        BM: gl.constexpr = c1_desc.block_type.shape[0]
        BN1: gl.constexpr = c1_desc.block_type.shape[1]
        BN2: gl.constexpr = c2_desc.block_type.shape[1]
        STAGES: gl.constexpr = a_ring.type.shape[0]
        l1: gl.constexpr = gl.NVMMADistributedLayout(
            version=[3, 0], warps_per_cta=[gl.num_warps(), 1], instr_shape=[16, BN1, 16])
        l2: gl.constexpr = gl.NVMMADistributedLayout(
            version=[3, 0], warps_per_cta=[gl.num_warps(), 1], instr_shape=[16, BN2, 16])
        it = 0
        for tile in range(gl.program_id(0), tiles_m * tiles_n, NUM_PROGS):
            pid_m, pid_n = _ws_tile(tile, tiles_m, tiles_n, GROUP_M)
            acc1 = gl.zeros((BM, BN1), dtype=gl.float32, layout=l1)
            acc2 = gl.zeros((BM, BN2), dtype=gl.float32, layout=l2)
            for ki in range(0, k_iters):
                s = it % STAGES
                mbarrier.wait(ready.index(s), (it // STAGES) & 1)
                acc1 = warpgroup_mma(a_ring.index(s), b1_ring.index(s), acc1, is_async=True)
                acc2 = warpgroup_mma(a_ring.index(s), b2_ring.index(s), acc2, is_async=True)
                # this iteration's two MMAs may run on; the previous iteration's are done
                acc1, acc2 = warpgroup_mma_wait(num_outstanding=2, deps=(acc1, acc2))
                mbarrier.arrive(empty.index((it + STAGES - 1) % STAGES), count=1, pred=ki > 0)
                it += 1
            acc1, acc2 = warpgroup_mma_wait(num_outstanding=0, deps=(acc1, acc2))
            mbarrier.arrive(empty.index((it + STAGES - 1) % STAGES), count=1, pred=k_iters > 0)
            tma.store_wait(pendings=0)  # (the previous tile's stores have left c1/c2_smem)
            c1_smem.store(acc1.to(c1_desc.dtype))
            c2_smem.store(acc2.to(c2_desc.dtype))
            fence_async_shared()
            tma.async_copy_shared_to_global(c1_desc, [pid_m * BM, pid_n * (BN1 + BN2)], c1_smem)
            tma.async_copy_shared_to_global(c2_desc, [pid_m * BM, pid_n * (BN1 + BN2) + BN1],
                                            c2_smem)
        tma.store_wait(pendings=0)

    @gluon.jit
    def dp2_gemm_kernel(a_desc, b1_desc, b2_desc, c1_desc, c2_desc, tiles_m, tiles_n, k_iters,
                        NUM_PROGS, GROUP_M: gl.constexpr, STAGES: gl.constexpr,
                        WS_LIST: gl.constexpr, num_warps: gl.constexpr):
        a_ring = gl.allocate_shared_memory(a_desc.dtype, [STAGES] + a_desc.block_type.shape,
                                           a_desc.layout)
        b1_ring = gl.allocate_shared_memory(b1_desc.dtype, [STAGES] + b1_desc.block_type.shape,
                                            b1_desc.layout)
        b2_ring = gl.allocate_shared_memory(b2_desc.dtype, [STAGES] + b2_desc.block_type.shape,
                                            b2_desc.layout)
        c1_smem = gl.allocate_shared_memory(c1_desc.dtype, c1_desc.block_type.shape,
                                            c1_desc.layout)
        c2_smem = gl.allocate_shared_memory(c2_desc.dtype, c2_desc.block_type.shape,
                                            c2_desc.layout)
        ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        for i in gl.static_range(STAGES):
            mbarrier.init(ready.index(i), count=1)
            mbarrier.init(empty.index(i), count=1)
        consumer = (c1_desc, c2_desc, a_ring, b1_ring, b2_ring, ready, empty, c1_smem, c2_smem,
                    tiles_m, tiles_n, k_iters, NUM_PROGS, GROUP_M)
        producer = (a_desc, b1_desc, b2_desc, a_ring, b1_ring, b2_ring, ready, empty, tiles_m,
                    tiles_n, k_iters, NUM_PROGS, GROUP_M)
        if WS_LIST:
            gl.warp_specialize([(_dp2_consumer, consumer), (_dp2_producer, producer)], [1],
                               [24])
        else:
            gl.warp_specialize(consumer, _dp2_consumer, producer, [_dp2_producer], [1], [24])

    # the same with BLOCK_M not a power of two (192 x 128): the accumulators split the rows,
    # BM1 (a power of two) and BM2, from two A stages and one B stage per K-iteration; the
    # BM2-row one spread over the consumer warps as warpgroups side by side along N
    @gluon.jit
    def _dp2m_producer(a1_desc, a2_desc, b_desc, a1_ring, a2_ring, b_ring, ready, empty,
                       tiles_m, tiles_n, k_iters, NUM_PROGS, GROUP_M: gl.constexpr):
        BM1: gl.constexpr = a1_desc.block_type.shape[0]
        BM2: gl.constexpr = a2_desc.block_type.shape[0]
        BK: gl.constexpr = a1_desc.block_type.shape[1]
        BN: gl.constexpr = b_desc.block_type.shape[1]
        STAGES: gl.constexpr = a1_ring.type.shape[0]
        nbytes: gl.constexpr = (a1_desc.block_type.nbytes + a2_desc.block_type.nbytes
                                + b_desc.block_type.nbytes)
        it = 0
        for tile in range(gl.program_id(0), tiles_m * tiles_n, NUM_PROGS):
            pid_m, pid_n = _ws_tile(tile, tiles_m, tiles_n, GROUP_M)
            for ki in range(0, k_iters):
                s = it % STAGES
                mbarrier.wait(empty.index(s), ((it // STAGES) & 1) ^ 1)
                mbarrier.expect(ready.index(s), nbytes)
                tma.async_copy_global_to_shared(a1_desc, [pid_m * (BM1 + BM2), ki * BK],
                                                ready.index(s), a1_ring.index(s))
                tma.async_copy_global_to_shared(a2_desc, [pid_m * (BM1 + BM2) + BM1, ki * BK],
                                                ready.index(s), a2_ring.index(s))
                tma.async_copy_global_to_shared(b_desc, [ki * BK, pid_n * BN], ready.index(s),
                                                b_ring.index(s))
                it += 1

    @gluon.jit
    def _dp2m_consumer(c1_desc, c2_desc, a1_ring, a2_ring, b_ring, ready, empty, c1_smem,
                       c2_smem, tiles_m, tiles_n, k_iters, NUM_PROGS, GROUP_M: gl.constexpr):
        BM1: gl.constexpr = c1_desc.block_type.shape[0]
        BM2: gl.constexpr = c2_desc.block_type.shape[0]
        BN: gl.constexpr = c1_desc.block_type.shape[1]
        STAGES: gl.constexpr = a1_ring.type.shape[0]
        W2: gl.constexpr = BM2 // 16  # (warps along M of the BM2-row accumulator)
        l1: gl.constexpr = gl.NVMMADistributedLayout(
            version=[3, 0], warps_per_cta=[gl.num_warps(), 1], instr_shape=[16, BN, 16])
        l2: gl.constexpr = gl.NVMMADistributedLayout(
            version=[3, 0], warps_per_cta=[W2, gl.num_warps() // W2],
            instr_shape=[16, BN // (gl.num_warps() // W2), 16])
        it = 0
        for tile in range(gl.program_id(0), tiles_m * tiles_n, NUM_PROGS):
            pid_m, pid_n = _ws_tile(tile, tiles_m, tiles_n, GROUP_M)
            acc1 = gl.zeros((BM1, BN), dtype=gl.float32, layout=l1)
            acc2 = gl.zeros((BM2, BN), dtype=gl.float32, layout=l2)
            for ki in range(0, k_iters):
                s = it % STAGES
                mbarrier.wait(ready.index(s), (it // STAGES) & 1)
                acc1 = warpgroup_mma(a1_ring.index(s), b_ring.index(s), acc1, is_async=True)
                acc2 = warpgroup_mma(a2_ring.index(s), b_ring.index(s), acc2, is_async=True)
                acc1, acc2 = warpgroup_mma_wait(num_outstanding=2, deps=(acc1, acc2))
                mbarrier.arrive(empty.index((it + STAGES - 1) % STAGES), count=1, pred=ki > 0)
                it += 1
            acc1, acc2 = warpgroup_mma_wait(num_outstanding=0, deps=(acc1, acc2))
            mbarrier.arrive(empty.index((it + STAGES - 1) % STAGES), count=1, pred=k_iters > 0)
            tma.store_wait(pendings=0)
            c1_smem.store(acc1.to(c1_desc.dtype))
            c2_smem.store(acc2.to(c2_desc.dtype))
            fence_async_shared()
            tma.async_copy_shared_to_global(c1_desc, [pid_m * (BM1 + BM2), pid_n * BN], c1_smem)
            tma.async_copy_shared_to_global(c2_desc, [pid_m * (BM1 + BM2) + BM1, pid_n * BN],
                                            c2_smem)
        tma.store_wait(pendings=0)

    @gluon.jit
    def dp2m_gemm_kernel(a1_desc, a2_desc, b_desc, c1_desc, c2_desc, tiles_m, tiles_n,
                         k_iters, NUM_PROGS, GROUP_M: gl.constexpr, STAGES: gl.constexpr,
                         WS_LIST: gl.constexpr, num_warps: gl.constexpr):
        a1_ring = gl.allocate_shared_memory(a1_desc.dtype, [STAGES] + a1_desc.block_type.shape,
                                            a1_desc.layout)
        a2_ring = gl.allocate_shared_memory(a2_desc.dtype, [STAGES] + a2_desc.block_type.shape,
                                            a2_desc.layout)
        b_ring = gl.allocate_shared_memory(b_desc.dtype, [STAGES] + b_desc.block_type.shape,
                                           b_desc.layout)
        c1_smem = gl.allocate_shared_memory(c1_desc.dtype, c1_desc.block_type.shape,
                                            c1_desc.layout)
        c2_smem = gl.allocate_shared_memory(c2_desc.dtype, c2_desc.block_type.shape,
                                            c2_desc.layout)
        ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        for i in gl.static_range(STAGES):
            mbarrier.init(ready.index(i), count=1)
            mbarrier.init(empty.index(i), count=1)
        consumer = (c1_desc, c2_desc, a1_ring, a2_ring, b_ring, ready, empty, c1_smem, c2_smem,
                    tiles_m, tiles_n, k_iters, NUM_PROGS, GROUP_M)
        producer = (a1_desc, a2_desc, b_desc, a1_ring, a2_ring, b_ring, ready, empty, tiles_m,
                    tiles_n, k_iters, NUM_PROGS, GROUP_M)
        if WS_LIST:
            gl.warp_specialize([(_dp2m_consumer, consumer), (_dp2m_producer, producer)], [1],
                               [24])
        else:
            gl.warp_specialize(consumer, _dp2m_consumer, producer, [_dp2m_producer], [1], [24])

    # -- Stream-K: NUM_PROGS CTAs run dp_tiles whole tiles, then each takes a contiguous
    # share of the remaining tiles' K-iterations (the Triton kernel's schedule, below)
    @gluon.jit
    def _sk_share(iters_per_tile, iters_per_prog, extra_iters):
        """This CTA's Stream-K iterations [start, end) and its first and last tile: the last
        as ceil(end / iters_per_tile) - 1, so that an empty share (data-parallel only: end
        0) walks no segment (integer division truncates: (end - 1) // iters_per_tile is 0
        there, one segment of no iterations that stored a partial of zeros)."""
        pid = gl.program_id(0)
        start = pid * iters_per_prog + gl.minimum(pid, extra_iters)
        end = start + iters_per_prog + (pid < extra_iters).to(gl.int32)
        last = (end + iters_per_tile - 1) // iters_per_tile - 1
        return start, end, start // iters_per_tile, last

    @gluon.jit
    def _sk_segment(step, start, end, last, iters_per_tile):
        """The step-th segment, walked from the last tile to the first: the head a later
        CTA finishes is handed on first, the tile this CTA finishes comes last."""
        sk_tile = last - step
        lo = gl.maximum(start - sk_tile * iters_per_tile, 0)
        hi = gl.minimum(end - sk_tile * iters_per_tile, iters_per_tile)
        return sk_tile, lo, hi

    @gluon.jit
    def _sk_offsets(BM: gl.constexpr, BN: gl.constexpr, layout: gl.constexpr):
        """Offsets of a BM x BN fp32 partial tile in the accumulator's layout, made where a
        partial is written or read rather than held through every tile (as many registers
        as the accumulator)."""
        rows = gl.arange(0, BM, layout=gl.SliceLayout(1, layout))
        cols = gl.arange(0, BN, layout=gl.SliceLayout(0, layout))
        return rows[:, None] * BN + cols[None, :]

    @gluon.jit
    def _sk_producer(a_desc, b_desc, a_ring, b_ring, ready, empty, tiles_m, tiles_n,
                     dp_tiles, iters_per_tile, iters_per_prog, extra_iters, NUM_PROGS,
                     GROUP_M: gl.constexpr):
        it = 0
        for tile in range(gl.program_id(0), dp_tiles, NUM_PROGS):
            pid_m, pid_n = _ws_tile(tile, tiles_m, tiles_n, GROUP_M)
            it = _produce(a_desc, b_desc, a_ring, b_ring, ready, empty, pid_m, pid_n, 0,
                          iters_per_tile, it)
        start, end, first, last = _sk_share(iters_per_tile, iters_per_prog, extra_iters)
        for step in range(0, last - first + 1):
            sk_tile, lo, hi = _sk_segment(step, start, end, last, iters_per_tile)
            pid_m, pid_n = _ws_tile(dp_tiles + sk_tile, tiles_m, tiles_n, GROUP_M)
            it = _produce(a_desc, b_desc, a_ring, b_ring, ready, empty, pid_m, pid_n, lo, hi,
                          it)

    @gluon.jit
    def _sk_consumer(c_desc, ws_ptr, flag_ptr, a_ring, b_ring, ready, empty, c_smem, tiles_m,
                     tiles_n, dp_tiles, iters_per_tile, iters_per_prog, extra_iters,
                     NUM_PROGS, GROUP_M: gl.constexpr):
        """Whole tiles are stored; a tile shared by several CTAs is finished by the CTA
        holding its last iteration, which waits on the tile's counter for the earlier
        CTAs' fp32 partials and adds them in CTA order (deterministic)."""
        BM: gl.constexpr = c_desc.block_type.shape[0]
        BN: gl.constexpr = b_ring.type.shape[2]  # (the tile: C's block is BN / EPI_SPLIT)
        layout: gl.constexpr = gl.NVMMADistributedLayout(
            version=[3, 0], warps_per_cta=[gl.num_warps(), 1], instr_shape=[16, BN, 16])
        pid = gl.program_id(0)
        it = 0
        for tile in range(pid, dp_tiles, NUM_PROGS):
            pid_m, pid_n = _ws_tile(tile, tiles_m, tiles_n, GROUP_M)
            acc = gl.zeros((BM, BN), dtype=gl.float32, layout=layout)
            acc, it = _consume(a_ring, b_ring, ready, empty, 0, iters_per_tile, it, acc)
            _store_parts(c_desc, c_smem, acc, pid_m * BM, pid_n * BN)
        start, end, first, last = _sk_share(iters_per_tile, iters_per_prog, extra_iters)
        for step in range(0, last - first + 1):
            sk_tile, lo, hi = _sk_segment(step, start, end, last, iters_per_tile)
            pid_m, pid_n = _ws_tile(dp_tiles + sk_tile, tiles_m, tiles_n, GROUP_M)
            acc = gl.zeros((BM, BN), dtype=gl.float32, layout=layout)
            acc, it = _consume(a_ring, b_ring, ready, empty, lo, hi, it, acc)
            if hi < iters_per_tile:  # a later CTA finishes this tile: hand the partial on
                offs = _sk_offsets(BM, BN, layout)
                gl.store(ws_ptr + pid * BM * BN + offs, acc)
                gl.thread_barrier()  # (every warp's part is written before the release)
                gl.atomic_add(flag_ptr + sk_tile, 1, sem="release")
            else:
                if lo > 0:  # wait for and add the earlier CTAs' partials
                    it0 = sk_tile * iters_per_tile
                    big = extra_iters * (iters_per_prog + 1)
                    if it0 < big:
                        p_first = it0 // (iters_per_prog + 1)
                    else:
                        p_first = extra_iters + (it0 - big) // gl.maximum(iters_per_prog, 1)
                    while gl.atomic_add(flag_ptr + sk_tile, 0, sem="acquire") < pid - p_first:
                        pass
                    # plain loads: the acquire above (and the barrier after it) orders them
                    # after the partials' stores, and it invalidated this SM's L1 (.cg, the
                    # L2 only, ran 3-4 us slower per call on an H200: round 8)
                    offs = _sk_offsets(BM, BN, layout)
                    for p in range(p_first, pid):
                        acc += gl.load(ws_ptr + p * BM * BN + offs)
                _store_parts(c_desc, c_smem, acc, pid_m * BM, pid_n * BN)
        tma.store_wait(pendings=0)

    @gluon.jit
    def sk_gemm_kernel(a_desc, b_desc, c_desc, ws_ptr, flag_ptr, tiles_m, tiles_n, dp_tiles,
                       iters_per_tile, iters_per_prog, extra_iters, NUM_PROGS,
                       GROUP_M: gl.constexpr, STAGES: gl.constexpr, WS_LIST: gl.constexpr,
                       num_warps: gl.constexpr):
        a_ring, b_ring, c_smem, ready, empty = _rings(a_desc, b_desc, c_desc, STAGES)
        consumer = (c_desc, ws_ptr, flag_ptr, a_ring, b_ring, ready, empty, c_smem, tiles_m,
                    tiles_n, dp_tiles, iters_per_tile, iters_per_prog, extra_iters, NUM_PROGS,
                    GROUP_M)
        producer = (a_desc, b_desc, a_ring, b_ring, ready, empty, tiles_m, tiles_n, dp_tiles,
                    iters_per_tile, iters_per_prog, extra_iters, NUM_PROGS, GROUP_M)
        if WS_LIST:
            gl.warp_specialize([(_sk_consumer, consumer), (_sk_producer, producer)], [1], [24])
        else:
            gl.warp_specialize(consumer, _sk_consumer, producer, [_sk_producer], [1], [24])

    HAVE_GLUON = True
except Exception:  # (no Gluon in this Triton: the Triton kernel runs)
    HAVE_GLUON = False


@functools.lru_cache(maxsize=64)
def _smem_layout(block: tuple, dtype: torch.dtype):
    dtypes = {torch.float16: gl.float16, torch.bfloat16: gl.bfloat16, torch.float32: gl.float32}
    return gl.NVMMASharedLayout.get_default_for(list(block), dtypes[dtype])


def _descriptors(a, b, c, cfg):
    """TMA descriptors of A, B and C (or the partials) for the knobs' tiles (C's block
    BLOCK_N / EPI_SPLIT wide: the output stored in that many parts)."""
    bm, bn, bk = cfg["BLOCK_M"], cfg["BLOCK_N"], cfg["BLOCK_K"]
    cn = bn // cfg.get("EPI_SPLIT", 1)
    return [TensorDescriptor.from_tensor(t, list(block), _smem_layout(block, t.dtype))
            for t, block in ((a, (bm, bk)), (b, (bk, bn)), (c, (bm, cn)))]


@functools.lru_cache(maxsize=16)
def _device_facts(index: int) -> tuple[tuple[int, int], int]:
    """(compute capability, SM count) of a CUDA device, asked once."""
    props = torch.cuda.get_device_properties(index)
    return (props.major, props.minor), props.multi_processor_count


def sm_count(t: torch.Tensor) -> int:
    return _device_facts(t.device.index or 0)[1]


def _launch_options(cfg: dict) -> dict:
    warps = cfg["num_warps"]
    # the consumers' registers: (consumer warps + the producer's warpgroup) share 64K
    return dict(num_warps=warps, maxnreg=min(240, 65536 // ((warps + 4) * 32) // 8 * 8),
                GROUP_M=cfg["GROUP_M"], STAGES=cfg["num_stages"], WS_LIST=_WS_LIST)


def gluon_ws(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, cfg: dict, progs: int,
             splits: int = 1, per_split: int = 0) -> None:
    """The Gluon warp-specialized kernel on a Hopper GPU (cc 9.x) with the knobs of
    ``gluon_config``: c = a @ b, or with
    ``splits`` > 1 each split's fp32 partial (``per_split`` K-iterations) in rows
    [s * tiles_m * BLOCK_M, ...) of c (fp32 c: stored from the registers)."""
    m, n, k = a.shape[0], b.shape[1], a.shape[1]
    tiles_m, tiles_n = _tiles(m, n, cfg)
    k_iters = cdiv(k, cfg["BLOCK_K"])
    ws_gemm_kernel[(progs,)](
        *_descriptors(a, b, c, cfg), c, c.shape[1], tiles_m, tiles_n, k_iters,
        per_split or k_iters, splits, tiles_m * cfg["BLOCK_M"], progs, **_launch_options(cfg))


def two_parts(side: int) -> tuple[int, int]:
    """A side of a data-parallel-only tile as its two accumulators' sides: the largest
    power of two below it and the rest (192 -> 128, 64)."""
    first = 1 << (side.bit_length() - 1)
    return first, side - first


def gluon_dp2(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, cfg: dict, progs: int) -> None:
    """c = a @ b with the data-parallel-only tile of ``cfg`` (BLOCK_N or BLOCK_M not a power
    of two, planner.data_parallel_only) in two accumulators, whole tiles over ``progs``
    CTAs: split along N (128 x 192: dp2_gemm_kernel) or along M (192 x 128:
    dp2m_gemm_kernel)."""
    bm, bn, bk = cfg["BLOCK_M"], cfg["BLOCK_N"], cfg["BLOCK_K"]
    tiles_m, tiles_n = _tiles(a.shape[0], b.shape[1], cfg)
    if bn & (bn - 1):
        (bn1, bn2), kernel = two_parts(bn), dp2_gemm_kernel
        blocks = ((a, (bm, bk)), (b, (bk, bn1)), (b, (bk, bn2)), (c, (bm, bn1)), (c, (bm, bn2)))
    else:
        (bm1, bm2), kernel = two_parts(bm), dp2m_gemm_kernel
        blocks = ((a, (bm1, bk)), (a, (bm2, bk)), (b, (bk, bn)), (c, (bm1, bn)), (c, (bm2, bn)))
    descs = [TensorDescriptor.from_tensor(t, list(block), _smem_layout(block, t.dtype))
             for t, block in blocks]  # fmt: skip
    kernel[(progs,)](*descs, tiles_m, tiles_n, cdiv(a.shape[1], bk), progs,
                     **_launch_options(cfg))


def gluon_stream_k(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, cfg: dict,
                   p: dict) -> None:
    """The Gluon Stream-K kernel on a Hopper GPU: the schedule ``p`` of ``plan`` (its
    NUM_PROGS CTAs must all be resident: one per SM at most)."""
    ws = sk_workspace(p, cfg, a.device)
    flags = sk_flags(p, a.device)
    sk_gemm_kernel[(p["progs"],)](
        *_descriptors(a, b, c, cfg), ws, flags, p["tiles_m"], p["tiles_n"], p["dp_tiles"],
        p["iters_per_tile"], p["iters_per_prog"], p["extra_iters"], p["progs"],
        **_launch_options(cfg))


SMEM_BYTES = 227 * 1024  # Hopper: shared memory one CTA may use


def _rows_fit(bm: int, warps: int) -> bool:
    """BLOCK_M over the consumer warps in 16-row wgmma slices; a data-parallel-only BLOCK_M
    (192) as its two accumulators: the first over all warps, the second over warpgroups of
    4 warps along M side by side along N."""
    if not bm & (bm - 1):
        return bm % (16 * warps) == 0
    first, rest = two_parts(bm)
    return first % (16 * warps) == 0 and rest % 64 == 0 and warps % (rest // 16) == 0


def gluon_config(a: torch.Tensor, cfg: dict, out_bytes: int,
                 epi_split: bool = False) -> dict | None:
    """The knobs for the Gluon kernel on this GPU, or None where it does not run: Hopper (not
    ROCm: an MI300 reports capability 9 too), fp16/bf16, BLOCK_M rows over the consumer
    warps in 16-row wgmma slices, BLOCK_N a wgmma width, and the ring plus the output tile
    (``out_bytes`` per element; 0 for split-K partials, stored from the registers) in
    shared memory; num_stages drops (down to 2) where the chosen ring would not fit. With
    ``epi_split`` (the Stream-K kernel, which can store the output in two halves through a
    buffer of half the tile: EPI_SPLIT 2) a ring that fits only so keeps more stages."""
    bm, bn, bk = cfg["BLOCK_M"], cfg["BLOCK_N"], cfg["BLOCK_K"]
    if not (HAVE_GLUON and a.is_cuda and torch.version.hip is None
            and _device_facts(a.device.index or 0)[0][0] == 9
            and a.dtype in (torch.float16, torch.bfloat16) and cfg["num_warps"] in (4, 8)
            and _rows_fit(bm, cfg["num_warps"]) and bn <= 256 and bn % 16 == 0
            and bk % 16 == 0):  # fmt: skip
        return None
    stage = (bm * bk + bk * bn) * a.element_size()
    stages = min(cfg["num_stages"], (SMEM_BYTES - 1024 - bm * bn * out_bytes) // stage)
    if epi_split and bn % 32 == 0 and out_bytes:  # the output in halves: a deeper ring?
        halves = min(cfg["num_stages"], (SMEM_BYTES - 1024 - bm * bn * out_bytes // 2) // stage)
        if halves > stages:
            return {**cfg, "num_stages": halves, "EPI_SPLIT": 2}
    return {**cfg, "num_stages": stages} if stages >= 2 else None
