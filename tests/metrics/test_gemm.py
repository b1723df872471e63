import numpy as np
import pandas as pd
import pytest

from advisor.data import name_matches
from advisor.errors import AdvisorInputError
from advisor.metrics.gemm import (
    GemmOption,
    ShapeOption,
    grid_fits,
    mnk_from_sizes,
    nvtx_shapes,
    tile_from_grid,
    tile_from_name,
)


@pytest.mark.parametrize(
    "op, sizes, expected",
    [
        ("mm", [[896, 8192], [8192, 4864]], (1, 896, 4864, 8192)),
        ("matmul", [[896, 8192], [8192, 4864]], (1, 896, 4864, 8192)),
        ("addmm", [[4864], [896, 8192], [8192, 4864]], (1, 896, 4864, 8192)),
        ("bmm", [[8, 128, 64], [8, 64, 256]], (8, 128, 256, 64)),
        ("linear", [[4, 32, 1024], [4096, 1024], [4096]], (1, 128, 4096, 1024)),
        ("mm", [[896, 8192], [4096, 4864]], None),  # inner dims disagree: no shape
        ("mm", [[896]], None),
    ],
)
def test_mnk_from_recorded_sizes(op, sizes, expected):
    assert mnk_from_sizes(op, sizes) == expected


def test_nvtx_shapes_parse_pytorch_record_shapes_text():
    nvtx = pd.DataFrame(
        {
            "start": [0, 10, 100],
            "end": [50, 40, 150],
            "text": [
                "aten::matmul, seq = 0, op_id = 1, sizes = [[896, 8192], [8192, 4864]], x",
                "aten::mm, seq = 0, op_id = 2, sizes = [[896, 8192], [8192, 4864]], x",
                "aten::relu, seq = 1, sizes = [[3, 4]]",
            ],
            "tid": [7, 7, 7],
        }
    )
    s = nvtx_shapes(nvtx)
    assert s[["op", "m", "n", "k"]].values.tolist() == [
        ["matmul", 896, 4864, 8192],
        ["mm", 896, 4864, 8192],
    ]


def test_op_ranges_without_sizes_still_say_gemm():
    nvtx = pd.DataFrame(
        {"start": [0, 5], "end": [9, 8], "tid": [1, 1],
         "text": ["aten::addmm", "aten::_grouped_mm, seq = 3"]}
    )  # fmt: skip
    s = nvtx_shapes(nvtx)
    assert s["op"].tolist() == ["addmm", "_grouped_mm"] and s["m"].isna().all()


@pytest.mark.parametrize(
    "m, n, grid, tile, fits",
    [
        (1408, 1664, (11, 13, 1), None, True),  # 128 x 128 tiles
        (1408, 1664, (13, 11, 1), None, True),  # the same, x and y swapped
        (1408, 1664, (143, 1, 1), None, True),  # one program per tile, 1-D
        (1408, 1664, (2, 2, 1), None, False),  # would need 704 x 832 tiles
        (896, 4864, (7, 19, 4), None, True),  # z is free (split-K slices)
        (896, 4864, (7, 19, 1), (128, 128), False),  # the named tile gives 7 x 38
        (896, 4864, (7, 38, 1), (128, 128), True),
    ],
)
def test_grid_fits_by_hand(m, n, grid, tile, fits):
    assert grid_fits(m, n, grid, tile) is fits


def test_gemm_names_and_option():
    names = pd.Series([
        "triton_tem_fused_addmm_relu_0", "Cijk_Alik_Bljk_HHS_BH_MT128x128x64_MI32x32x8x1_SN",
        "matmul_kernel", "_kernel", "vectorized_elementwise_kernel", "triton_poi_fused_add_0",
    ])  # fmt: skip
    assert name_matches(names, "gemm_kernels").tolist() == [True, True, True, False, False, False]
    assert GemmOption.parse("^_kernel$").pattern.search("_kernel")
    for bad in ("", "[", "  "):
        with pytest.raises(AdvisorInputError):
            GemmOption.parse(bad)


def test_tiles_from_names():
    t = tile_from_name(
        pd.Series(
            [
                "nvjet_sm90_tst_192x192_64x3_2x1_v_bz_coopB_NNN",
                "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize64x128x8_stage3",
                "cutlass3x_sm90_tensorop_gemm_bf16_bf16_f32_bf16_bf16_128x256x64_1x1x1_0_tnn",
                "tiled_gemm_kernel",
                None,  # (no name: no tile)
                "nvjet_sm90_tst_192x192_64x3_2x1_v_bz_coopB_NNN",  # (a name again: its tile)
            ]
        )
    )
    assert t.fillna(-1).values.tolist() == [
        [192, 192, 64],
        [64, 128, 8],
        [128, 256, 64],
        [-1, -1, -1],
        [-1, -1, -1],
        [192, 192, 64],
    ]


def test_tile_from_grid_reproduces_the_launch():
    m, n = tile_from_grid([896, 256, 100], [4864, 256, 100], [7, 2, 3], [19, 2, 5])
    # 896/128 = 7, 4864/256 = 19; 256/128 = 2; 100 rows in 3 tiles: 64 -> 2, 32 -> 4: none
    assert m.tolist()[:2] == [128, 128] and n.tolist()[:2] == [256, 128]
    assert pd.isna(m[2])


def test_shape_option_parsing():
    opt = ShapeOption.parse("tail_gemm=896x4864x8192")
    assert (opt.m, opt.n, opt.k) == (896, 4864, 8192) and opt.pattern.search("tail_gemm")
    for bad in ("tail_gemm=896x4864", "=1x2x3", "x=0x1x1", "x=1x1x99999999", "[=1x1x1"):
        with pytest.raises(AdvisorInputError):
            ShapeOption.parse(bad)


def test_tile_columns_by_hand():
    # 896 x 4864 x 8192, 2 launches in 1 ms: 2 * 896 * 4864 * 8192 * 2 = 142.81e9 FLOP
    # -> 142.81 TFLOP/s, 14.44 % of 989. No tile in the first name: the grid 7 x 38 gives
    # 128 x 128 (ceil(896/128) = 7, ceil(4864/128) = 38) -> 266 tiles, K tile unknown. The
    # second name says 128x256x64: ceil(896/128) * ceil(4864/256) = 7 * 19 = 133 tiles,
    # 8192 / 64 = 128 K iterations.
    from advisor.metrics.gemm import add_tile_columns

    k = pd.DataFrame({
        "name": ["tiled_gemm", "cutlass_tilesize128x256x64_gemm"], "m": 896.0, "n": 4864.0,
        "k": 8192.0, "batch": 1.0, "grid_x": [7, 7], "grid_y": [38, 19], "launches": 2,
        "total_ns": 1e6, "peak_tflops": 989.0,
    })  # fmt: skip
    add_tile_columns(k)
    assert k[["tile_m", "tile_n"]].values.tolist() == [[128, 128], [128, 256]]
    assert k["tile_source"].tolist() == ["grid", "name"]
    assert k["tiles"].tolist() == [266, 133]
    assert np.isnan(k["k_iters"][0]) and k["k_iters"][1] == 128
    assert k["tflops"].round(2).tolist() == [142.81, 142.81]
    assert round(k["tflops_fraction"][0], 4) == 0.1444
