"""A 128 x 192 output tile for the Gluon persistent kernel, measured (issue 29, round 8):
96 tiles of 128 x 256 leave 36 of 132 SMs idle at 1000 x 3000 and 84 tiles 48 idle at 1536 x
1792; 128 x 192 tiles give 128 and 120 (one nearly full wave, no Stream-K fix-up). Triton and
Gluon tensors have power-of-two shapes, so the tile is two accumulators, 128 x 128 and 128 x
64, fed by one A stage and two B stages per K-iteration (two wgmma), each stored by its own
TMA store. A prototype here, not in the emitted scripts: this times it in a CUDA graph
against the planner's 128 x 256 kernel (the plain persistent one, data-parallel) and cuBLAS,
each checked against a float32 matmul first.

    python benchmarks/sk_tile192.py STREAM_K_SCRIPT [--out rows.json]
    python benchmarks/sk_tile192.py STREAM_K_SCRIPT --script-tiles [--out rows.json]

--script-tiles (round 9): instead of the prototype, the emitted script's own kernels for the
data-parallel-only tiles (planner.data_parallel_only: 128 x 192 and 192 x 128, Gluon,
SK_TILES=0, one CTA per tile at most) against its 128 x 256 data-parallel schedule and
cuBLAS, at the same shapes (rows for benchmarks/fit_tiles.py --dp-only).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_wait,
)
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

sys.path.insert(0, str(Path(__file__).resolve().parent))

from replan_table import _module, print_row  # noqa: E402

SHAPES = [(1000, 3000, 5000), (1536, 1792, 4096), (1000, 3000, 1024), (1792, 1536, 12288),
          (3000, 1000, 10000)]  # fmt: skip
# --aligned: the operands as views of storage whose rows are padded to 128 bytes (the same
# values, no copy timed): whether the misaligned rows of these shapes slow the TMA loads
# --script-tiles: also the two shapes where round 9's planner runs 128 x 192 on two waves
SCRIPT_SHAPES = SHAPES + [(2304, 2304, 9000), (999, 4865, 8191)]
ALIGNED_SHAPES = [(1000, 3000, 5000), (3000, 1000, 10000), (1000, 3000, 1024)]


def _aligned(t):
    """``t`` as a view of storage with rows padded to a multiple of 64 elements."""
    rows, cols = t.shape
    store = torch.empty((rows, -(-cols // 64) * 64), device=t.device, dtype=t.dtype)
    store[:, :cols] = t
    return store[:, :cols]


@gluon.jit
def _tile(tile, tiles_m, tiles_n, GROUP_M: gl.constexpr):
    per_group = GROUP_M * tiles_n
    first_m = (tile // per_group) * GROUP_M
    rows = gl.minimum(tiles_m - first_m, GROUP_M)
    return first_m + (tile % per_group) % rows, (tile % per_group) // rows


@gluon.jit
def _producer(
    a_desc,
    b1_desc,
    b2_desc,
    a_ring,
    b1_ring,
    b2_ring,
    ready,
    empty,
    tiles_m,
    tiles_n,
    k_iters,
    NUM_PROGS,
    GROUP_M: gl.constexpr,
):
    BM: gl.constexpr = a_desc.block_type.shape[0]
    BK: gl.constexpr = a_desc.block_type.shape[1]
    BN1: gl.constexpr = b1_desc.block_type.shape[1]
    BN2: gl.constexpr = b2_desc.block_type.shape[1]
    STAGES: gl.constexpr = a_ring.type.shape[0]
    nbytes: gl.constexpr = (a_desc.block_type.nbytes + b1_desc.block_type.nbytes
                            + b2_desc.block_type.nbytes)  # fmt: skip
    it = 0
    for tile in range(gl.program_id(0), tiles_m * tiles_n, NUM_PROGS):
        pid_m, pid_n = _tile(tile, tiles_m, tiles_n, GROUP_M)
        for ki in range(0, k_iters):
            s = it % STAGES
            mbarrier.wait(empty.index(s), ((it // STAGES) & 1) ^ 1)
            mbarrier.expect(ready.index(s), nbytes)
            tma.async_copy_global_to_shared(a_desc, [pid_m * BM, ki * BK], ready.index(s),
                                            a_ring.index(s))  # fmt: skip
            tma.async_copy_global_to_shared(b1_desc, [ki * BK, pid_n * (BN1 + BN2)],
                                            ready.index(s), b1_ring.index(s))  # fmt: skip
            tma.async_copy_global_to_shared(b2_desc, [ki * BK, pid_n * (BN1 + BN2) + BN1],
                                            ready.index(s), b2_ring.index(s))  # fmt: skip
            it += 1


@gluon.jit
def _consumer(
    c1_desc,
    c2_desc,
    a_ring,
    b1_ring,
    b2_ring,
    ready,
    empty,
    c1_smem,
    c2_smem,
    tiles_m,
    tiles_n,
    k_iters,
    NUM_PROGS,
    GROUP_M: gl.constexpr,
):
    BM: gl.constexpr = c1_desc.block_type.shape[0]
    BN1: gl.constexpr = c1_desc.block_type.shape[1]
    BN2: gl.constexpr = c2_desc.block_type.shape[1]
    STAGES: gl.constexpr = a_ring.type.shape[0]
    l1: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[gl.num_warps(), 1], instr_shape=[16, BN1, 16]
    )
    l2: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[gl.num_warps(), 1], instr_shape=[16, BN2, 16]
    )
    it = 0
    for tile in range(gl.program_id(0), tiles_m * tiles_n, NUM_PROGS):
        pid_m, pid_n = _tile(tile, tiles_m, tiles_n, GROUP_M)
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
        tma.store_wait(pendings=0)
        c1_smem.store(acc1.to(c1_desc.dtype))
        c2_smem.store(acc2.to(c2_desc.dtype))
        fence_async_shared()
        tma.async_copy_shared_to_global(c1_desc, [pid_m * BM, pid_n * (BN1 + BN2)], c1_smem)
        tma.async_copy_shared_to_global(c2_desc, [pid_m * BM, pid_n * (BN1 + BN2) + BN1],
                                        c2_smem)  # fmt: skip
    tma.store_wait(pendings=0)


@gluon.jit
def gemm192_kernel(
    a_desc,
    b1_desc,
    b2_desc,
    c1_desc,
    c2_desc,
    tiles_m,
    tiles_n,
    k_iters,
    NUM_PROGS,
    GROUP_M: gl.constexpr,
    STAGES: gl.constexpr,
    WS_LIST: gl.constexpr,
    num_warps: gl.constexpr,
):
    a_ring = gl.allocate_shared_memory(a_desc.dtype, [STAGES] + a_desc.block_type.shape,
                                       a_desc.layout)  # fmt: skip
    b1_ring = gl.allocate_shared_memory(b1_desc.dtype, [STAGES] + b1_desc.block_type.shape,
                                        b1_desc.layout)  # fmt: skip
    b2_ring = gl.allocate_shared_memory(b2_desc.dtype, [STAGES] + b2_desc.block_type.shape,
                                        b2_desc.layout)  # fmt: skip
    c1_smem = gl.allocate_shared_memory(c1_desc.dtype, c1_desc.block_type.shape, c1_desc.layout)
    c2_smem = gl.allocate_shared_memory(c2_desc.dtype, c2_desc.block_type.shape, c2_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(ready.index(i), count=1)
        mbarrier.init(empty.index(i), count=1)
    consumer = (c1_desc, c2_desc, a_ring, b1_ring, b2_ring, ready, empty, c1_smem, c2_smem,
                tiles_m, tiles_n, k_iters, NUM_PROGS, GROUP_M)  # fmt: skip
    producer = (a_desc, b1_desc, b2_desc, a_ring, b1_ring, b2_ring, ready, empty, tiles_m,
                tiles_n, k_iters, NUM_PROGS, GROUP_M)  # fmt: skip
    if WS_LIST:
        gl.warp_specialize([(_consumer, consumer), (_producer, producer)], [1], [24])
    else:
        gl.warp_specialize(consumer, _consumer, producer, [_producer], [1], [24])


def _desc(t, block):
    dtypes = {torch.float16: gl.float16, torch.bfloat16: gl.bfloat16}
    layout = gl.NVMMASharedLayout.get_default_for(list(block), dtypes[t.dtype])
    return TensorDescriptor.from_tensor(t, list(block), layout)


def gemm192(a, b, stages: int = 4, progs: int | None = None, ws_list: bool = True):
    """c = a @ b with 128 x (128 + 64) tiles, one CTA per SM (at most one per tile)."""
    m, k = a.shape
    n = b.shape[1]
    c = torch.empty((m, n), device=a.device, dtype=a.dtype)
    tiles_m, tiles_n = triton.cdiv(m, 128), triton.cdiv(n, 192)
    sms = torch.cuda.get_device_properties(a.device).multi_processor_count
    progs = min(progs or sms, tiles_m * tiles_n)
    gemm192_kernel[(progs,)](
        _desc(a, (128, 64)), _desc(b, (64, 128)), _desc(b, (64, 64)), _desc(c, (128, 128)),
        _desc(c, (128, 64)), tiles_m, tiles_n, triton.cdiv(k, 64), progs, GROUP_M=8,
        STAGES=stages, WS_LIST=ws_list, num_warps=8, maxnreg=168)  # fmt: skip
    return c


def _graph_ms(fn) -> float:
    import triton.testing

    return triton.testing.do_bench_cudagraph(fn, rep=60, return_mode="median")


def script_tiles(mod) -> list[dict]:
    """Rows of --script-tiles: per shape, cuBLAS and the script's gemm with each tile."""
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    base = {**mod.CONFIG, "BLOCK_K": 64, "num_warps": 8, "num_stages": 4, "GROUP_M": 8,
            "NUM_PROGS": sms, "GLUON": 1, "SK_TILES": 0}  # fmt: skip
    rows = []
    for m, n, k in SCRIPT_SHAPES:
        g = torch.Generator(device="cpu").manual_seed(0)
        x = torch.randn(m, k, generator=g).to("cuda", torch.bfloat16)
        y = torch.randn(k, n, generator=g).to("cuda", torch.bfloat16)
        ref = (x.float() @ y.float()).double()
        runs = {"cublas": lambda x=x, y=y: torch.matmul(x, y)}
        for bm, bn in ((128, 256), (128, 192), (192, 128)):
            cfg = {**base, "BLOCK_M": bm, "BLOCK_N": bn}
            runs[f"script {bm}x{bn}"] = lambda x=x, y=y, cfg=cfg: mod.gemm(x, y, cfg)
        row: dict = {"M": m, "N": n, "K": k, "aligned_rows": False}
        timed = {}
        for label, fn in runs.items():
            try:
                err = float((fn().double() - ref).norm() / ref.norm())
                row[f"{label} rel_error"] = err
                if err <= 1e-2:
                    timed[label] = []
                else:
                    row[label] = f"wrong ({err:.1e})"
            except Exception as exc:  # reported, not hidden
                row[label] = f"{type(exc).__name__}: {str(exc)[:300]}"
        for _ in range(3):  # interleaved rounds
            for label in timed:
                timed[label].append(_graph_ms(runs[label]) * 1e3)
        for label, t in timed.items():
            row[label] = statistics.median(t)
        rows.append(row)
        print_row(row)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("script")
    ap.add_argument("--out")
    ap.add_argument("--aligned", action="store_true", help="also time on 128-byte aligned rows")
    ap.add_argument(
        "--script-tiles",
        action="store_true",
        help="the script's data-parallel-only tiles instead of the prototype",
    )
    a = ap.parse_args()
    mod = _module(Path(a.script))
    if a.script_tiles:
        rows = script_tiles(mod)
        if a.out:
            Path(a.out).write_text(json.dumps(rows, indent=1))
        return
    ws_list = mod._WS_LIST
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    cfg256 = {**mod.CONFIG, "BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "num_warps": 8,
              "num_stages": 3, "GROUP_M": 8}  # fmt: skip
    rows = []
    cases = [(shape, False) for shape in SHAPES]
    cases += [(shape, True) for shape in ALIGNED_SHAPES] if a.aligned else []
    for (m, n, k), aligned in cases:
        g = torch.Generator(device="cpu").manual_seed(0)
        x = torch.randn(m, k, generator=g).to("cuda", torch.bfloat16)
        y = torch.randn(k, n, generator=g).to("cuda", torch.bfloat16)
        if aligned:
            x, y = _aligned(x), _aligned(y)
        ref = (x.float() @ y.float()).double()

        def plain256(x=x, y=y):
            c = torch.empty((x.shape[0], y.shape[1]), device="cuda", dtype=torch.bfloat16)
            hopper = mod.gluon_config(x, cfg256, 2)
            tiles = triton.cdiv(x.shape[0], 128) * triton.cdiv(y.shape[1], 256)
            mod.gluon_ws(x, y, c, hopper, min(sms, tiles))
            return c

        runs = {
            "cublas": lambda x=x, y=y: torch.matmul(x, y),
            "gluon 128x256 data-parallel": plain256,
            "gluon 128x192 4 stages": lambda x=x, y=y: gemm192(x, y, 4, ws_list=ws_list),
            "gluon 128x192 3 stages": lambda x=x, y=y: gemm192(x, y, 3, ws_list=ws_list),
        }
        row: dict = {"M": m, "N": n, "K": k, "aligned_rows": aligned,
                     "tiles_128x256": triton.cdiv(m, 128) * triton.cdiv(n, 256),
                     "tiles_128x192": triton.cdiv(m, 128) * triton.cdiv(n, 192)}  # fmt: skip
        timed = {}
        for label, fn in runs.items():
            try:
                err = float((fn().double() - ref).norm() / ref.norm())
                row[f"{label} rel_error"] = err
                if err <= 1e-2:
                    timed[label] = []
                else:
                    row[label] = f"wrong ({err:.1e})"
            except Exception as exc:  # reported, not hidden
                row[label] = f"{type(exc).__name__}: {str(exc)[:300]}"
        for _ in range(3):  # interleaved rounds
            for label in timed:
                timed[label].append(_graph_ms(runs[label]) * 1e3)
        for label, t in timed.items():
            row[label] = statistics.median(t)
        rows.append(row)
        print_row(row)
    if a.out:
        Path(a.out).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
