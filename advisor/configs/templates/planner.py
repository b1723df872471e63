# ---- planner: advisor/configs/templates/planner.py (the same search advisor ran) ---------
"""Choose GEMM kernel knobs for a strategy by searching a calibrated cost model (not constants).

Cost model (documented in docs/configs.md; its numbers are gpus.yaml's ``gemm_tiles``,
fitted to H200 measurements by benchmarks/fit_tiles.py): a K-iteration of a BM x BN x BK
tile costs ``2*BM*BN*BK / (per-SM rate * efficiency(tile, kernel))``, times
``uneven_k_factor`` for the Triton kernels when BLOCK_K does not divide the padded K; an SM
running c CTAs shares its rate, so a launch of G CTAs with I K-iterations each lasts
``ceil(G / slots) * c * I * t_iter``. The Gluon warp-specialized kernel (Hopper) is
persistent with one CTA per SM. Split-K adds the partial-sum traffic (fp32 write + read),
Stream-K its fix-up traffic, both at the memory bandwidth; every kernel adds the copy of an
operand whose row stride it pads (read + write) and a fixed time per call (``fixed_us``).
Occupancy c of a Triton candidate comes from its shared memory (stages x (BM + BN) x BK x
2 B + 1 KiB) and warps.

The standard library only, and no ``from __future__`` import: advisor imports this module
(advisor/configs/knobs.py), and every emitted GEMM script inlines the file as it is after its
own code (advisor/configs/emit.py; hence the imports' ``noqa: E402``), followed by the facts
advisor planned with, as literals: ``calibrate(...)`` with gpus.yaml's sections and
``GPU = PlannerFacts(...)``. Everything the planner knows comes in through those two, so the
script's --m/--n/--k re-plan the way advisor did (tests/configs/test_planner.py).
"""

import math  # noqa: E402
from dataclasses import dataclass  # noqa: E402

KERNELS = ("triton", "gluon")
# elements the scripts pad row strides (K of A, N of B) to, per kernel: Triton vectorizes
# loads only along strides divisible by 16, TMA needs 16 bytes (the scripts' ROW_ALIGN and
# TMA_ALIGN are these)
PAD_ALIGN = {"triton": 16, "gluon": 8}
MIN_ITERS_PER_SPLIT = 8
MAX_SPLITS = 64
ELEMENT_BYTES = 2  # bf16/fp16 operands
GROUP_M = 8

# gpus.yaml's sections the planner reads, as calibrate() sets them (in place, so that names
# imported from here see them): gemm_tiles, the tile table and the cost-model terms fitted to
# measurements; cost_model_fallback, the rates of a GPU without datasheet numbers;
# gluon_launch, the modelled time from which the Gluon kernel runs
CALIBRATION: dict = {}
COST_MODEL_FALLBACK: dict = {}
GLUON_LAUNCH: dict = {}
# gemm_tiles' tiles: (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages, efficiency of the
# Triton kernel, efficiency of the Gluon kernel or None where it does not run the tile)
CANDIDATES: list[tuple] = []


def data_parallel_only(bm: int, bn: int) -> bool:
    """A tile whose sides are not both powers of two (128 x 192): Triton and Gluon tensors
    are powers of two, so only the Gluon kernel runs it, as two accumulators (BLOCK_N's
    largest power of two and the rest), and only one whole tile per CTA: no split-K
    partials, no Stream-K share (their partial tiles are single tensors)."""
    return bool(bm & (bm - 1) or bn & (bn - 1))


def power_of_two_tile(cfg: dict) -> dict:
    """``cfg`` where a kernel cannot run its tile as it is (``data_parallel_only``: the
    Triton kernels, split-K, a Stream-K schedule with a Stream-K share): BLOCK_M and
    BLOCK_N rounded up to powers of two (128 x 192 -> 128 x 256, a row of the table); other
    tiles unchanged."""
    if not data_parallel_only(cfg["BLOCK_M"], cfg["BLOCK_N"]):
        return cfg
    up = {key: 1 << (cfg[key] - 1).bit_length() for key in ("BLOCK_M", "BLOCK_N")}
    return {**cfg, **up}


