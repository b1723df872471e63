"""Occupancy hand cases (H200: 64 warps, 32 blocks, 65536 regs, 233472 B smem per SM)."""

from advisor.metrics.occupancy import ctas_per_sm

H200 = dict(
    warp_size=32,
    max_warps_per_sm=64,
    max_blocks_per_sm=32,
    registers_per_sm=65536,
    reserved_smem_per_block=1024,
)


def one(threads, regs, smem, carve=233472, **over):
    ctas, limiter = ctas_per_sm([threads], [regs], [smem], [carve], **{**H200, **over})
    return int(ctas[0]), str(limiter[0])


def test_tail_gemm_config_from_the_h200_trace():
    # 256 threads = 8 warps, 196 regs: per warp ceil(196*32/256)*256 = 25*256 = 6400;
    # per sub-partition 16384 // 6400 = 2 warps -> 8 warps/SM -> 1 block.
    # smem: 147456 + 1024 = 148480 -> 233472 // 148480 = 1 block. Both limit to 1.
    assert one(256, 196, 147456)[0] == 1


def test_underfilled_gemm_config_from_the_h200_trace():
    # 128 threads = 4 warps, 204 regs: ceil(204*32/256) = 26 -> 6656 per warp;
    # 16384 // 6656 = 2 per sub-partition -> 8 warps -> 2 blocks; smem 99328 -> 2 blocks.
    assert one(128, 204, 98304)[0] == 2


def test_warp_limit():
    # 1024 threads = 32 warps; 64 // 32 = 2; 16 regs and no smem do not limit.
    assert one(1024, 16, 0) == (2, "warps")


def test_block_limit():
    # 32 threads, tiny regs, no smem: 64 warps would allow 64, the block limit is 32.
    assert one(32, 8, 0) == (32, "blocks")


def test_register_limit():
    # 256 threads, 128 regs: per warp 4096; 16384 // 4096 = 4 per partition -> 16 warps
    # -> 2 blocks of 8 warps (warps alone would allow 8).
    assert one(256, 128, 0) == (2, "registers")


def test_shared_memory_limit_and_carveout():
    # 48 KiB + 1 KiB reserved = 50176 B -> 233472 // 50176 = 4 blocks
    assert one(128, 32, 49152) == (4, "shared_memory")
    # with a 100 KiB carve-out (sharedMemoryExecuted) only 2 fit: 102400 // 50176 = 2
    assert one(128, 32, 49152, carve=102400) == (2, "shared_memory")


def test_block_that_cannot_fit_gives_zero():
    assert one(128, 32, 240000)[0] == 0


def test_cc86_limits():
    # RTX 3060 class: 48 warps, 16 blocks per SM; 256 threads -> 48 // 8 = 6 blocks
    assert one(256, 32, 0, max_warps_per_sm=48, max_blocks_per_sm=16) == (6, "warps")
