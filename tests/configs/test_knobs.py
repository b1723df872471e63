"""The knob search on the two H200 sample problems (hand-checked properties, not constants)."""

import json
import math

from advisor.configs import knobs
from advisor.configs.templates import planner
from advisor.trace.gpus import match_gpu

H200 = match_gpu("H200")


def test_ctas_per_sm_from_shared_memory():
    # 3 stages x (128 + 256) x 64 x 2 B = 147456 B (+1 KiB) -> 1 per SM, as in the trace
    assert knobs.tile_ctas_per_sm(128, 256, 64, 8, 3, H200) == 1
    # 3 x (64 + 64) x 64 x 2 = 49152 (+1 KiB) -> 4 per SM (233472 // 50176)
    assert knobs.tile_ctas_per_sm(64, 64, 64, 4, 3, H200) == 4


def test_split_k_fills_the_gpu_with_enough_k_iterations():
    cfg = knobs.split_k(knobs.Problem(256, 256, 65536, H200))
    tiles = math.ceil(256 / cfg["BLOCK_M"]) * math.ceil(256 / cfg["BLOCK_N"])
    ctas = tiles * cfg["SPLITS"]
    assert cfg["SPLITS"] > 1
    assert ctas <= cfg["slots"]  # one wave
    assert ctas > cfg["slots"] / 2  # ... and most of it
    assert cfg["k_iters"] / cfg["SPLITS"] >= knobs.MIN_ITERS_PER_SPLIT
    # the model prefers it to the data-parallel kernel by a wide margin (split-K carries
    # gpus.yaml's fixed 12 us per call, which the unmeasured data-parallel model does not)
    assert (
        cfg["model_ns"] * 5 < knobs.data_parallel(knobs.Problem(256, 256, 65536, H200))["model_ns"]
    )


def test_split_k_keeps_one_split_when_the_grid_is_full():
    cfg = knobs.split_k(knobs.Problem(768, 5632, 8192, H200))  # 132 tiles of 128x256
    assert cfg["SPLITS"] == 1


def test_stream_k_spreads_the_tail_shape():
    p = knobs.Problem(896, 4864, 8192, H200)
    sk = knobs.stream_k(p)
    dp = knobs.data_parallel(p)
    assert sk["NUM_PROGS"] <= sk["slots"]  # all CTAs resident (the finisher waits)
    assert sk["model_ns"] < 0.8 * dp["model_ns"]


def test_every_strategy_has_a_chooser():
    for strategy in ("split_k", "stream_k", "tile_reshape", "persistent", "warp_specialization"):
        cfg = knobs.CHOOSERS[strategy](knobs.Problem(512, 512, 1024, H200))
        assert cfg["BLOCK_M"] and cfg["num_warps"] and cfg["model_ns"] > 0


def test_gluon_knob_follows_the_calibrated_threshold():
    # gpus.yaml gluon_launch.min_model_us: the Gluon kernel from 60 us modelled for split-K,
    # from 30 us for Stream-K (round 9: the data-parallel-only tiles' graph times)
    from advisor.configs.knobs import gluon_knob
    from advisor.data import gpu_facts

    assert gpu_facts("gluon_launch")["min_model_us"] == {"split_k": 60, "stream_k": 30}
    assert gluon_knob(59_999, "split_k") == 0 and gluon_knob(60_000, "split_k") == 1
    assert gluon_knob(29_999, "stream_k") == 0 and gluon_knob(30_000, "stream_k") == 1
    assert gluon_knob(1e6, "split_k") == gluon_knob(1e6, "stream_k") == 1


