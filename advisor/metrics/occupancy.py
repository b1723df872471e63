"""Theoretical occupancy: resident CTAs per SM from registers, shared memory, warps, blocks.

CUDA rules as in cuda_occupancy.h (see docs/metrics.md):
  warps:     floor(maxWarpsPerSm / ceil(threads / 32))
  registers: per-warp allocation ceil(regs * 32 / 256) * 256, allocated per SM
             sub-partition (4 per SM):
             floor(floor((regsPerSm / 4) / regsPerWarp) * 4 / warpsPerBlock)
  shared:    per block ceil((static + dynamic + reserved) / 128) * 128 against the carve-out
             (sharedMemoryExecuted when the trace has it, else the SM maximum)
  blocks:    maxBlocksPerSm
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from advisor.data import gpu_facts
from advisor.metrics.grouping import row_groups
from advisor.metrics.keys import first_rows

REG_ALLOC_UNIT = 256  # registers per warp are allocated in units of 256
SMEM_ALLOC_UNIT = 128  # bytes
SUB_PARTITIONS = 4
LIMITERS = np.array(["warps", "registers", "shared_memory", "blocks"])


def ctas_per_sm(
    threads,
    registers,
    smem_per_block,
    smem_carveout,
    *,
    warp_size,
    max_warps_per_sm,
    max_blocks_per_sm,
    registers_per_sm,
    reserved_smem_per_block,
) -> tuple[np.ndarray, np.ndarray]:
    """Resident CTAs per SM and the limiting resource, element-wise over launches.

    Arguments are arrays (or scalars) per launch: threads per block, registers per thread,
    shared memory per block in bytes (static + dynamic), shared-memory carve-out in bytes.
    Returns (ctas, limiter); ctas is 0 when one block cannot fit at all.
    """
    threads = np.asarray(threads, dtype=np.int64)
    regs = np.asarray(registers, dtype=np.int64)
    smem = np.asarray(smem_per_block, dtype=np.int64)
    carve = np.asarray(smem_carveout, dtype=np.int64)
    warp_size = np.asarray(warp_size, dtype=np.int64)
    warps = np.maximum(-(-threads // warp_size), 1)

    by_warps = np.asarray(max_warps_per_sm, dtype=np.int64) // warps

    per_warp = -(-(regs * warp_size) // REG_ALLOC_UNIT) * REG_ALLOC_UNIT
    per_partition = np.asarray(registers_per_sm, dtype=np.int64) // SUB_PARTITIONS
    warps_per_partition = np.where(per_warp > 0, per_partition // np.maximum(per_warp, 1), 1 << 30)
    by_regs = np.where(regs > 0, warps_per_partition * SUB_PARTITIONS // warps, 1 << 30)

    need = smem + np.asarray(reserved_smem_per_block, dtype=np.int64)
    need = -(-need // SMEM_ALLOC_UNIT) * SMEM_ALLOC_UNIT
    by_smem = np.where(smem > 0, carve // np.maximum(need, 1), 1 << 30)

    by_blocks = np.broadcast_to(np.asarray(max_blocks_per_sm, dtype=np.int64), threads.shape)
    limits = np.stack(np.broadcast_arrays(by_warps, by_regs, by_smem, by_blocks))
    which = np.argmin(limits, axis=0)
    return limits.min(axis=0), LIMITERS[which]


CDNA_LIMITERS = np.array(["waves", "vgprs", "sgprs", "lds", "workgroups"])


def cdna_workgroups_per_cu(
    threads, vgprs, sgprs, lds, *, wave_size, max_waves_per_cu, lds_per_cu, max_workgroups,
    simds_per_cu=None,
) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """Resident workgroups per CU on AMD CDNA, element-wise (S SIMDs per CU: the trace's, else
    gpus.yaml's cdna section, 4; so are the VGPR, SGPR and barrier constants).

    waves/SIMD = min(max, floor(512 / align8(arch + accum VGPRs)), floor(800 / align16(SGPRs)));
    workgroups = min(floor(S * waves/SIMD * 64 / align64(threads)), floor(LDS per CU / LDS),
    16 if a workgroup has several waves (barriers) else the workgroup limit).
    vgprs < 0 means unknown: the result is NaN.
    """
    cdna = gpu_facts("cdna")
    simds = simds_per_cu or cdna["simds_per_cu"]
    threads = np.asarray(threads, dtype=np.float64)
    vgprs = np.asarray(vgprs, dtype=np.float64)
    sgprs = np.nan_to_num(np.asarray(sgprs, dtype=np.float64), nan=0.0)
    lds = np.asarray(lds, dtype=np.float64)
    cap = max_waves_per_cu // simds  # waves per SIMD the hardware allows
    vgpr_file, sgpr_file = cdna["vgprs_per_lane"], cdna["sgprs_per_simd"]
    by_vgpr = np.where(vgprs > 0, vgpr_file // np.maximum(np.ceil(vgprs / 8) * 8, 8), cap)
    by_sgpr = np.where(sgprs > 0, sgpr_file // np.maximum(np.ceil(sgprs / 16) * 16, 16), cap)
    aligned = np.maximum(np.ceil(threads / wave_size) * wave_size, wave_size)

    def workgroups(waves_per_simd):
        return np.floor(simds * np.minimum(waves_per_simd, cap) * wave_size / aligned)

    lds_limit = np.where(lds > 0, np.floor(lds_per_cu / np.maximum(lds, 1)), 1 << 30)
    barriers = cdna["barriers_per_cu"]
    wg_limit = np.where(aligned > wave_size, min(barriers, max_workgroups), max_workgroups)
    limits = np.stack(
        np.broadcast_arrays(
            workgroups(cap), workgroups(by_vgpr), workgroups(by_sgpr), lds_limit, wg_limit
        )
    )
    which = np.argmin(limits, axis=0)
    ctas = np.where(vgprs < 0, np.nan, limits.min(axis=0))
    return ctas, CDNA_LIMITERS[which]


LAUNCH_CONFIG = ["device", "block_x", "block_y", "block_z", "registers", "sgpr",
                 "static_smem", "dynamic_smem", "smem_executed"]  # fmt: skip


def kernel_occupancy(kernels: pd.DataFrame, gpus: dict) -> pd.DataFrame:
    """Per-launch ``ctas_per_sm``, ``limiter``, ``sm_count`` for a kernels table.

    ``gpus`` maps device id -> GpuSpec; launches on devices without a spec get NaN.
    Computed once per distinct launch configuration (a trace of millions of launches holds
    a few hundred), then spread to every launch.
    """
    config = kernels[[c for c in LAUNCH_CONFIG if c in kernels]]
    group = row_groups(config, list(config.columns))  # (= groupby(..., dropna=False).ngroup())
    first = first_rows(group)  # first launch of each configuration
    distinct = _occupancy(kernels.iloc[first], gpus)
    out = distinct.iloc[group]
    out.index = kernels.index
    return out


def _occupancy(kernels: pd.DataFrame, gpus: dict) -> pd.DataFrame:
    """``kernel_occupancy`` computed row by row (vectorized per device)."""
    out = pd.DataFrame(index=kernels.index)
    out["ctas_per_sm"] = np.nan
    out["limiter"] = None
    out["sm_count"] = np.nan
    for device, spec in gpus.items():
        rows = kernels["device"] == device
        if not rows.any():
            continue
        k = kernels.loc[rows]
        threads = k["block_x"] * k["block_y"] * k["block_z"]
        smem = k["static_smem"] + k["dynamic_smem"]
        if spec.vendor == "amd":
            ctas, limiter = cdna_workgroups_per_cu(
                threads.to_numpy(),
                k["registers"].to_numpy(),
                k["sgpr"].to_numpy() if "sgpr" in k else np.full(len(k), np.nan),
                smem.to_numpy(),
                wave_size=spec.warp_size,
                max_waves_per_cu=spec.max_warps_per_sm,
                lds_per_cu=spec.shared_mem_per_sm,
                max_workgroups=spec.max_blocks_per_sm,
                simds_per_cu=spec.simds_per_cu,
            )
        else:
            carve = k["smem_executed"].where(k["smem_executed"] > 0, spec.shared_mem_per_sm)
            ctas, limiter = ctas_per_sm(  # (unknown registers / shared memory: no limit)
                threads.to_numpy(),
                k["registers"].fillna(0).to_numpy(),
                smem.fillna(0).to_numpy(),
                carve.fillna(spec.shared_mem_per_sm).to_numpy(),
                warp_size=spec.warp_size,
                max_warps_per_sm=spec.max_warps_per_sm,
                max_blocks_per_sm=spec.max_blocks_per_sm,
                registers_per_sm=spec.registers_per_sm,
                reserved_smem_per_block=spec.reserved_shared_mem_per_block,
            )
        out.loc[rows, "ctas_per_sm"] = ctas
        out.loc[rows, "limiter"] = limiter
        out.loc[rows, "sm_count"] = spec.sm_count
    return out