def calibrate(gemm_tiles: dict, cost_model_fallback: dict, gluon_launch: dict) -> None:
    """Set the planner's tables to gpus.yaml's sections of these names."""
    given = {"gemm_tiles": dict(gemm_tiles), "cost_model_fallback": dict(cost_model_fallback),
             "gluon_launch": dict(gluon_launch)}  # fmt: skip
    for name, table in calibration().items():
        table.clear()
        table.update(given[name])
    CANDIDATES[:] = [tuple(row) for row in CALIBRATION["tiles"]]


def calibration() -> dict[str, dict]:
    """The tables as calibrate's keyword arguments (what an emitted script passes it)."""
    return {"gemm_tiles": CALIBRATION, "cost_model_fallback": COST_MODEL_FALLBACK,
            "gluon_launch": GLUON_LAUNCH}  # fmt: skip


@dataclass(frozen=True)
class PlannerFacts:
    """The facts of the GPU the planner reads: advisor's GpuSpec's fields of these names
    (advisor/configs/knobs.py's planner_facts); an emitted script has its GPU's as GPU."""

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
        """Major compute capability (CUDA), None for AMD gfx targets."""
        head = self.compute_capability.split(".")[0]
        return int(head) if head.isdigit() else None


class NoTileFits(ValueError):
    """No candidate tile of the planner fits the GPU (shared memory, warps, CTAs per SM)."""


@dataclass(frozen=True)
class Problem:
    """One GEMM to tune: shape and the GPU it runs on."""

    m: int
    n: int
    k: int
    gpu: PlannerFacts

    @property
    def per_sm_flops(self) -> float:
        """FLOP/ns one SM sustains (datasheet dense 16-bit rate / SMs; for a GPU without
        one, gpus.yaml's cost_model_fallback)."""
        tflops = self.gpu.dense_fp16_tflops or COST_MODEL_FALLBACK["dense_fp16_tflops"]
        return tflops * 1e12 / self.gpu.sm_count / 1e9

    @property
    def bandwidth(self) -> float:
        """Memory bandwidth in B/ns (GB/s); gpus.yaml's cost_model_fallback when unknown."""
        return float(self.gpu.memory_bandwidth_gbs or COST_MODEL_FALLBACK["memory_bandwidth_gbs"])

    @property
    def kernels(self) -> tuple[str, ...]:
        """The kernels the scripts can run here: the Gluon one on Hopper (capability 9)."""
        return KERNELS if self.gpu.cc_major == 9 else KERNELS[:1]


def tile_ctas_per_sm(bm: int, bn: int, bk: int, warps: int, stages: int, gpu: PlannerFacts) -> int:
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
        if data_parallel_only(b["BLOCK_M"], b["BLOCK_N"]):
            return  # (not a split-K tile: its partials would be two tensors)
        for splits in range(1, MAX_SPLITS + 1):
            if splits > 1 and math.ceil(b["k_iters"] / splits) < MIN_ITERS_PER_SPLIT:
                return
            yield split_k_ns(p, b, splits)

    best = _pick_kernel(p, splits_of, "split_k")
    return _finish(best, "split_k", ATOMIC=0, GLUON=int(best["kernel"] == "gluon"))


# Stream-K policies (Stream-K++): SK_TILES -> how the tiles split between whole-tile
# data-parallel waves and the Stream-K share of K-iterations
SK_POLICIES = {
    0: "data-parallel only",
    1: "data-parallel waves + under one tile of Stream-K per CTA (the partial wave)",
    2: "data-parallel waves + one to two tiles of Stream-K per CTA (one more wave)",
    -1: "all Stream-K",
}


def sk_data_parallel_tiles(tiles: int, progs: int, policy: int) -> int:
    """Tiles run whole in data-parallel waves by ``progs`` CTAs under Stream-K policy
    ``policy`` (SK_POLICIES); the rest are shared out as K-iterations. Without a partial
    wave every policy but -1 is data-parallel."""
    full_waves, partial = divmod(tiles, progs)
    if policy == -1:
        return 0
    if policy == 0 or not partial:
        return tiles
    return max(full_waves - (policy - 1), 0) * progs