def test_padding_copies_are_charged_per_kernel_alignment():
    # 1000 x 600 x 50000: the Triton path pads N=600 to 608 (16 elements) -> B copied,
    # read + write: 2 x 50000 x 600 x 2 B = 120 MB at 4800 B/ns = 25000 ns; K=50000 is a
    # multiple of 16, so A is not. The Gluon path pads to 8: 600 and 50000 need nothing.
    p = knobs.Problem(1000, 600, 50000, H200)
    assert knobs._pad_ns(p, "triton") == 25_000
    assert knobs._pad_ns(p, "gluon") == 0
    # K = 9000: A (2304 x 9000) and B (9000 x 2304) copied for Triton (9000 % 16 = 8):
    # 2 x (2304 x 9000 x 2) x 2 B / 4800 B/ns = 34560 ns
    assert knobs._pad_ns(knobs.Problem(2304, 2304, 9000, H200), "triton") == 34_560


def test_uneven_k_only_for_the_triton_kernels():
    cand = next(c for c in knobs.CANDIDATES if c[:5] == (128, 128, 64, 8, 4))
    # K = 9000 pads to 9008 (16): 9008 % 64 = 48 -> the masked last iteration
    assert knobs._base(knobs.Problem(2304, 2304, 9000, H200), cand, "triton")["uneven_k"]
    assert not knobs._base(knobs.Problem(2304, 2304, 9024, H200), cand, "triton")["uneven_k"]
    assert not knobs._base(knobs.Problem(2304, 2304, 9000, H200), cand, "gluon")["uneven_k"]
    slow = knobs._base(knobs.Problem(2304, 2304, 9000, H200), cand, "triton")["t_iter"]
    even = knobs._base(knobs.Problem(2304, 2304, 9024, H200), cand, "triton")["t_iter"]
    assert math.isclose(slow / even, knobs.CALIBRATION["uneven_k_factor"])


def test_gluon_only_on_hopper():
    a100 = match_gpu("A100")
    for strategy in ("split_k", "stream_k"):
        assert knobs.CHOOSERS[strategy](knobs.Problem(896, 2432, 32768, a100))["GLUON"] == 0
    # on the H200 a 0.2 ms Stream-K GEMM runs the Gluon kernel (modelled >= 60 us)
    assert knobs.stream_k(knobs.Problem(896, 2432, 32768, H200))["GLUON"] == 1


def test_calibrated_table_picks_the_measured_best_tile_of_the_issue_shape():
    # issue 15's Stream-K example: 128x256 tiles ran 0.29 ms; on the measured grid
    # (docs/verification/h200_tile_grid.jsonl) the fastest is the Gluon kernel's
    # 128x128x64 / 4 warps / 4 stages at 0.2196 ms in a CUDA graph; since round 11 the
    # Gluon Stream-K kernel runs that tile with 5 stages (gemm_tiles.sk_gluon_stages)
    cfg = knobs.stream_k(knobs.Problem(896, 2432, 32768, H200))
    tile = tuple(cfg[k] for k in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "num_warps", "num_stages"))
    assert (tile, cfg["GLUON"]) == ((128, 128, 64, 4, 5), 1)


def test_gpus_yaml_table_is_the_fit_of_the_committed_grid():
    # the tile table is data fitted to measurements, not edited by hand: re-fit the
    # committed H200 grid and compare with gpus.yaml's gemm_tiles
    import importlib.util
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    spec = importlib.util.spec_from_file_location("fit_tiles", root / "benchmarks/fit_tiles.py")
    fit_tiles = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fit_tiles)
    df = fit_tiles.load(str(root / "docs/verification/h200_tile_grid.jsonl"))
    x, tiles, fixed, _ = fit_tiles.fit(df)
    cal = knobs.CALIBRATION
    assert math.isclose(x[-1], cal["uneven_k_factor"], abs_tol=0.002)
    for (family, kernel), value in zip(fixed, x[len(tiles) : -1], strict=True):
        assert math.isclose(value, cal["fixed_us"][family][kernel], abs_tol=0.1)
    table = {tuple(row[:5]): row[5:] for row in knobs.CANDIDATES}
    for (kernel, tile), eff in zip(tiles, x[: len(tiles)], strict=True):
        assert math.isclose(eff, table[tile][knobs.KERNELS.index(kernel)], abs_tol=0.002)


