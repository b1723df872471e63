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


def test_host_bound_steps_by_hand():
    # three steps "step_1".."step_3", 2 ms apart; each: 20 kernels of 1 us, each launched
    # 9.5 us after the previous one's start (the call ends after the previous kernel: the
    # gaps are host-bound), so a step's GPU window is 20 * 1 + 19 * 9 = 191 us, its launch
    # overhead 19 * 9 = 171 us (share 0.895; the 1.8 ms gap before steps 2 and 3, host time
    # outside any range, is the transition, not the step); one CUDA graph per step saves
    # 19 * (9000 - 256) = 166,136 ns: 498,408 ns over the three steps, 87 % of their 573 us
    from builders import trace

    from advisor.analysis import analyze
    from advisor.findings import find

    kernels, api, nvtx = [], [], []
    corr = 0
    for step in range(3):
        t0 = step * 2_000_000
        nvtx.append((f"step_{step + 1}", t0, t0 + 200_000))
        for i in range(20):
            corr += 1
            start = t0 + 10_000 + i * 10_000
            api.append(("cudaLaunchKernel", start - 500, start - 100, corr))
            kernels.append(dict(start=start, end=start + 1000, correlation=corr))
    a = analyze(trace(kernels, api, nvtx))
    steps = build_tables(a)["steps"].iloc[0]
    assert (steps["name"], steps["steps"], steps["steady_steps"]) == ("step", 3, 3)
    assert (steps["step_ns"], steps["busy_ns"], steps["overhead_ns"]) == (191_000, 20_000, 171_000)
    assert steps["graph_saving_ns"] == 3 * 19 * (9000 - 256)
    assert (steps["launches"], steps["median_gap_ns"]) == (20, 9000)
    (f,) = [f for f in find(a) if f.rule == "host-bound-steps"]
    assert (f.strategy, f.region, f.est_savings_ns) == ("cuda_graph", "step", 498_408)
    assert f.severity == "high"  # 498 us of the steps' 573 us