def _sk_partials(sk_iters: int, progs: int, iters_per_tile: int) -> tuple[int, int]:
    """(partial tiles handed on, most CTAs sharing one tile) when ``sk_iters`` K-iterations
    are split in contiguous shares over ``progs`` CTAs (the first ``sk_iters % progs`` take
    one more): a share that ends inside a tile hands its partial to the CTA after it."""
    per, extra = divmod(sk_iters, progs)
    ends = [j * per + min(j, extra) for j in range(1, progs)]
    cuts = [e for e in ends if 0 < e < sk_iters and e % iters_per_tile]
    ways = 1
    for tile in range(math.ceil(sk_iters / iters_per_tile)) if cuts else ():
        lo, hi = tile * iters_per_tile, (tile + 1) * iters_per_tile
        ways = max(ways, 1 + sum(lo < e < hi for e in cuts))
    return len(cuts), ways


def stream_k_ns(p: Problem, b: dict, policy: int = 2) -> dict:
    """Modelled Stream-K time of tile ``b`` under ``policy``: the data-parallel waves (a
    partial wave filled to a fraction f of the CTAs costs floor + (1 - floor) f of a whole
    one: its CTAs run faster with the SMs' memory to fewer of them), then each CTA's share
    of the Stream-K iterations (each at sk_iter_factor of a whole tile's; where a share
    spans s tiles of iterations, more than s0 = gemm_tiles.sk_long_share[0], and the shares
    are cut inside tiles, its (s - s0) tiles of iterations past s0 cost sk_long_share[1] of
    their time more: round 13 measured 128 x 128 shares of s = 1.45-2.45 2-31% slower than
    the tile's data-parallel schedule relative to the model, at 11 of 12 such configs, and
    none slower at s up to 1.23 or at exactly 2 whole tiles), plus the fix-up: every
    partial tile written and read back at the memory bandwidth, and on the critical path
    the CTA finishing the most-shared tile reading the others' partials at one SM's share of it
    (gemm_tiles.sk_fixup_sm_share), the padding copies and the fixed time
    (gemm_tiles.sk_fixed_us where it lists the kernel, else fixed_us.stream_k: the tile
    model's, fitted with ``stream_k_tile_ns``)."""
    tiles, k_iters = b["tiles"], b["k_iters"]
    progs = min(b["slots"], tiles * k_iters)
    dp_tiles = sk_data_parallel_tiles(tiles, progs, policy)
    sk_iters = (tiles - dp_tiles) * k_iters
    full_waves, partial = divmod(dp_tiles, progs)
    floor = CALIBRATION["sk_partial_wave_floor"]
    waves = full_waves + (floor + (1 - floor) * partial / progs if partial else 0)
    iters = waves * k_iters + math.ceil(sk_iters / progs) * CALIBRATION["sk_iter_factor"]
    partials, ways = _sk_partials(sk_iters, progs, k_iters) if sk_iters else (0, 1)
    share = sk_iters / progs / k_iters  # tiles of K-iterations in each CTA's Stream-K share
    free, factor = CALIBRATION.get("sk_long_share", (1.0, 0.0))
    if partials and share > free:  # long shares cut inside tiles (round 13)
        iters += factor * (share - free) * k_iters
    compute = b["ctas_per_sm"] * iters * b["t_iter"]
    tile_bytes = b["BLOCK_M"] * b["BLOCK_N"] * 4
    per_sm = p.bandwidth / p.gpu.sm_count * CALIBRATION["sk_fixup_sm_share"]
    fixup = partials * tile_bytes * 2 / p.bandwidth + (ways - 1) * tile_bytes / per_sm
    fixed = CALIBRATION.get("sk_fixed_us", {}).get(b["kernel"])  # (this model's own fit)
    fixed_ns = _fixed_ns("stream_k", b["kernel"]) if fixed is None else fixed * 1e3
    model = fixed_ns + compute + fixup + b["pad_ns"]
    return dict(b, model_ns=model, sk_tiles=tiles - dp_tiles, NUM_PROGS=progs, SK_TILES=policy)


def stream_k_tile_ns(p: Problem, b: dict) -> dict:
    """Modelled time of tile ``b`` under the fixed policy 2 (the tile model fitted with
    ``fixed_us``, which chooses tile and kernel): all K-iterations spread evenly over the
    resident CTAs, plus the fix-up of the shared tiles (fp32 partial written and read back),
    the padding copies and the fixed time."""
    total = b["tiles"] * b["k_iters"]
    progs = min(b["slots"], total)
    compute = b["ctas_per_sm"] * math.ceil(total / progs) * b["t_iter"]
    sk_tiles = b["tiles"] - sk_data_parallel_tiles(b["tiles"], progs, 2)
    fixup = sk_tiles * b["BLOCK_M"] * b["BLOCK_N"] * 4 * 2
    model = _fixed_ns("stream_k", b["kernel"]) + compute + fixup / p.bandwidth + b["pad_ns"]
    return dict(b, model_ns=model)