def test_stream_k_policies_split_tiles_between_waves_and_stream_k():
    # 28 tiles on 3 CTAs: 9 full waves + 1 tile
    tiles = {p: knobs.sk_data_parallel_tiles(28, 3, p) for p in knobs.SK_POLICIES}
    assert tiles == {0: 28, 1: 27, 2: 24, -1: 0}
    # no partial wave (264 = 2 x 132): data-parallel unless every tile is Stream-K
    assert [knobs.sk_data_parallel_tiles(264, 132, p) for p in (0, 1, 2, -1)] == [264] * 3 + [0]


def test_stream_k_partials_and_the_most_shared_tile():
    # 4 tiles x 10 iterations over 7 CTAs: shares 6,6,6,6,6,5,5 end at 6,12,18,24,30,35;
    # 30 is a tile boundary, so 5 partials; tile 1 [10, 20) holds the ends 12 and 18: 3 CTAs
    assert knobs._sk_partials(40, 7, 10) == (5, 3)
    assert knobs._sk_partials(40, 4, 10) == (0, 1)  # one whole tile per CTA


def test_stream_k_policy_follows_the_measured_h200_winner():
    # benchmarks/sk_policies.py on an H200 (docs/verification/h200_sk_policies.json), GPU
    # time in a CUDA graph: at 896x2432x32768 (133 tiles of 128x128 on 132 CTAs) policy 2
    # ran 222 us, policy 1 (the one extra tile split 132 ways) 279 us, data-parallel 304 us;
    # at 768x5120x7000 (120 tiles of 128x256, one 0.91-full wave) data-parallel 95-97 us
    # against 122 us for Stream-K
    assert knobs.stream_k(knobs.Problem(896, 2432, 32768, H200))["SK_TILES"] == 2
    assert knobs.stream_k(knobs.Problem(768, 5120, 7000, H200))["SK_TILES"] == 0
    # a policy can be forced (the tile is chosen the same way)
    forced = knobs.stream_k(knobs.Problem(768, 5120, 7000, H200), policies=(-1,))
    assert forced["SK_TILES"] == -1 and forced["sk_tiles"] == forced["tiles"]


# -- the data-parallel-only tiles (round 9): 128 x 192 and 192 x 128, Gluon only, whole tiles
DP_ONLY = {(128, 192), (192, 128)}


def _tile(cfg: dict) -> tuple[int, int]:
    return cfg["BLOCK_M"], cfg["BLOCK_N"]


def test_the_data_parallel_only_tiles_are_gluon_rows_of_the_table():
    rows = {tuple(c[:5]): c[5:] for c in knobs.CANDIDATES}
    for bm, bn in DP_ONLY:
        eff_triton, eff_gluon = rows[(bm, bn, 64, 8, 4)]
        assert eff_triton is None and 0 < eff_gluon < 1
        assert planner.data_parallel_only(bm, bn)
        p = knobs.Problem(1536, 1792, 4096, H200)
        assert knobs._base(p, (bm, bn, 64, 8, 4, eff_triton, eff_gluon), "triton") is None
    assert not any(planner.data_parallel_only(*c[:2]) for c in knobs.CANDIDATES
                   if _tile({"BLOCK_M": c[0], "BLOCK_N": c[1]}) not in DP_ONLY)  # fmt: skip
    # elsewhere (Triton, a Stream-K share) the tile rounded up: rows of the table
    assert _tile(planner.power_of_two_tile({"BLOCK_M": 128, "BLOCK_N": 192})) == (128, 256)
    assert _tile(planner.power_of_two_tile({"BLOCK_M": 192, "BLOCK_N": 128})) == (256, 128)
    cfg = {"BLOCK_M": 128, "BLOCK_N": 128}
    assert planner.power_of_two_tile(cfg) is cfg


