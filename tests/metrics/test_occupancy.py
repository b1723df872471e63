"""Occupancy hand cases (H200: 64 warps, 32 blocks, 65536 regs, 233472 B smem per SM)."""

import pytest

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


# AMD CDNA: 4 SIMDs per CU, 8 waves per SIMD (32 per CU), 64 KiB LDS per CU (MI300X)
def cdna(threads, vgprs, sgprs, lds, lds_per_cu=65536, max_waves=32):
    from advisor.metrics.occupancy import cdna_workgroups_per_cu

    ctas, limiter = cdna_workgroups_per_cu(
        [threads],
        [vgprs],
        [sgprs],
        [lds],
        wave_size=64,
        max_waves_per_cu=max_waves,
        lds_per_cu=lds_per_cu,
        max_workgroups=32,
    )
    return ctas[0], str(limiter[0])


def test_cdna_512_vgprs_and_64k_lds_give_one_workgroup():
    # 512 unified VGPRs -> floor(512 / 512) = 1 wave per SIMD; a 256-thread workgroup is 4
    # waves -> 4 SIMDs x 1 x 64 / 256 = 1 workgroup; 64 KiB LDS -> 65536 / 65536 = 1.
    assert cdna(256, 512, 16, 65536)[0] == 1


def test_cdna_limits():
    # small kernel: 8 waves/SIMD -> 4 * 8 * 64 / 256 = 8 workgroups, limited by waves
    assert cdna(256, 8, 16, 0) == (8, "waves")
    # 128 VGPRs: 512 / 128 = 4 waves/SIMD -> 4 workgroups of 256
    assert cdna(256, 128, 16, 0) == (4, "vgprs")
    # 100 SGPRs -> align16 = 112 -> 800 // 112 = 7 waves/SIMD -> 4*7*64/256 = 7
    assert cdna(256, 8, 100, 0) == (7, "sgprs")
    # 24 KiB LDS per workgroup on 64 KiB: 2
    assert cdna(256, 8, 16, 24576) == (2, "lds")
    # one-wave workgroups (64 threads): 4 * 8 = 32 fit by waves, the workgroup limit is 32
    assert cdna(64, 8, 16, 0)[0] == 32
    # multi-wave workgroups need a barrier each: at most 16 per CU (here waves give 16 too)
    assert cdna(128, 8, 16, 0)[0] == 16
    # unknown VGPRs (-1): no answer rather than a guess
    assert cdna(256, -1, 16, 0)[0] != cdna(256, -1, 16, 0)[0]  # NaN


def test_cdna_partial_single_wave_on_mi300x():
    # 256 workgroups of 256 threads (8 VGPRs) on 304 CUs at 8 per CU: slots 2432 ->
    # waves 0.105; at 1 per CU (512 VGPRs + 64 KiB LDS): 256 / 304 = 0.842, 84 % busy
    from builders import kernels

    from advisor.metrics.waves import launch_waves
    from advisor.trace.gpus import match_gpu

    k = kernels(
        [
            dict(
                start=0,
                end=1000,
                grid_x=256,
                block_x=256,
                registers=512,
                static_smem=65536,
                sgpr=16.0,
            )
        ]
    )
    w = launch_waves(k, {0: match_gpu("MI300X")}).iloc[0]
    assert w.ctas_per_sm == 1 and w.slots == 304
    assert round(w.waves, 3) == 0.842 and w.underfilled
    assert w.underfill_idle_ns == pytest.approx(1000 * (1 - 256 / 304))


def test_cdna_simds_per_cu_from_the_agent_record():
    # 256 threads = 4 waves of 64; 128 VGPRs -> 512 // 128 = 4 waves per SIMD.
    # 4 SIMDs (gpus.yaml's default): floor(4 SIMDs * 4 waves * 64 / 256) = 4 workgroups;
    # an agent record of 2 SIMDs per CU (16 waves per CU): floor(2 * 4 * 64 / 256) = 2.
    from advisor.metrics.occupancy import cdna_workgroups_per_cu

    common = dict(wave_size=64, lds_per_cu=65536, max_workgroups=32)
    four, why = cdna_workgroups_per_cu([256], [128], [0], [0], max_waves_per_cu=32, **common)
    two, _ = cdna_workgroups_per_cu(
        [256], [128], [0], [0], max_waves_per_cu=16, simds_per_cu=2, **common
    )
    assert (four[0], why[0], two[0]) == (4, "vgprs", 2)