def stream_k_data_parallel(tiles: int, progs: int, policy: int) -> bool:
    """Whether Stream-K policy ``policy`` runs every one of ``tiles`` whole (no Stream-K
    share): policy 0, and 1 or 2 where the tiles fill whole waves of ``progs`` CTAs."""
    return sk_data_parallel_tiles(tiles, progs, policy) == tiles


def stream_k_whole_tiles_ns(p: Problem, b: dict, policy: int = 0) -> dict:
    """Modelled time of a ``data_parallel_only`` tile under a Stream-K policy that leaves
    no Stream-K share: whole waves of whole tiles, the last one at a whole wave's cost (a
    partial wave of compute-bound tiles lasts as long: the 128 x 192 tile ran 3000 x 1000 x
    10000's 144 tiles on 132 SMs in twice the time per K-iteration of one full wave, round
    9), plus its own fixed time (gemm_tiles.fixed_us.data_parallel_only: the plain
    persistent kernel, no Stream-K fix-up) and the padding copies."""
    model = _fixed_ns("data_parallel_only", b["kernel"]) + _data_parallel_ns(b)
    return dict(stream_k_ns(p, b, policy), model_ns=model)


def stream_k(p: Problem, policies: tuple[int, ...] = tuple(SK_POLICIES)) -> dict:
    """Tile, kernel and Stream-K policy of ``policies`` together: the config with the
    lowest modelled time (``stream_k_ns`` of every tile under every policy, with the Gluon
    kernel's Stream-K efficiencies, ``_sk_tile``; the first on a tie). Since round 13: before,
    the tile came first from a model of perfectly balanced Stream-K shares
    (``stream_k_tile_ns``), which ranked 128 x 128 over 128 x 256 at shapes where no policy
    balances it so (docs/verification/README.md, round 13). A ``data_parallel_only`` tile
    (Gluon's 128 x 192) is a candidate only under a policy of ``policies`` that leaves no
    Stream-K share, modelled as that schedule (``stream_k_whole_tiles_ns``)."""

    def dp_policies(b: dict) -> list[int]:
        progs = min(b["slots"], b["tiles"] * b["k_iters"])
        return [pol for pol in policies if stream_k_data_parallel(b["tiles"], progs, pol)]

    def dp_only(b: dict) -> bool:
        return data_parallel_only(b["BLOCK_M"], b["BLOCK_N"])

    def configs_of(b: dict) -> list[dict]:
        b = _sk_tile(p, b)
        if dp_only(b):
            return [stream_k_whole_tiles_ns(p, b, pol) for pol in dp_policies(b)[:1]]
        return [stream_k_ns(p, b, policy) for policy in policies]

    best = _pick_kernel(p, configs_of, "stream_k")
    return _finish(best, "stream_k", **stream_k_extra(best))


def stream_k_extra(best: dict) -> dict:
    """The Stream-K knobs of a modelled config ``best`` beyond its tile row's: GLUON, and
    for the Gluon kernel the ring depth and tile order gemm_tiles gives its tile
    (sk_gluon_stages, sk_group_m)."""
    extra = {"GLUON": int(best["kernel"] == "gluon")}
    shape = [best[key] for key in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "num_warps")]
    for *knobs, stages in CALIBRATION.get("sk_gluon_stages", []) if extra["GLUON"] else []:
        if knobs == shape:  # the Gluon Stream-K kernel's ring depth for this tile
            extra["num_stages"] = stages
    for *knobs, group_m in CALIBRATION.get("sk_group_m", []) if extra["GLUON"] else []:
        if knobs == shape:  # the Gluon Stream-K kernel's tile order (L2 swizzle) for it
            extra["GROUP_M"] = group_m
    return extra