def _t_iter(bm: int, bn: int) -> float:
    """ns per K-iteration of a Gluon tile by hand: 2 BM BN BK FLOP at the H200's per-SM rate
    (989 TFLOP/s over 132 SMs) times the table's efficiency."""
    eff = next(c[6] for c in knobs.CANDIDATES if c[:2] == (bm, bn))
    return 2 * bm * bn * 64 / (989e12 / 132 / 1e9 * eff)


def test_stream_k_runs_a_data_parallel_only_tile_where_it_fills_one_wave():
    fixed = knobs.CALIBRATION["fixed_us"]["data_parallel_only"]["gluon"] * 1e3
    # 1536 x 1792 x 4096: 12 x 10 = 120 tiles of 128 x 192 on 132 SMs (one wave; 128 x 256
    # gives 84, 192 x 128 112: one wave too, at a lower efficiency), 64 K-iterations, no
    # padding (K, N multiples of 8): fixed + 64 t_iter
    cfg = knobs.stream_k(knobs.Problem(1536, 1792, 4096, H200))
    assert (_tile(cfg), cfg["GLUON"], cfg["SK_TILES"], cfg["sk_tiles"]) == ((128, 192), 1, 0, 0)
    assert cfg["model_ns"] == round(fixed + 64 * _t_iter(128, 192))
    # 1000 x 3000 x 5000: 8 x 16 = 128 tiles, 79 K-iterations, and the copy of A to 128-byte
    # rows (its rows and B's both off 32-byte sectors: planner.line_copy_a, since round 12)
    p = knobs.Problem(1000, 3000, 5000, H200)
    cfg = knobs.stream_k(p)
    assert (_tile(cfg), cfg["GLUON"], cfg["SK_TILES"]) == ((128, 192), 1, 0)
    copy = knobs.planner.line_copy_a_ns(p)
    assert cfg["model_ns"] == round(fixed + 79 * _t_iter(128, 192) + copy)
    # 3000 x 1000 x 10000: 128 x 192 gives 24 x 6 = 144 tiles, two waves (the second of 12
    # tiles costs a whole one: measured 172-182 us against 106 for one wave of 192 x 128's
    # 16 x 8 = 128), so 192 x 128 with its 157 K-iterations
    p = knobs.Problem(3000, 1000, 10000, H200)
    cfg = knobs.stream_k(p)
    assert (_tile(cfg), cfg["GLUON"], cfg["SK_TILES"]) == ((192, 128), 1, 0)
    assert cfg["model_ns"] == round(fixed + 157 * _t_iter(192, 128))
    wide = next(c for c in knobs.CANDIDATES if c[:2] == (128, 192))
    two_waves = planner.stream_k_whole_tiles_ns(p, knobs._base(p, wide, "gluon"))["model_ns"]
    assert math.isclose(two_waves, fixed + 2 * 157 * _t_iter(128, 192))
    # 896 x 4864 x 8192 (7 x 26 = 182 tiles of 128 x 192: 1.4 waves): Stream-K as before
    cfg = knobs.stream_k(knobs.Problem(896, 4864, 8192, H200))
    assert (_tile(cfg), cfg["SK_TILES"]) == ((128, 256), 2)


SHARE_SHAPES = [(m, n, k) for m in (640, 1000, 1536, 2304, 3000, 4224)
                for n in (512, 1000, 1792, 3000, 4864) for k in (1024, 8192, 40000)]  # fmt: skip


def test_a_data_parallel_only_tile_is_never_a_split_k_or_stream_k_share(monkeypatch):
    # made far faster than every other tile (efficiency 1.5), the planner still never runs
    # the two-accumulator tiles as split-K partials or with a Stream-K share: their partial
    # tiles would be two tensors (the kernels hold a power-of-two tile)
    rows = [tuple(c[:6]) + ((1.5,) if planner.data_parallel_only(*c[:2]) else (c[6],))
            for c in knobs.CANDIDATES]  # fmt: skip
    monkeypatch.setattr(planner, "CANDIDATES", rows)
    chosen = 0
    for m, n, k in SHARE_SHAPES:
        p = knobs.Problem(m, n, k, H200)
        assert _tile(knobs.split_k(p)) not in DP_ONLY, (m, n, k)
        cfg = knobs.stream_k(p)
        if _tile(cfg) in DP_ONLY:
            chosen += 1
            assert cfg["sk_tiles"] == 0 and cfg["GLUON"] == 1, (m, n, k, cfg)
        for policies in ((-1,), (1, 2, -1)):
            cfg = knobs.stream_k(p, policies=policies)
            assert _tile(cfg) not in DP_ONLY or cfg["sk_tiles"] == 0, (m, n, k, policies, cfg)
        assert _tile(knobs.stream_k(p, policies=(-1,))) not in DP_ONLY
    assert chosen > len(SHARE_SHAPES) // 2  # (so the check above is not empty)


