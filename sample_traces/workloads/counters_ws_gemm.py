"""warp_specialization reference GEMM emitted by advisor.

Where: gemm_kernel, range r, device 0

Finding (test): s

Estimated savings: 1.00 us (an estimate).

Run (numerics vs float64 matmul; median time and TFLOP/s vs torch.matmul):
    python 01_warp_specialization_gemm_kernel_dev0.py --check --bench
Another size:
    python 01_warp_specialization_gemm_kernel_dev0.py --m 512 --n 512 --k 4096 --check
On the CPU (Triton's interpreter, numerics only):
    TRITON_INTERPRET=1 python 01_warp_specialization_gemm_kernel_dev0.py --check --m 64 --n 64 --k 256
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
 'model_ns': 208300,
 'NUM_PROGS': 132,
 'WARP_SPECIALIZE': True,
 'strategy': 'warp_specialization',
 'M': 896,
 'N': 4864,
 'K': 8192,
 'trace_kernel_ns': 50000.0,
 'gpu': 'H200'}

# ---- planner: advisor/configs/knobs.py (the same search advisor ran) ----------------
import math  # noqa: E402
from dataclasses import dataclass  # noqa: E402


@dataclass(frozen=True)
class GpuSpec:
    """The GPU facts the planner reads (advisor.trace.model.GpuSpec's)."""

    name: str
    sm_count: int
    compute_capability: str
    max_warps_per_sm: int
    max_blocks_per_sm: int
    shared_mem_per_sm: int
    max_shared_mem_per_block: int
    reserved_shared_mem_per_block: int
    dense_fp16_tflops: float | None
    memory_bandwidth_gbs: float | None

    @property
    def cc_major(self) -> int | None:
        head = self.compute_capability.split(".")[0]
        return int(head) if head.isdigit() else None


GPU = GpuSpec(**{'name': 'H200',
 'sm_count': 132,
 'compute_capability': '9.0',
 'max_warps_per_sm': 64,
 'max_blocks_per_sm': 32,
 'shared_mem_per_sm': 233472,
 'max_shared_mem_per_block': 232448,
 'reserved_shared_mem_per_block': 1024,
 'dense_fp16_tflops': 989,
 'memory_bandwidth_gbs': 4800})


def gpu_facts(section: str) -> dict:
    """gpus.yaml's sections the planner reads (cost_model_fallback: rates for a GPU without
    datasheet numbers; gluon_launch: when the Gluon kernel runs;
    gemm_tiles: the tile table and cost-model terms fitted to measurements)."""
    return {'cost_model_fallback': {'dense_fp16_tflops': 989.0, 'memory_bandwidth_gbs': 3350.0},
 'gemm_tiles': {'fixed_us': {'split_k': {'gluon': 17.2, 'triton': 12.3},
                             'stream_k': {'gluon': 13.3, 'triton': 15.8}},
                'tiles': [[128, 256, 64, 8, 4, 0.652, 0.688],
                          [128, 256, 64, 8, 3, 0.651, 0.688],
                          [256, 128, 64, 8, 3, 0.578, 0.648],
                          [128, 128, 64, 4, 4, 0.568, 0.665],
                          [128, 128, 128, 8, 3, 0.568, 0.635],
                          [128, 128, 64, 8, 4, 0.558, 0.658],
                          [128, 128, 64, 8, 3, 0.545, 0.534],
                          [64, 128, 64, 4, 4, 0.503, 0.44],
                          [128, 64, 64, 4, 4, 0.482, 0.421],
                          [64, 64, 128, 4, 4, 0.386, 0.381],
                          [64, 64, 64, 4, 4, 0.358, 0.264]],
                'uneven_k_factor': 1.382},
 'gluon_launch': {'min_model_us': 60}}[section]


CALIBRATION = gpu_facts("gemm_tiles")
# (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages, efficiency of the Triton kernel,
#  efficiency of the Gluon kernel or None where it does not run the tile)
CANDIDATES = [tuple(row) for row in CALIBRATION["tiles"]]
KERNELS = ("triton", "gluon")
# elements the scripts pad row strides (K of A, N of B) to, per kernel: Triton vectorizes
# loads only along strides divisible by 16, TMA needs 16 bytes (the scripts' ROW_ALIGN and
# TMA_ALIGN are these)
PAD_ALIGN = {"triton": 16, "gluon": 8}
MIN_ITERS_PER_SPLIT = 8
MAX_SPLITS = 64
ELEMENT_BYTES = 2  # bf16/fp16 operands
GROUP_M = 8


class NoTileFits(ValueError):
    """No candidate tile of the planner fits the GPU (shared memory, warps, CTAs per SM)."""


@dataclass(frozen=True)
class Problem:
    """One GEMM to tune: shape and the GPU it runs on."""

    m: int
    n: int
    k: int
    gpu: GpuSpec

    @property
    def per_sm_flops(self) -> float:
        """FLOP/ns one SM sustains (datasheet dense 16-bit rate / SMs; for a GPU without
        one, gpus.yaml's cost_model_fallback)."""
        tflops = self.gpu.dense_fp16_tflops or gpu_facts("cost_model_fallback")["dense_fp16_tflops"]
        return tflops * 1e12 / self.gpu.sm_count / 1e9

    @property
    def bandwidth(self) -> float:
        """Memory bandwidth in B/ns (GB/s); gpus.yaml's cost_model_fallback when unknown."""
        fallback = gpu_facts("cost_model_fallback")["memory_bandwidth_gbs"]
        return float(self.gpu.memory_bandwidth_gbs or fallback)

    @property
    def kernels(self) -> tuple[str, ...]:
        """The kernels the scripts can run here: the Gluon one on Hopper (capability 9)."""
        return KERNELS if self.gpu.cc_major == 9 else KERNELS[:1]


def tile_ctas_per_sm(bm: int, bn: int, bk: int, warps: int, stages: int, gpu: GpuSpec) -> int:
    """Resident CTAs of a candidate: shared memory, warps and block limits."""
    smem = stages * (bm + bn) * bk * ELEMENT_BYTES + gpu.reserved_shared_mem_per_block
    if smem > gpu.max_shared_mem_per_block + gpu.reserved_shared_mem_per_block:
        return 0
    by_smem = gpu.shared_mem_per_sm // smem
    by_warps = gpu.max_warps_per_sm // warps
    return int(max(0, min(by_smem, by_warps, gpu.max_blocks_per_sm)))


def _launch_ns(ctas: int, iters: float, slots: int, per_sm: int, t_iter: float) -> float:
    return math.ceil(ctas / slots) * per_sm * iters * t_iter


def _round_up(x: int, align: int) -> int:
    return -(-x // align) * align


def _pad_ns(p: Problem, kernel: str) -> float:
    """Time of the copies that pad row strides (K of A, N of B) to the kernel's PAD_ALIGN
    elements, as the scripts' ``padded`` does: read + write at the bandwidth."""
    align = PAD_ALIGN[kernel]
    kp, np_ = _round_up(p.k, align), _round_up(p.n, align)
    copied = (p.m * p.k if kp != p.k else 0) + (p.k * p.n if (kp, np_) != (p.k, p.n) else 0)
    return 2 * copied * ELEMENT_BYTES / p.bandwidth


def _base(p: Problem, cand, kernel: str = "triton") -> dict | None:
    """A candidate tile for one kernel with what every strategy's model needs (None: the
    tile does not fit, or the kernel has no measured efficiency for it)."""
    bm, bn, bk, warps, stages, *effs = cand
    eff = effs[KERNELS.index(kernel)]
    c = tile_ctas_per_sm(bm, bn, bk, warps, stages, p.gpu)
    if c == 0 or not eff:
        return None
    if kernel == "gluon":
        c = 1  # persistent: one CTA per SM
    uneven = kernel == "triton" and _round_up(p.k, PAD_ALIGN[kernel]) % bk != 0
    tiles = math.ceil(p.m / bm) * math.ceil(p.n / bn)
    return dict(
        BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, num_warps=warps, num_stages=stages, GROUP_M=GROUP_M,
        kernel=kernel, ctas_per_sm=c, slots=c * p.gpu.sm_count, tiles=tiles,
        k_iters=math.ceil(p.k / bk),
        t_iter=2.0 * bm * bn * bk / (p.per_sm_flops * eff)
        * (CALIBRATION["uneven_k_factor"] if uneven else 1.0),
        uneven_k=uneven, pad_ns=_pad_ns(p, kernel),
    )  # fmt: skip


def _feasible(p: Problem, kernels: tuple[str, ...] = ("triton",)) -> list[dict]:
    """The candidates that fit on the GPU, per kernel in CANDIDATES order, as ``_base`` dicts
    (NoTileFits when none does)."""
    found = [b for kernel in kernels for cand in CANDIDATES
             if (b := _base(p, cand, kernel)) is not None]  # fmt: skip
    if not found:
        raise NoTileFits(
            f"no GEMM tile of the planner fits {p.gpu.name} ({p.gpu.shared_mem_per_sm} B shared "
            f"memory per SM, {p.gpu.max_shared_mem_per_block} B per block)"
        )
    return found


def _fixed_ns(strategy: str, kernel: str) -> float:
    """GPU time per call that does not scale with the work (launches, pipeline fill,
    epilogue, split-K's reduce launch), fitted per strategy and kernel; 0 where unmeasured."""
    return CALIBRATION["fixed_us"].get(strategy, {}).get(kernel, 0.0) * 1e3


def _cheapest(configs) -> dict:
    """The config with the lowest ``model_ns`` (the first one on a tie)."""
    return min(configs, key=lambda c: c["model_ns"])


def _data_parallel_ns(b: dict) -> float:
    """Modelled time of one tile per CTA, every K-iteration in its tile's CTA (ns)."""
    compute = _launch_ns(b["tiles"], b["k_iters"], b["slots"], b["ctas_per_sm"], b["t_iter"])
    return compute + b["pad_ns"]


def data_parallel(p: Problem) -> dict:
    """Best one-tile-per-CTA config (lowest modelled time, tail included)."""

    def modelled(b: dict) -> dict:
        waves = b["tiles"] / b["slots"]
        return dict(b, model_ns=_data_parallel_ns(b), waves=waves,
                    tail=1 - waves / math.ceil(waves))  # fmt: skip

    best = _cheapest(modelled(b) for b in _feasible(p))
    return _finish(best, "data_parallel", NUM_PROGS=best["slots"])


def split_k_ns(p: Problem, b: dict, splits: int) -> dict:
    """Modelled split-K time of tile ``b`` with ``splits`` K-slices (no slice left empty):
    partial GEMMs, then the two-pass reduction's fp32 partials written and read back and
    the output written, the padding copies and the fixed time."""
    per_split = math.ceil(b["k_iters"] / splits)
    used = math.ceil(b["k_iters"] / per_split)
    compute = _launch_ns(b["tiles"] * used, per_split, b["slots"], b["ctas_per_sm"], b["t_iter"])
    traffic = (2 * 4 * used + ELEMENT_BYTES) * p.m * p.n if used > 1 else 0
    model = _fixed_ns("split_k", b["kernel"]) + compute + traffic / p.bandwidth + b["pad_ns"]
    return dict(b, SPLITS=used, model_ns=model, waves=b["tiles"] * used / b["slots"])


def split_k(p: Problem) -> dict:
    """Tile, split count and kernel with the lowest modelled time (>= 8 K-iterations per
    split)."""

    def splits_of(b: dict):
        for splits in range(1, MAX_SPLITS + 1):
            if splits > 1 and math.ceil(b["k_iters"] / splits) < MIN_ITERS_PER_SPLIT:
                return
            yield split_k_ns(p, b, splits)

    best = _pick_kernel(p, splits_of)
    return _finish(best, "split_k", ATOMIC=0, GLUON=int(best["kernel"] == "gluon"))


def stream_k_ns(p: Problem, b: dict) -> dict:
    """Modelled Stream-K time of tile ``b``: all K-iterations spread evenly over the
    resident CTAs, plus the fix-up of the shared tiles (fp32 partial written and read
    back), the padding copies and the fixed time."""
    total = b["tiles"] * b["k_iters"]
    progs = min(b["slots"], total)
    per_prog = math.ceil(total / progs)
    compute = b["ctas_per_sm"] * per_prog * b["t_iter"]
    full = b["tiles"] // progs
    sk_tiles = b["tiles"] if full < 2 else b["tiles"] - (full - 1) * progs
    if b["tiles"] % progs == 0:
        sk_tiles = 0
    fixup = sk_tiles * b["BLOCK_M"] * b["BLOCK_N"] * 4 * 2
    model = _fixed_ns("stream_k", b["kernel"]) + compute + fixup / p.bandwidth + b["pad_ns"]
    return dict(b, model_ns=model, sk_tiles=sk_tiles, NUM_PROGS=progs)


def stream_k(p: Problem) -> dict:
    """Tile and kernel with the lowest modelled Stream-K time."""
    best = _pick_kernel(p, lambda b: [stream_k_ns(p, b)])
    return _finish(best, "stream_k", GLUON=int(best["kernel"] == "gluon"))


def _pick_kernel(p: Problem, configs_of) -> dict:
    """The cheapest config per kernel (``configs_of(base)`` yields a base tile's modelled
    configs); the Gluon one where it is modelled no slower than the Triton one and long
    enough to hide its launch (``gluon_knob``), else the Triton one."""
    best = {kernel: _cheapest(c for b in _feasible(p, (kernel,)) for c in configs_of(b))
            for kernel in p.kernels}  # fmt: skip
    gluon = best.get("gluon")
    if gluon and gluon_knob(gluon["model_ns"]) and gluon["model_ns"] <= best["triton"]["model_ns"]:
        return gluon
    return best["triton"]


def persistent(p: Problem) -> dict:
    """Data-parallel tile choice run as a persistent tile loop over SMs x CTAs/SM."""
    cfg = data_parallel(p)
    cfg["strategy"] = "persistent"
    return cfg


def tma_warp_specialized(p: Problem) -> dict:
    """Persistent TMA kernel: large tile, one CTA per SM, deep pipeline."""
    tile = (128, 256, 64, 8, 3) if p.n >= 256 else (128, 128, 64, 8, 4)
    cand = next(c for c in CANDIDATES if c[:5] == tile)
    b = _base(p, cand, p.kernels[-1])  # the Gluon kernel on Hopper
    if b is None:
        raise NoTileFits(
            f"the warp-specialized {tile[0]}x{tile[1]}x{tile[2]} tile ({tile[4]} stages) does "
            f"not fit {p.gpu.name} ({p.gpu.max_shared_mem_per_block} B shared memory per block)"
        )
    return _finish(
        dict(b, model_ns=_data_parallel_ns(b)),
        "warp_specialization",
        NUM_PROGS=p.gpu.sm_count,
        WARP_SPECIALIZE=(p.gpu.cc_major or 0) >= 9,
    )


def gluon_knob(model_ns: float) -> int:
    """1: run the Gluon warp-specialized kernel where it fits (Hopper), 0: the Triton one.
    Gluon from gpus.yaml's gluon_launch.min_model_us of modelled kernel time: below it the
    Gluon path's longer Python launch outweighs its faster kernel (measured, see there)."""
    return int(model_ns >= gpu_facts("gluon_launch")["min_model_us"] * 1e3)


def _finish(best: dict, strategy: str, **extra) -> dict:
    cfg = {k: v for k, v in best.items() if k not in ("t_iter", "kernel", "pad_ns", "uneven_k")}
    cfg.update(extra)
    cfg["strategy"] = strategy
    cfg["model_ns"] = round(cfg["model_ns"])
    return cfg


CHOOSERS = {
    "split_k": split_k,
    "stream_k": stream_k,
    "tile_reshape": persistent,
    "persistent": persistent,
    "warp_specialization": tma_warp_specialized,
}


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
    """fp32 accumulator of tile (pid_m, pid_n) over K-iterations [it_lo, it_hi). Rows and
    columns past M/N are wrapped once per tile (the store masks them); K is masked only in
    the last iteration when BK does not divide it."""
    rm = (pid_m * BM + tl.arange(0, BM)) % M  # wrap rows/cols: loads stay in bounds,
    rn = (pid_n * BN + tl.arange(0, BN)) % N  # the store masks them out
    rm = tl.max_contiguous(tl.multiple_of(rm, BM), BM)
    rn = tl.max_contiguous(tl.multiple_of(rn, BN), BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    # whole K-iterations load unmasked; only the last, partial one (K % BK != 0) is masked
    full_hi = it_hi if EVEN_K else tl.minimum(it_hi, K // BK)
    for it in range(it_lo, full_hi):
        kk = it * BK + rk
        a = tl.load(a_ptr + rm[:, None] * stride_am + kk[None, :] * stride_ak)
        b = tl.load(b_ptr + kk[:, None] * stride_bk + rn[None, :] * stride_bn)
        acc = tl.dot(a, b, acc)
    if not EVEN_K:
        for it in range(tl.maximum(it_lo, full_hi), it_hi):
            kk = it * BK + rk
            a_ptrs = a_ptr + rm[:, None] * stride_am + kk[None, :] * stride_ak
            b_ptrs = b_ptr + kk[:, None] * stride_bk + rn[None, :] * stride_bn
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


# row-stride alignments in elements, the planner's PAD_ALIGN (whose model charges the copies):
# Triton vectorizes loads only along rows whose stride it knows (divisible by 16); TMA
# descriptors need 16-byte row strides (8 fp16/bf16 elements)
ROW_ALIGN, TMA_ALIGN = PAD_ALIGN["triton"], PAD_ALIGN["gluon"]


def padded(gemm_fn, align: int = ROW_ALIGN):
    """Run ``gemm_fn`` on operands whose row strides (K for A, N for B) are multiples of
    ``align`` elements: otherwise zero-pad K and/or N (a copy of the operand that needs it;
    zeros add nothing to the dot products) and return the M x N view. Triton specializes
    integer arguments on divisibility by 16 only, and without it every tile's loads are
    scalar: measured on an H200, K = 9000 ran at 0.28x cuBLAS against 0.94x at K = 9024."""

    def run(a: torch.Tensor, b: torch.Tensor, cfg: dict) -> torch.Tensor:
        k, n = a.shape[1], b.shape[1]
        kp, np_ = -(-k // align) * align, -(-n // align) * align
        if kp != k:
            a = torch.nn.functional.pad(a, (0, kp - k))
        if (kp, np_) != (k, n):
            b = torch.nn.functional.pad(b, (0, np_ - n, 0, kp - k))
        c = gemm_fn(a, b, cfg)
        return c if np_ == n else c[:, :n]

    return run


def _tiles(m: int, n: int, cfg: dict) -> tuple[int, int]:
    return triton.cdiv(m, cfg["BLOCK_M"]), triton.cdiv(n, cfg["BLOCK_N"])


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

    # -- Stream-K: NUM_PROGS CTAs run dp_tiles whole tiles, then each takes a contiguous
    # share of the remaining tiles' K-iterations (the Triton kernel's schedule, below)
    @gluon.jit
    def _sk_share(iters_per_tile, iters_per_prog, extra_iters):
        """This CTA's Stream-K iterations [start, end) and its first and last tile."""
        pid = gl.program_id(0)
        start = pid * iters_per_prog + gl.minimum(pid, extra_iters)
        end = start + iters_per_prog + (pid < extra_iters).to(gl.int32)
        return start, end, start // iters_per_tile, (end - 1) // iters_per_tile

    @gluon.jit
    def _sk_segment(step, start, end, last, iters_per_tile):
        """The step-th segment, walked from the last tile to the first: the head a later
        CTA finishes is handed on first, the tile this CTA finishes comes last."""
        sk_tile = last - step
        lo = gl.maximum(start - sk_tile * iters_per_tile, 0)
        hi = gl.minimum(end - sk_tile * iters_per_tile, iters_per_tile)
        return sk_tile, lo, hi

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
        BN: gl.constexpr = c_desc.block_type.shape[1]
        layout: gl.constexpr = gl.NVMMADistributedLayout(
            version=[3, 0], warps_per_cta=[gl.num_warps(), 1], instr_shape=[16, BN, 16])
        pid = gl.program_id(0)
        it = 0
        for tile in range(pid, dp_tiles, NUM_PROGS):
            pid_m, pid_n = _ws_tile(tile, tiles_m, tiles_n, GROUP_M)
            acc = gl.zeros((BM, BN), dtype=gl.float32, layout=layout)
            acc, it = _consume(a_ring, b_ring, ready, empty, 0, iters_per_tile, it, acc)
            _store(c_desc, c_smem, acc, pid_m * BM, pid_n * BN)
        rows = gl.arange(0, BM, layout=gl.SliceLayout(1, layout))
        cols = gl.arange(0, BN, layout=gl.SliceLayout(0, layout))
        offs = rows[:, None] * BN + cols[None, :]
        start, end, first, last = _sk_share(iters_per_tile, iters_per_prog, extra_iters)
        for step in range(0, last - first + 1):
            sk_tile, lo, hi = _sk_segment(step, start, end, last, iters_per_tile)
            pid_m, pid_n = _ws_tile(dp_tiles + sk_tile, tiles_m, tiles_n, GROUP_M)
            acc = gl.zeros((BM, BN), dtype=gl.float32, layout=layout)
            acc, it = _consume(a_ring, b_ring, ready, empty, lo, hi, it, acc)
            if hi < iters_per_tile:  # a later CTA finishes this tile: hand the partial on
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
                    for p in range(p_first, pid):
                        acc += gl.load(ws_ptr + p * BM * BN + offs, cache_modifier=".cg")
                _store(c_desc, c_smem, acc, pid_m * BM, pid_n * BN)
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
    """TMA descriptors of A, B and C (or the partials) for the knobs' tiles."""
    bm, bn, bk = cfg["BLOCK_M"], cfg["BLOCK_N"], cfg["BLOCK_K"]
    return [TensorDescriptor.from_tensor(t, list(block), _smem_layout(block, t.dtype))
            for t, block in ((a, (bm, bk)), (b, (bk, bn)), (c, (bm, bn)))]


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
    k_iters = triton.cdiv(k, cfg["BLOCK_K"])
    ws_gemm_kernel[(progs,)](
        *_descriptors(a, b, c, cfg), c, c.shape[1], tiles_m, tiles_n, k_iters,
        per_split or k_iters, splits, tiles_m * cfg["BLOCK_M"], progs, **_launch_options(cfg))


def gluon_stream_k(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, cfg: dict,
                   p: dict) -> None:
    """The Gluon Stream-K kernel on a Hopper GPU: the schedule ``p`` of ``plan`` (its
    NUM_PROGS CTAs must all be resident: one per SM at most)."""
    ws = torch.empty((p["progs"], cfg["BLOCK_M"], cfg["BLOCK_N"]), device=a.device,
                     dtype=torch.float32)
    flags = torch.zeros((max(p["sk_tiles"], 1),), device=a.device, dtype=torch.int32)
    sk_gemm_kernel[(p["progs"],)](
        *_descriptors(a, b, c, cfg), ws, flags, p["tiles_m"], p["tiles_n"], p["dp_tiles"],
        p["iters_per_tile"], p["iters_per_prog"], p["extra_iters"], p["progs"],
        **_launch_options(cfg))


SMEM_BYTES = 227 * 1024  # Hopper: shared memory one CTA may use


def gluon_config(a: torch.Tensor, cfg: dict, out_bytes: int) -> dict | None:
    """The knobs for the Gluon kernel on this GPU, or None where it does not run: Hopper (not
    ROCm: an MI300 reports capability 9 too), fp16/bf16, BLOCK_M rows over the consumer
    warps in 16-row wgmma slices, BLOCK_N a wgmma width, and the ring plus the output tile
    (``out_bytes`` per element; 0 for split-K partials, stored from the registers) in
    shared memory; num_stages drops (down to 2) where the chosen ring would not fit."""
    bm, bn, bk = cfg["BLOCK_M"], cfg["BLOCK_N"], cfg["BLOCK_K"]
    if not (HAVE_GLUON and a.is_cuda and torch.version.hip is None
            and _device_facts(a.device.index or 0)[0][0] == 9
            and a.dtype in (torch.float16, torch.bfloat16) and cfg["num_warps"] in (4, 8)
            and bm % (16 * cfg["num_warps"]) == 0 and bn <= 256 and bn % 16 == 0
            and bk % 16 == 0):  # fmt: skip
        return None
    stage = (bm * bk + bk * bn) * a.element_size()
    stages = min(cfg["num_stages"], (SMEM_BYTES - 1024 - bm * bn * out_bytes) // stage)
    return {**cfg, "num_stages": stages} if stages >= 2 else None


# ---- strategy: a warp-specialized persistent GEMM --------------------------------------
# On Hopper (cc 9.x) with Gluon: the producer/consumer kernel above (NUM_PROGS CTAs).
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
    hopper = ws and gluon_config(a, cfg, a.element_size())
    if hopper:
        gluon_ws(a, b, c, hopper, progs)
        return c
    tma_persistent_kernel[(progs,)](
        a, b, c, m, n, k, tiles_m, tiles_n, progs, BM=cfg["BLOCK_M"], BN=cfg["BLOCK_N"],
        BK=cfg["BLOCK_K"], GROUP_M=cfg["GROUP_M"], WARP_SPECIALIZE=ws,
        num_warps=cfg["num_warps"], num_stages=cfg["num_stages"])
    return c


# ---- shared by every emitted script: where it runs, and --set KNOB=INT -----------------
import argparse  # noqa: E402
import sys  # noqa: E402


def _device() -> str:
    if torch.cuda.is_available():
        return "cuda"
    if os.environ.get("TRITON_INTERPRET") == "1":
        return "cpu"  # Triton's interpreter: numerics only, no timing
    sys.exit("needs a CUDA GPU (or TRITON_INTERPRET=1 to check numerics on the CPU)")


def _apply_sets(items: list[str]) -> None:
    """--set KNOB=INT overrides of CONFIG (exit with the known knobs on a bad one)."""
    for item in items:
        key, _, value = item.partition("=")
        if key not in CONFIG or not value.lstrip("-").isdigit():
            sys.exit(f"--set {item!r}: expected KNOB=INT with KNOB one of {sorted(CONFIG)}")
        CONFIG[key] = int(value)


# ---- harness (shared by every emitted GEMM script) ---------------------------------------
# The strategy part above defines `gemm(a, b, cfg) -> c`. CONFIG holds the knobs chosen by
# advisor for the trace's shape; --m/--n/--k re-run advisor's planner (the section above)
# for another size (--keep-knobs: reuse CONFIG as it is); --tune searches around the knobs.
import json  # noqa: E402

KNOBS = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "num_warps", "num_stages", "GROUP_M", "SPLITS",
         "NUM_PROGS", "GLUON")  # fmt: skip


def replan(m: int, n: int, k: int) -> dict:
    """The knobs advisor's planner chooses for this strategy at M x N x K on GPU."""
    cfg = CHOOSERS[CONFIG["strategy"]](Problem(m, n, k, GPU))
    return {key: cfg[key] for key in KNOBS if key in cfg and key in CONFIG}


def _resident(cfg: dict) -> int:
    """SMs x resident CTAs of a candidate's tile (0: does not fit)."""
    c = tile_ctas_per_sm(cfg["BLOCK_M"], cfg["BLOCK_N"], cfg["BLOCK_K"], cfg["num_warps"],
                         cfg["num_stages"], GPU)  # fmt: skip
    return c * GPU.sm_count


def tune_candidates(cfg: dict) -> list[dict]:
    """The chosen knobs first, then neighbours: the planner's tiles x stages 3/4 x warps
    4/8, stages and warps alone, SPLITS halved and doubled, the other kernel (GLUON);
    NUM_PROGS (persistent and Stream-K) is each candidate's resident CTAs, and candidates
    that do not fit are dropped (Stream-K waits on CTAs that must all be resident)."""
    out: list[dict] = [dict(cfg)]

    def add(**change) -> None:
        c = {**cfg, **change}
        slots = _resident(c)
        if slots == 0:
            return
        if "NUM_PROGS" in cfg and "NUM_PROGS" not in change:
            c["NUM_PROGS"] = min(slots, cfg["NUM_PROGS"]) if c == cfg else slots
        if c not in out:
            out.append(c)

    for bm, bn, bk, *_ in CANDIDATES:
        for stages in (3, 4):
            for warps in (4, 8):
                add(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, num_stages=stages, num_warps=warps)
    for stages in (cfg["num_stages"] - 1, cfg["num_stages"] + 1):
        if 2 <= stages <= 6:
            add(num_stages=stages)
    if "SPLITS" in cfg:
        for splits in (cfg["SPLITS"] // 2, cfg["SPLITS"] * 2):
            if splits >= 1:
                add(SPLITS=splits)
    if "GLUON" in cfg:  # the other kernel (Gluon on Hopper / Triton) with the same knobs
        add(GLUON=1 - cfg["GLUON"])
    return out


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
    # per call above includes the Python launch (most for short GEMMs: the Gluon kernels'
    # descriptors and arguments cost ~40 us more than a Triton launch); inside a CUDA graph
    # the launch is gone and the GPU time is left
    try:
        graph = {key: statistics.median(triton.testing.do_bench_cudagraph(
            fn, rep=100, return_mode="median") for _ in range(rounds)) for key, fn in
            (("mine", lambda: gemm(a, b, CONFIG)), ("torch", lambda: torch.matmul(a, b)))}
        print(f"  in a CUDA graph (GPU time): {CONFIG['strategy']} {graph['mine']:.4f} ms, "
              f"torch.matmul {graph['torch']:.4f} ms ({graph['torch'] / graph['mine']:.2f}x)")
    except Exception as exc:  # (a capture this GPU, driver or Triton build cannot do)
        print(f"  in a CUDA graph: not measured ({type(exc).__name__}: {str(exc)[:80]})")
    trace_ns = CONFIG.get("trace_kernel_ns")
    if trace_ns and (m, n, k) == (CONFIG["M"], CONFIG["N"], CONFIG["K"]):
        ms = trace_ns / 1e6
        print(f"  {'kernel in the trace':<20} {ms:8.4f} ms  {flop / ms / 1e9:8.1f} TFLOP/s"
              f"  -> speed-up {ms / mine:.2f}x")


def _tune(m, n, k, dtype, tol) -> None:
    """Time every candidate that computes the right result; print the winner as --set flags
    and as JSON (CONFIG stays the default)."""
    import triton.testing

    a, b = _inputs(m, n, k, dtype, "cuda", 0)
    ref = (a.float() @ b.float()).double()
    flop = 2.0 * m * n * k
    results = []
    candidates = tune_candidates(CONFIG)
    print(f"tune M={m} N={n} K={k} {str(dtype)[6:]}: {len(candidates)} candidates "
          "(the chosen config first; do_bench medians)")
    # a warm GPU first: the first timings of a cold one run at lower clocks
    triton.testing.do_bench(lambda: gemm(a, b, CONFIG), warmup=200, rep=500)
    for i, cfg in enumerate(candidates):
        label = " ".join(f"{key}={cfg[key]}" for key in KNOBS if key in cfg)
        try:
            err = float((gemm(a, b, cfg).double() - ref).norm() / ref.norm())
            if not err <= tol:
                print(f"  {label}: wrong result (rel. error {err:.1e}), skipped")
                continue
            ms = triton.testing.do_bench(lambda cfg=cfg: gemm(a, b, cfg), warmup=25, rep=100,
                                         return_mode="median")  # fmt: skip
        except Exception as exc:  # e.g. out of shared memory for this tile
            print(f"  {label}: {type(exc).__name__}, skipped")
            continue
        results.append((ms, i, cfg))
        print(f"  {ms:8.4f} ms {flop / ms / 1e9:7.1f} TFLOP/s  {label}"
              + ("  (chosen)" if i == 0 else ""))
    if not results:
        sys.exit("--tune: no candidate ran")
    ms, i, best = min(results, key=lambda r: r[0])
    chosen = next((r[0] for r in results if r[1] == 0), None)
    if i != 0 and chosen is not None:  # the two again, interleaved: the gain is not noise
        rounds = {"best": [], "chosen": []}
        for _ in range(3):
            for key, cfg in (("best", best), ("chosen", CONFIG)):
                rounds[key].append(triton.testing.do_bench(
                    lambda cfg=cfg: gemm(a, b, cfg), warmup=50, rep=200, return_mode="median"))
        ms, chosen = (sorted(rounds[key])[1] for key in ("best", "chosen"))
        print(f"re-timed, interleaved (median of 3): fastest {ms:.4f} ms, chosen {chosen:.4f} ms")
        if ms >= chosen:  # its lead was noise: the chosen config stays
            ms, i, best = chosen, 0, CONFIG
    flags = " ".join(f"--set {key}={best[key]}" for key in KNOBS
                     if key in best and best[key] != CONFIG.get(key))  # fmt: skip
    if i == 0 or not flags:
        print("winner: the chosen config")
    else:
        gain = f" ({chosen / ms:.2f}x the chosen config)" if chosen else ""
        print(f"winner: {flags}{gain}")
    print(json.dumps({"M": m, "N": n, "K": k, "winner": {key: best[key] for key in KNOBS
                      if key in best}, "ms": round(ms, 5),
                      "chosen_ms": None if chosen is None else round(chosen, 5)}))  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(description=f"{CONFIG['strategy']} GEMM emitted by advisor")
    p.add_argument("--m", type=int, default=CONFIG["M"])
    p.add_argument("--n", type=int, default=CONFIG["N"])
    p.add_argument("--k", type=int, default=CONFIG["K"])
    p.add_argument("--dtype", choices=["bf16", "fp16", "fp32"], default=None,
                   help="default bf16 on a GPU, fp32 under TRITON_INTERPRET=1")
    p.add_argument("--check", action="store_true", help="compare with float64 matmul")
    p.add_argument("--bench", action="store_true", help="time with triton.testing.do_bench")
    p.add_argument("--tune", action="store_true",
                   help="time the knobs' neighbours on this GPU, print the fastest")
    p.add_argument("--keep-knobs", action="store_true",
                   help="with --m/--n/--k: keep CONFIG's knobs instead of re-planning")
    p.add_argument("--set", action="append", default=[], metavar="KNOB=INT",
                   help="override a knob of CONFIG, e.g. --set BLOCK_M=64 (repeatable)")
    args = p.parse_args()
    if (args.m, args.n, args.k) != (CONFIG["M"], CONFIG["N"], CONFIG["K"]) and not args.keep_knobs:
        new = replan(args.m, args.n, args.k)
        changed = {key: v for key, v in new.items() if CONFIG[key] != v}
        CONFIG.update(new)
        print(f"re-planned for M={args.m} N={args.n} K={args.k}: "
              + (" ".join(f"{key}={v}" for key, v in changed.items()) or "same knobs"))
    _apply_sets(args.set)
    device = _device()
    name = args.dtype or ("bf16" if device == "cuda" else "fp32")
    if device == "cpu" and name != "fp32":
        sys.exit("on the CPU interpreter only --dtype fp32 is exact; 16-bit runs need a GPU")
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[name]
    tol = {"bf16": 1e-2, "fp16": 5e-3, "fp32": 2e-3}[name]
    if not (args.check or args.bench or args.tune):
        args.check = True
    if args.check and not _check(args.m, args.n, args.k, dtype, device, tol):
        sys.exit(1)
    if (args.bench or args.tune) and device != "cuda":
        sys.exit(f"--{'bench' if args.bench else 'tune'} needs a CUDA GPU")
    if args.tune:
        _tune(args.m, args.n, args.k, dtype, tol)
    if args.bench:
        _bench(args.m, args.n, args.k, dtype)


if __name__ == "__main__":
    main()