def off_sector_rows(p: Problem) -> bool:
    """Whether A's and B's rows (K and N 16-bit elements) both start off 32-byte sectors
    while on 16 bytes (so no padding copy aligns them, PAD_ALIGN): every TMA box row of
    either operand then spans one more sector and line than its bytes need. Measured on an
    H200 (docs/verification round 12): 1000 x 3000 x 5000's Gluon kernel ran 62.4 us on
    such rows, 51.2 with A on 128-byte rows, 49.5 with B; where one operand was on
    sectors the other's alignment gained 1-5%."""

    def off(elements: int) -> bool:
        return elements % PAD_ALIGN["gluon"] == 0 and (elements * ELEMENT_BYTES) % 32 != 0

    return off(p.k) and off(p.n)


def line_copy_a_ns(p: Problem) -> float:
    """Time of copying A to rows of whole 128-byte lines (read + write at the bandwidth)."""
    return 2 * p.m * _round_up(p.k, 64) * ELEMENT_BYTES / p.bandwidth


def line_copy_a(p: Problem, bm: int, bn: int) -> bool:
    """Whether the Stream-K script's Gluon kernel runs on a copy of A with rows on 128-byte
    lines (the script's ``to_lines``): where ``off_sector_rows``, and the copy is modelled
    cheaper than what the rows cost the tile's whole-tile waves
    (gemm_tiles.sk_off_sector_factor - 1 of their time)."""
    factor = CALIBRATION.get("sk_off_sector_factor", 1.0)
    if factor <= 1.0 or not off_sector_rows(p):
        return False
    cand = next((c for c in CANDIDATES if c[:2] == (bm, bn) and c[6]), None)
    b = cand and _base(p, cand, "gluon")
    if not b:
        return False
    return line_copy_a_ns(p) < (factor - 1.0) * _data_parallel_ns({**b, "pad_ns": 0.0})


def _sk_tile(p: Problem, b: dict) -> dict:
    """A base tile ``b`` as the Stream-K model times it: for the Gluon kernel, a K-iteration
    at gemm_tiles.sk_gluon_eff's efficiency where that lists the tile (``[BLOCK_M, BLOCK_N,
    BLOCK_K, num_warps, efficiency]``: the Stream-K kernel's ring and epilogue differ from
    the ones the table was fitted with), and on rows off sectors (``_off_sectors``)."""
    shape = [b[key] for key in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "num_warps")]
    for *knobs, eff in CALIBRATION.get("sk_gluon_eff", []) if b["kernel"] == "gluon" else []:
        if knobs == shape:
            flops = 2.0 * b["BLOCK_M"] * b["BLOCK_N"] * b["BLOCK_K"]
            b = dict(b, t_iter=flops / (p.per_sm_flops * eff))
    return _off_sectors(p, b)


def _off_sectors(p: Problem, b: dict) -> dict:
    """A Gluon base tile ``b`` as the Stream-K script runs it where ``off_sector_rows``: on
    a copy of A on 128-byte lines (``line_copy_a``: the copy in its pad_ns), or else each
    K-iteration at gemm_tiles.sk_off_sector_factor of the time."""
    if b["kernel"] != "gluon" or not off_sector_rows(p):
        return b
    if line_copy_a(p, b["BLOCK_M"], b["BLOCK_N"]):
        return dict(b, pad_ns=b["pad_ns"] + line_copy_a_ns(p))
    return dict(b, t_iter=b["t_iter"] * CALIBRATION.get("sk_off_sector_factor", 1.0))


def _pick_kernel(p: Problem, configs_of, strategy: str) -> dict:
    """The cheapest config per kernel (``configs_of(base)`` yields a base tile's modelled
    configs); the Gluon one where it is modelled no slower than the Triton one and long
    enough to hide its launch (``gluon_knob`` for ``strategy``), else the Triton one."""
    best = {kernel: _cheapest(c for b in _feasible(p, (kernel,)) for c in configs_of(b))
            for kernel in p.kernels}  # fmt: skip
    gluon = best.get("gluon")
    if (gluon and gluon_knob(gluon["model_ns"], strategy)
            and gluon["model_ns"] <= best["triton"]["model_ns"]):  # fmt: skip
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


def gluon_knob(model_ns: float, strategy: str) -> int:
    """1: run the Gluon warp-specialized kernel where it fits (Hopper), 0: the Triton one.
    Gluon from gpus.yaml's gluon_launch.min_model_us[strategy] of modelled kernel time:
    below it the Gluon path's longer Python launch outweighs its faster kernel when called
    outside a CUDA graph (measured, see there)."""
    return int(model_ns >= GLUON_LAUNCH["min_model_us"][strategy] * 1e3)


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