def test_the_data_parallel_only_rows_are_the_fit_of_the_committed_rows(monkeypatch):
    # gpus.yaml's efficiencies of the two tiles and fixed_us.data_parallel_only: the fit of
    # `benchmarks/sk_round13.py --fit-dp` (round 16; its YAML comment) to the 38
    # data-parallel-only graph times of rounds 9, 10 and 13, round 13's other terms held
    # (before round 16: fit_tiles.py --dp-only on rounds 8-9's rows, 0.731 / 0.707 / 3.9 us)
    import importlib.util
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    monkeypatch.chdir(root)  # (the script's default rows are paths from the repo's root)
    spec = importlib.util.spec_from_file_location("sk_round13", root / "benchmarks/sk_round13.py")
    sk_round13 = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sk_round13)
    points = sk_round13.fit_points(sk_round13.FIT_ROWS, sk_round13.FIT_DP_ROWS)
    before = [list(c) for c in knobs.CANDIDATES], json.dumps(knobs.CALIBRATION)
    eff_wide, eff_tall, fixed = sk_round13.fitted_dp(points)
    assert ([list(c) for c in knobs.CANDIDATES], json.dumps(knobs.CALIBRATION)) == before
    assert sum(pt[1][:2] in DP_ONLY for pt in points) == 38
    table = {c[:2]: c[6] for c in knobs.CANDIDATES}
    assert math.isclose(eff_wide, table[(128, 192)], abs_tol=0.002)
    assert math.isclose(eff_tall, table[(192, 128)], abs_tol=0.002)
    cal = knobs.CALIBRATION["fixed_us"]["data_parallel_only"]["gluon"]
    assert math.isclose(fixed, cal, abs_tol=0.01)


def test_stream_k_group_m_per_gluon_tile():
    # gemm_tiles.sk_group_m: the Gluon Stream-K kernel orders 192 x 128 tiles in groups of
    # 4 row-tiles (round 12: 3.7% faster than 8 at 3000 x 1000 x 10000, the one shape of
    # the 16 that chooses that tile); every other tile keeps the planner's 8
    cfg = knobs.stream_k(knobs.Problem(3000, 1000, 10000, H200))
    assert (cfg["BLOCK_M"], cfg["BLOCK_N"], cfg["GLUON"], cfg["GROUP_M"]) == (192, 128, 1, 4)
    assert knobs.stream_k(knobs.Problem(896, 4864, 8192, H200))["GROUP_M"] == 8
    # the Triton kernels keep 8 (a GPU without the Gluon kernel)
    assert knobs.stream_k(knobs.Problem(3000, 1000, 10000, match_gpu("A100")))["GROUP_M"] == 8


