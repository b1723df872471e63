"""The GEMM planner as emitted scripts carry it (issue 32): templates/planner.py imports nothing
of advisor, a script holds it whole (no text taken out or put in) followed by the facts
advisor planned with as literals, and that section alone plans what advisor plans."""

import ast
import sys
from dataclasses import asdict, fields, replace
from importlib import resources

import pytest

from advisor.configs import knobs
from advisor.configs.emit import PLANNER, TEMPLATE_PACKAGE, planner_section
from advisor.trace.gpus import builtin_gpus, match_gpu
from advisor.trace.model import GpuSpec

H200 = match_gpu("H200")
TEMPLATE = resources.files(TEMPLATE_PACKAGE).joinpath(PLANNER).read_text()
SHAPES = [(256, 256, 65536), (896, 4864, 8192), (1000, 600, 50000), (7, 5, 3), (64, 64, 128)]


def test_the_planner_template_imports_only_the_standard_library():
    imported = set()
    for node in ast.walk(ast.parse(TEMPLATE)):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, "a relative import"
            imported.add(node.module.split(".")[0])
    assert imported and imported <= set(sys.stdlib_module_names), imported
    # (inlined after a script's own code: a __future__ import there is a SyntaxError)
    assert "__future__" not in imported


def test_planner_facts_are_gpuspec_fields():
    # the facts advisor plans with are GpuSpec's fields of the same names, nothing restated
    assert {f.name for f in fields(knobs.PlannerFacts)} <= {f.name for f in fields(GpuSpec)}
    for gpu in builtin_gpus():
        facts = knobs.planner_facts(gpu)
        assert all(getattr(facts, f.name) == getattr(gpu, f.name) for f in fields(facts))
        assert facts.cc_major == gpu.cc_major, gpu.name


def _facts_calls(section: str) -> dict[str, dict]:
    """The statements after the template: call name -> its keyword arguments (literals)."""
    assert section.startswith(TEMPLATE)
    calls = {}
    for stmt in ast.parse(section[len(TEMPLATE) :]).body:
        call = stmt.value
        assert isinstance(call, ast.Call) and not call.args, ast.dump(stmt)
        target = stmt.targets[0].id + " = " if isinstance(stmt, ast.Assign) else ""
        calls[target + call.func.id] = {kw.arg: ast.literal_eval(kw.value) for kw in call.keywords}
    return calls


def test_emitted_planner_section_is_the_template_whole_then_the_facts():
    # (test_emit.py: the emitted scripts hold this section as it is)
    assert _facts_calls(planner_section(H200)) == {
        "calibrate": knobs.calibration(),
        "GPU = PlannerFacts": asdict(knobs.planner_facts(H200)),
    }


def _run_section(section: str) -> dict:
    """The planner section alone, run as a module (the standard library only)."""
    namespace: dict = {"__name__": "emitted_planner"}
    exec(compile(section, "emitted_planner", "exec"), namespace)
    return namespace


def _plan(chooser, problem, no_tile) -> dict | str:
    try:
        return chooser(problem)
    except no_tile as exc:
        return f"NoTileFits: {exc}"


@pytest.mark.parametrize(
    "gpu",
    [H200, match_gpu("A100-SXM4-80GB"), match_gpu("MI300X"), match_gpu("RTX-5090"),
     replace(H200, name="no datasheet", dense_fp16_tflops=None, memory_bandwidth_gbs=None)],
    ids=lambda g: g.name,
)  # fmt: skip
def test_emitted_planner_section_plans_what_advisor_plans(gpu):
    # on the CPU, without torch or triton: every strategy at several sizes, the same knobs
    # and modelled times (or the same NoTileFits) as advisor's own planner
    script = _run_section(planner_section(gpu))
    for strategy, chooser in knobs.CHOOSERS.items():
        for m, n, k in SHAPES:
            want = _plan(chooser, knobs.Problem(m, n, k, gpu), knobs.NoTileFits)
            problem = script["Problem"](m, n, k, script["GPU"])
            got = _plan(script["CHOOSERS"][strategy], problem, script["NoTileFits"])
            assert got == want, (gpu.name, strategy, (m, n, k))
