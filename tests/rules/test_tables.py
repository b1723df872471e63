"""The documented columns of each scope are exactly what the tables provide."""

import pytest

from advisor.rules.tables import SCOPES, build_tables


@pytest.mark.parametrize("fixture", ["single", "two_gpu", "graphlevel"])
def test_every_documented_column_exists(fixture, request):
    tables = build_tables(request.getfixturevalue(fixture))
    for scope, columns in SCOPES.items():
        missing = set(columns) - set(tables[scope].columns)
        assert not missing, (scope, missing)


def test_kernel_table_derived_columns(single):
    k = build_tables(single)["kernels"]
    tail = k[(k["region"] == "tail_gemm") & (k["name"] == "tiled_gemm_kernel")].iloc[0]
    assert tail.full_waves == 1 and tail.last_wave_fill == pytest.approx(1 / 132)
    assert tail.cc_major == 9 and tail.sm_count == 132 and tail.peak_tflops == 989
    assert not tail.has_shape  # the Triton GEMMs carry no NVTX shape


def test_shapes_from_nvtx_reach_the_kernel_table(single):
    k = build_tables(single)["kernels"]
    nvjet = k[(k["region"] == "cublas_gemm_shapes")].iloc[0]
    assert nvjet["name"].startswith("nvjet_sm90_tst_192x192")
    assert (nvjet.m, nvjet.n, nvjet.k, nvjet.batch) == (896, 4864, 8192, 1)
    assert (nvjet.tile_m, nvjet.tile_n, nvjet.tile_k) == (192, 192, 64)
    # ceil(896/192) * ceil(4864/192) = 5 * 26 = 130 tiles = the launch grid (2 x 65)
    assert nvjet.tiles == 130 == nvjet.grid_blocks
    assert nvjet.k_iters == 128  # 8192 / 64
    # 2*896*4864*8192 flop per launch over its measured time
    expected = 2 * 896 * 4864 * 8192 * nvjet.launches / nvjet.total_ns / 1e3
    assert nvjet.tflops == pytest.approx(expected)
    assert 300 < nvjet.tflops < 900


def test_region_table_comm_columns(two_gpu):
    r = build_tables(two_gpu)["regions"].set_index(["name", "device"])
    straggler = r.loc[("allreduce_straggler", 0)]
    assert straggler.last_device == 1
    assert straggler.hidable_comm_ns == pytest.approx(
        min(straggler.exposed_comm_ns - straggler.comm_wait_ns, straggler.compute_ns)
    )


def test_every_column_is_documented():
    from conftest import ROOT

    doc = (ROOT / "docs" / "rules.md").read_text()
    for scope, columns in SCOPES.items():
        assert f"### `{scope}`" in doc
        for col in columns:
            assert f"| `{col}` |" in doc, (scope, col)