def test_a_is_copied_to_128_byte_rows_only_where_both_operands_sit_off_sectors():
    from advisor.configs.templates import planner

    # K = 5000 and N = 3000 bf16: rows of 10,000 and 6,000 B, multiples of 16 but not 32
    p = knobs.Problem(1000, 3000, 5000, H200)
    assert planner.off_sector_rows(p)
    # the copy: read + write of 1000 x 5056 x 2 B at 4800 B/ns = 4,213 ns, under 0.2 x the
    # 128 x 192 tile's one wave of 79 K-iterations (~45 us): copied
    assert math.isclose(planner.line_copy_a_ns(p), 2 * 1000 * 5056 * 2 / 4800)
    assert planner.line_copy_a(p, 128, 192)
    cfg = knobs.stream_k(p)
    assert (cfg["BLOCK_M"], cfg["BLOCK_N"], cfg["GLUON"]) == (128, 192, 1)
    # one operand on sectors (K = 10000: 20,000 B rows), one of them not on 16 bytes (padded
    # anyway), or both aligned: no copy
    for m, n, k in ((3000, 1000, 10000), (768, 5120, 7000), (999, 4865, 8191), (896, 4864, 8192)):
        q = knobs.Problem(m, n, k, H200)
        assert not planner.off_sector_rows(q) and not planner.line_copy_a(q, 128, 256)
    # the copy is not worth it where the GEMM is short next to A (N = 64: a tile's wave is
    # shorter than 5x the copy)
    q = knobs.Problem(8000, 40, 5000, H200)
    assert planner.off_sector_rows(q) and not planner.line_copy_a(q, 128, 128)


def test_stream_k_chooses_tile_and_policy_together():
    # round 13: 1920 x 1920 x 7168 (112 K-iterations). 128 x 256: 15 x 8 = 120 tiles, one
    # partial wave filled to 120 / 132 (CTAs: min(132, 120 x 112) = 132), policy 0:
    #   waves = 0.6 + 0.4 x 120/132 = 0.96364 (sk_partial_wave_floor 0.6)
    #   t_iter = 2 x 128 x 256 x 64 / (989e12 / 132 / 1e9 x 0.728) = 768.96 ns
    #   model = 2.0 us (sk_fixed_us.gluon) + 0.96364 x 112 x 768.96 = 84,990 ns
    # 128 x 128 (4 warps): 15 x 15 = 225 tiles, a full wave and 93 / 132 of one (policy 0):
    #   (1 + 0.6 + 0.4 x 93/132) x 112 x 420.92 + 2,000 = 90,713 ns: the joint choice
    #   takes 128 x 256 (measured 86.0 against 90.1 us). The tile step before round 13
    #   (stream_k_tile_ns: every K-iteration spread evenly, ceil(225 x 112 / 132) = 191
    #   per CTA) modelled 128 x 128 faster and took it.
    p = knobs.Problem(1920, 1920, 7168, H200)
    cfg = knobs.stream_k(p)
    assert (_tile(cfg), cfg["num_warps"], cfg["GLUON"], cfg["SK_TILES"]) == ((128, 256), 8, 1, 0)
    t_wide = 2 * 128 * 256 * 64 / (989e12 / 132 / 1e9 * 0.728)
    assert math.isclose(cfg["model_ns"], 2000 + (0.6 + 0.4 * 120 / 132) * 112 * t_wide, abs_tol=1)
    narrow = next(c for c in knobs.CANDIDATES if c[:5] == (128, 128, 64, 4, 4))
    b = knobs._base(p, narrow, "gluon")
    assert knobs.stream_k_ns(p, b, 0)["model_ns"] > cfg["model_ns"]
    assert knobs.stream_k_tile_ns(p, b)["model_ns"] < knobs.stream_k_tile_ns(
        p, knobs._base(p, next(c for c in knobs.CANDIDATES if c[:5] == (128, 256, 64, 8, 4)),
                       "gluon"))["model_ns"]  # fmt: skip


