"""GEMM identity from evidence on a held-out H200 capture whose GEMMs names do not give away
(sample_traces/h200_gemm_evidence.sqlite; facts in h200_gemm_evidence.facts.json).

Hand-computed expectations (H200: 132 SMs, 233472 B shared memory per SM, 1024 B reserved
per CTA):
- underfilled_bare: ``_kernel`` 64x128 tiles, 4 stages: 98304 B + 1024 -> 2 CTAs/SM, 264
  slots; grid 3x3 = 9 CTAs -> waves 9/264 = 0.0341: split_k, nothing says GEMM -> unconfirmed.
- tail_bare: 128x128 tiles, 4 stages: 131072 B + 1024 -> 1 CTA/SM, 132 slots; grid 11x13 =
  143 CTAs -> waves 1.0833, tail 1 - 1.0833/2 = 0.4583, last wave 8.3 % full: stream_k.
- small_bare: 2x2 = 4 CTAs, 1 CTA/SM -> waves 4/132 = 0.0303, 57 us per launch: split_k.
- compiled_addmm: inductor's triton_tem_fused_addmm_relu_0: a GEMM by name.
- linear_op_shapes: cuBLAS under emit_nvtx(record_shapes=True): a GEMM by its op, 1000 x
  3000 x 5000 from aten::linear's sizes [[1000, 5000], [3000, 5000]].
"""

import json

import numpy as np
import pytest
from conftest import SAMPLES

from advisor.analysis import analyze
from advisor.findings import find
from advisor.metrics.gemm import GemmOption, ShapeOption
from advisor.rules.finding import finding_dict
from advisor.rules.tables import build_tables
from advisor.trace.load import load_trace

TRACE = SAMPLES / "h200_gemm_evidence.sqlite"
FACTS = json.loads((SAMPLES / "h200_gemm_evidence.facts.json").read_text())


@pytest.fixture(scope="module")
def trace():
    return load_trace(TRACE)


def kernels(a):
    return build_tables(a)["kernels"].set_index("region")


def findings_by_region(a):
    return {f.region: f for f in find(a)}


def test_the_facts_match_the_trace(trace):
    k = kernels(analyze(trace))
    for region in ("underfilled_bare", "tail_bare", "small_bare"):
        f = FACTS[region]
        row = k.loc[region]
        assert [row.grid_x, row.grid_y, row.grid_z] == f["grid"]
        assert row.block_threads == f["block_threads"] and row.registers == f["n_regs"]
        assert row.smem_per_block == f["shared_bytes"]


def test_unnamed_gemms_get_their_strategies_unconfirmed(trace):
    a = analyze(trace)
    k = kernels(a)
    assert k.loc["underfilled_bare", "ctas_per_sm"] == 2
    assert np.isclose(k.loc["underfilled_bare", "waves"], 9 / 264)
    assert k.loc["tail_bare", "ctas_per_sm"] == 1
    assert np.isclose(k.loc["tail_bare", "waves"], 143 / 132)
    assert np.isclose(k.loc["tail_bare", "tail_fraction"], 1 - (143 / 132) / 2)
    f = findings_by_region(a)
    assert f["underfilled_bare"].strategy == "split_k"
    assert f["tail_bare"].strategy == "stream_k"  # not the generic persistent advice
    assert f["small_bare"].strategy == "split_k"
    for region in ("underfilled_bare", "tail_bare", "small_bare"):
        g = f[region]
        assert (g.gemm_by, g.confidence) == ("unconfirmed", "unconfirmed")
        assert "--gemm '^_kernel$'" in g.confirm and "GEMM unconfirmed" in g.summary
    assert not [x for x in find(a) if x.rule == "wave-tail-kernel"]


def test_gemms_by_name_and_by_op(trace):
    k = kernels(analyze(trace))
    assert k.loc["compiled_addmm", "name"] == "triton_tem_fused_addmm_relu_0"
    assert k.loc["compiled_addmm", "gemm_by"] == "name"
    lin = k.loc["linear_op_shapes"]
    assert lin["gemm_by"] == "op" and (lin.m, lin.n, lin.k) == (1000, 3000, 5000)


def test_shape_confirms_and_is_checked_against_the_grid(trace):
    a = analyze(trace, [ShapeOption.parse("_kernel=1408x1664x16384")])
    k = kernels(a)
    assert k.loc["tail_bare", "gemm_by"] == "shape" and k.loc["tail_bare", "m"] == 1408
    # 128x128 tiles reproduce 11x13; nothing reproduces 3x3 or 2x2 for 1408 x 1664
    assert np.isnan(k.loc["underfilled_bare", "m"]) and np.isnan(k.loc["small_bare", "m"])
    misfits = [n for n in a.notes if n.startswith("--shape _kernel=1408x1664x16384 not used")]
    assert len(misfits) == 2 and any("grid 2x2x1" in n for n in misfits)
    f = findings_by_region(a)
    assert (f["tail_bare"].gemm_by, f["tail_bare"].confidence) == ("shape", "confirmed")
    assert f["small_bare"].confidence == "unconfirmed"


def test_gemm_option_confirms_without_a_shape(trace):
    a = analyze(trace, gemms=[GemmOption.parse("^_kernel$")])
    f = findings_by_region(a)
    for region in ("underfilled_bare", "tail_bare", "small_bare"):
        assert (f[region].gemm_by, f[region].confidence) == ("user", "confirmed")
        assert f[region].confirm is None and "confirm" not in finding_dict(f[region])
