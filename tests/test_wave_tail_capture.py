"""Held-out H200 capture for the non-GEMM wave-tail diagnosis (issue 15):
sample_traces/kineto/h200_wave_tail.pt.trace.json.gz, torch.profiler, written by
sample_traces/workloads/wave_tail.py (facts in h200_wave_tail.facts.json).

By hand, from the facts: ``rowwise_poly_norm`` has 256 threads (8 warps) and 46 registers:
per warp ceil(46 * 32 / 256) * 256 = 1536 registers, 65536 / 1536 = 42 warps -> 5 CTAs per
SM (registers limit), 5 x 132 = 660 slots; its grid of 825 CTAs is 825 / 660 = 1.25 waves,
and the last wave's slots are 1 - 1.25 / 2 = 37.5 % idle. No name, op or shape calls it a
GEMM and its CTAs are light (46 registers, no shared memory): wave-tail-kernel, a persistent
grid-stride loop, with the script that runs one.
"""

import json

from conftest import SAMPLES, analysis_of

from advisor.configs.emit import emit
from advisor.findings import find

TRACE = SAMPLES / "kineto" / "h200_wave_tail.pt.trace.json.gz"
FACTS = json.loads((SAMPLES / "kineto" / "h200_wave_tail.facts.json").read_text())


def test_wave_tail_on_a_non_gemm_kernel(tmp_path):
    assert (FACTS["registers"], FACTS["ctas_per_sm"], FACTS["grid"]) == (46, 5, 825)
    a = analysis_of(TRACE)
    (f,) = [x for x in find(a) if x.kernel == "rowwise_poly_norm"]
    assert (f.rule, f.strategy, f.gemm_by) == ("wave-tail-kernel", "persistent", None)
    ev = f.evidence
    assert (ev["grid_blocks"], ev["slots"], ev["waves"]) == (825, 660, 1.25)
    assert ev["tail_fraction"] == 0.375 and ev["launches"] == 40
    (done,) = emit([f], a.trace.gpus, tmp_path)
    assert done.config[0].endswith("_persistent_rowwise_poly_norm_dev0.py")
    assert (done.knobs["TRACE_GRID"], done.knobs["SLOTS"], done.knobs["num_warps"]) == (825, 660, 8)