def test_stream_k_gluon_terms_are_the_stream_k_models_own():
    # sk_gluon_eff and sk_fixed_us: the Gluon Stream-K model's (round 13's refit); split-K
    # and the tile model (stream_k_tile_ns, fit_tiles.py's) keep the rows' 0.688 and
    # fixed_us.stream_k's 13.3 us
    p = knobs.Problem(1920, 1920, 7168, H200)
    wide = next(c for c in knobs.CANDIDATES if c[:5] == (128, 256, 64, 8, 4))
    b = knobs._base(p, wide, "gluon")
    flops = 2 * 128 * 256 * 64
    assert math.isclose(b["t_iter"], flops / (989e12 / 132 / 1e9 * 0.688))
    assert math.isclose(planner._sk_tile(p, b)["t_iter"], flops / (989e12 / 132 / 1e9 * 0.728))
    assert knobs.CALIBRATION["fixed_us"]["stream_k"]["gluon"] == 13.3
    # the tile model: 13.3 us + ceil(120 x 112 / 132) = 102 iterations at the row's rate
    # + the 120 tiles' fp32 partials written and read back (policy 2: all Stream-K)
    tile_model = 13300 + 102 * b["t_iter"] + 120 * 128 * 256 * 4 * 2 / 4800
    assert math.isclose(knobs.stream_k_tile_ns(p, b)["model_ns"], tile_model)
    # the Triton kernel keeps fixed_us.stream_k (15.8 us) in the Stream-K model
    tri = knobs._base(p, wide, "triton")
    dp = knobs.stream_k_ns(p, tri, 0)["model_ns"]
    assert math.isclose(dp, 15800 + (0.6 + 0.4 * 120 / 132) * 112 * tri["t_iter"])


def test_long_stream_k_shares_cut_inside_tiles_cost_more():
    # gemm_tiles.sk_long_share [1.25, 0.7]: 2304 x 2304 x 9000 on 128 x 128 (4 warps), all
    # Stream-K: 18 x 18 = 324 tiles of 141 K-iterations over 132 CTAs, a share of
    # 324 / 132 = 2.4545 tiles cut inside tiles; its iterations past 1.25 tiles cost 0.7
    # more: 0.7 x (2.4545 - 1.25) x 141 = 118.9 K-iterations x 420.92 ns = 50,050 ns
    # (measured: 236.3 us against 175.0 for policy 1, round 13)
    p = knobs.Problem(2304, 2304, 9000, H200)
    narrow = next(c for c in knobs.CANDIDATES if c[:5] == (128, 128, 64, 4, 4))
    b = knobs._base(p, narrow, "gluon")
    with_term = knobs.stream_k_ns(p, b, -1)["model_ns"]
    saved = knobs.CALIBRATION["sk_long_share"]
    try:
        knobs.CALIBRATION["sk_long_share"] = [1.25, 0.0]
        without = knobs.stream_k_ns(p, b, -1)["model_ns"]
        # a share of exactly 2 whole tiles is cut nowhere inside a tile: no extra cost
        # (704 x 5632 x 8192: 6 x 44 = 264 tiles on 132 CTAs, measured no slower, round 13)
        q = knobs.Problem(704, 5632, 8192, H200)
        bq = knobs._base(q, narrow, "gluon")
        plain = knobs.stream_k_ns(q, bq, -1)["model_ns"]
    finally:
        knobs.CALIBRATION["sk_long_share"] = saved
    extra = 0.7 * (324 / 132 - 1.25) * 141 * b["t_iter"]
    assert math.isclose(b["t_iter"], 2 * 128 * 128 * 64 / (989e12 / 132 / 1e9 * 0.665))
    assert math.isclose(with_term - without, extra) and 49_900 < extra < 50_200
    assert knobs.stream_k_ns(q, bq, -1)["model_ns"] == plain
    # a share of 1.09 tiles (1536 x 3072 x 6144, 128 x 256, 144 tiles): under 1.25, none
    r = knobs.Problem(1536, 3072, 6144, H200)
    wide = knobs._base(r, next(c for c in knobs.CANDIDATES if c[:5] == (128, 256, 64, 8, 4)),
                       "gluon")  # fmt: skip
    knobs.CALIBRATION["sk_long_share"] = [1.25, 0.0]
    try:
        base = knobs.stream_k_ns(r, wide, -1)["model_ns"]
    finally:
        knobs.CALIBRATION["sk_long_share"] = saved
    assert knobs.stream_k_ns(r, wide, -1)["model_ns"] == base
