"""The knob search on the two H200 sample problems (hand-checked properties, not constants)."""

import math

from advisor.configs import knobs
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
    # the model prefers it to the data-parallel kernel by a wide margin
    assert (
        cfg["model_ns"] * 10 < knobs.data_parallel(knobs.Problem(256, 256, 65536, H200))["model_ns"]
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
    # gpus.yaml gluon_launch.min_model_us = 60: the Gluon kernel from 60 us modelled on
    from advisor.configs.knobs import gluon_knob
    from advisor.data import gpu_facts

    assert gpu_facts("gluon_launch")["min_model_us"] == 60
    assert gluon_knob(59_999) == 0 and gluon_knob(60_000) == 1 and gluon_knob(1e6) == 1
