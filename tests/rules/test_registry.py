"""The registries (advisor/rules/registry.py): each closed set is defined once, and every table
keyed by it, rule and document agrees with it."""

from pathlib import Path

import pytest

from advisor.errors import AdvisorInputError
from advisor.rules.engine import LOCATION, load_rules, parse_rules
from advisor.rules.registry import (
    GEMM_STRATEGIES,
    STRATEGIES,
    EmitKind,
    Scope,
    emit_problem,
    strategy,
)
from advisor.rules.tables import SCOPES

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_every_scope_has_its_table_and_its_location():
    assert set(SCOPES) == set(LOCATION) == set(Scope)


def test_members_are_their_text():
    # printed, formatted, compared and used as keys as the plain names they replace
    assert str(Scope.KERNELS) == f"{Scope.KERNELS}" == f"{Scope.KERNELS:>7}".strip() == "kernels"
    assert Scope("stages") is Scope.STAGES and EmitKind.GEMM == "gemm"
    assert {"kernels": 1}[Scope.KERNELS] == 1 and {Scope.REGIONS: 2}["regions"] == 2


def test_the_shipped_rules_use_registered_strategies_and_every_one_is_documented():
    rules = load_rules()
    assert {r.spec.strategy for r in rules} <= set(STRATEGIES)
    json_md = (DOCS / "json.md").read_text()
    assert [s for s in STRATEGIES if f"`{s}`" not in json_md] == []
    rules_md = (DOCS / "rules.md").read_text()
    assert [s for s in GEMM_STRATEGIES if f"`{s}`" not in rules_md] == []
    # the rule format's comments name every scope and emit kind
    lines = rules_md.splitlines()
    at = next(i for i, line in enumerate(lines) if "scope: kernels" in line)
    assert [s for s in Scope if s not in lines[at] + lines[at + 1]] == []
    emit_line = next(line for line in rules_md.splitlines() if "emit: {kind: gemm}" in line)
    assert [k for k in EmitKind if k not in emit_line] == []


def test_gemm_strategies_have_a_planner_and_a_script():
    assert GEMM_STRATEGIES == ("split_k", "stream_k", "tile_reshape", "persistent",
                               "warp_specialization")  # fmt: skip
    for name, s in STRATEGIES.items():
        assert s.name == name and s.doc
        assert s.gemm == (s.template is not None) == (name in GEMM_STRATEGIES)
    assert strategy("warp_specialization").min_cc == (9, "TMA/warp-specialized kernels")


def test_an_unregistered_strategy_is_advice_only():
    mine = strategy("my_own_trick")
    assert not mine.gemm and mine.snippet == "" and mine.note == "advice.md"
    assert emit_problem(EmitKind.ADVICE, "my_own_trick", set()) is None
    assert "not 'my_own_trick'" in emit_problem(EmitKind.GEMM, "my_own_trick", {"m", "n", "k"})


RULE = """rules:
  - id: mine
    scope: kernels
    when: gemm and has_shape
    savings: total_ns
    strategy: {strategy}
    emit: {{kind: {kind}}}
"""


@pytest.mark.parametrize(
    ("strategy_name", "kind", "says"),
    [
        ("cuda_graph", "gemm", "kind 'gemm' writes GEMM scripts for the strategies split_k, "
                               "stream_k, tile_reshape, persistent, warp_specialization only, "
                               "not 'cuda_graph'"),
        ("my_trick", "gemm", "not 'my_trick' (emit kind advice writes a note for any strategy)"),
        ("stream_k", "gemmm", "'gemmm' is not one of 'gemm', 'launch', 'grid_stride', 'overlap' or "
                              "'advice'"),
    ],
)  # fmt: skip
def test_a_user_rule_is_checked_against_the_registries_when_loaded(strategy_name, kind, says):
    text = RULE.format(strategy=strategy_name, kind=kind)
    with pytest.raises(AdvisorInputError) as exc:
        parse_rules(text, "my_rules.yaml")
    line = str(exc.value)
    assert line.startswith("my_rules.yaml: rule 'mine': field 'emit.kind': ") and says in line
    assert "\n" not in line


def test_a_rules_scope_and_emit_kind_are_the_registrys_members():
    (rule,) = parse_rules(RULE.format(strategy="split_k", kind="gemm"), "my.yaml")
    assert rule.spec.scope is Scope.KERNELS and rule.spec.emit.kind is EmitKind.GEMM
