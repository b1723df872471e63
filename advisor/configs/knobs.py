"""Choose GEMM kernel knobs for a strategy by searching a small cost model (not constants).

Cost model (documented in docs/configs.md): a tile of BM x BN x BK costs
``2*BM*BN*BK / (per-SM rate * efficiency(tile))``; an SM running c CTAs shares its rate, so a
launch of G CTAs with I K-iterations each lasts ``ceil(G / slots) * c * I * t_iter``. Split-K
adds the partial-sum traffic (fp32 write + read) at the memory bandwidth; Stream-K spreads
all iterations evenly over the slots and adds its fix-up traffic. Occupancy c of a candidate
comes from its shared memory (stages x (BM + BN) x BK x 2 B + 1 KiB) and warps.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from advisor.data import gpu_facts
from advisor.trace.model import GpuSpec

# (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages, relative efficiency of the tile)
CANDIDATES = [
    (128, 256, 64, 8, 3, 1.00),
    (256, 128, 64, 8, 3, 1.00),
    (128, 128, 64, 8, 4, 0.90),
    (128, 128, 64, 4, 4, 0.85),
    (128, 64, 64, 4, 4, 0.75),
    (64, 128, 64, 4, 4, 0.75),
    (64, 64, 64, 4, 4, 0.55),
]
MIN_ITERS_PER_SPLIT = 8
MAX_SPLITS = 64
ELEMENT_BYTES = 2  # bf16/fp16 operands
GROUP_M = 8


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


def _base(p: Problem, cand) -> dict | None:
    bm, bn, bk, warps, stages, eff = cand
    c = tile_ctas_per_sm(bm, bn, bk, warps, stages, p.gpu)
    if c == 0:
        return None
    tiles = math.ceil(p.m / bm) * math.ceil(p.n / bn)
    return dict(
        BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, num_warps=warps, num_stages=stages, GROUP_M=GROUP_M,
        ctas_per_sm=c, slots=c * p.gpu.sm_count, tiles=tiles,
        k_iters=math.ceil(p.k / bk),
        t_iter=2.0 * bm * bn * bk / (p.per_sm_flops * eff),
    )  # fmt: skip


def _feasible(p: Problem) -> list[dict]:
    """The candidates that fit on the GPU, in CANDIDATES order, as ``_base`` dicts."""
    return [b for b in (_base(p, cand) for cand in CANDIDATES) if b is not None]


def _cheapest(configs) -> dict:
    """The config with the lowest ``model_ns`` (the first one on a tie)."""
    return min(configs, key=lambda c: c["model_ns"])


def _data_parallel_ns(b: dict) -> float:
    """Modelled time of one tile per CTA, every K-iteration in its tile's CTA (ns)."""
    return _launch_ns(b["tiles"], b["k_iters"], b["slots"], b["ctas_per_sm"], b["t_iter"])


def data_parallel(p: Problem) -> dict:
    """Best one-tile-per-CTA config (lowest modelled time, tail included)."""

    def modelled(b: dict) -> dict:
        waves = b["tiles"] / b["slots"]
        return dict(b, model_ns=_data_parallel_ns(b), waves=waves,
                    tail=1 - waves / math.ceil(waves))  # fmt: skip

    best = _cheapest(modelled(b) for b in _feasible(p))
    return _finish(best, "data_parallel", NUM_PROGS=best["slots"])


def split_k(p: Problem) -> dict:
    """Tile and split count with the lowest modelled time (>= 8 K-iterations per split)."""

    def splits_of(b: dict):
        for splits in range(1, MAX_SPLITS + 1):
            per_split = math.ceil(b["k_iters"] / splits)
            if splits > 1 and per_split < MIN_ITERS_PER_SPLIT:
                return
            used = math.ceil(b["k_iters"] / per_split)
            compute = _launch_ns(
                b["tiles"] * used, per_split, b["slots"], b["ctas_per_sm"], b["t_iter"]
            )
            # two-pass reduction: fp32 partials written and read back, output written
            traffic = (2 * 4 * used + ELEMENT_BYTES) * p.m * p.n if used > 1 else 0
            yield dict(b, SPLITS=used, model_ns=compute + traffic / p.bandwidth,
                       waves=b["tiles"] * used / b["slots"])  # fmt: skip

    best = _cheapest(cfg for b in _feasible(p) for cfg in splits_of(b))
    return _finish(best, "split_k", ATOMIC=0, GLUON=gluon_knob(best["model_ns"]))


def stream_k(p: Problem) -> dict:
    """Tile with the lowest modelled Stream-K time: all iterations spread over the slots."""

    def modelled(b: dict) -> dict:
        total = b["tiles"] * b["k_iters"]
        progs = min(b["slots"], total)
        per_prog = math.ceil(total / progs)
        compute = b["ctas_per_sm"] * per_prog * b["t_iter"]
        full = b["tiles"] // progs
        sk_tiles = b["tiles"] if full < 2 else b["tiles"] - (full - 1) * progs
        if b["tiles"] % progs == 0:
            sk_tiles = 0
        # each shared tile: fp32 partial written and read back
        fixup = sk_tiles * b["BLOCK_M"] * b["BLOCK_N"] * 4 * 2
        return dict(b, model_ns=compute + fixup / p.bandwidth, sk_tiles=sk_tiles, NUM_PROGS=progs)

    best = _cheapest(modelled(b) for b in _feasible(p))
    return _finish(best, "stream_k", GLUON=gluon_knob(best["model_ns"]))


def persistent(p: Problem) -> dict:
    """Data-parallel tile choice run as a persistent tile loop over SMs x CTAs/SM."""
    cfg = data_parallel(p)
    cfg["strategy"] = "persistent"
    return cfg


def tma_warp_specialized(p: Problem) -> dict:
    """Persistent TMA kernel: large tile, one CTA per SM, deep pipeline."""
    cand = (128, 256, 64, 8, 3, 1.0) if p.n >= 256 else (128, 128, 64, 8, 4, 0.9)
    b = _base(p, cand)
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
    cfg = {k: v for k, v in best.items() if k != "t_iter"}
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
