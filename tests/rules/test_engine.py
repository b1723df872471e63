"""Rule files: validation messages (file, rule id, field) and evaluation over tables."""

import textwrap

import pandas as pd
import pytest

from advisor.errors import AdvisorInputError
from advisor.rules.engine import evaluate, load_rules, parse_rules

GOOD = """
rules:
  - id: my-tail
    title: Tail on my kernels
    scope: kernels
    when:
      - waves >= 1
      - tail_fraction >= 0.25
    savings: tail_idle_ns
    strategy: stream_k
    message: "{waves:.3f} waves, {tail_fraction:pct} idle, {tail_idle_ns:time}"
    evidence: [waves, tail_fraction]
    rationale: because
    watch_for: things
"""


def test_builtin_rules_load_and_cover_the_strategies():
    rules = load_rules()
    ids = {r.id for r in rules}
    assert {
        "underfilled-gemm",
        "wave-tail-gemm",
        "wave-tail-reshape",
        "hopper-gemm-no-warp-specialization",
        "launch-bound-sequence",
        "exposed-comm",
        "sync-stall",
        "sync-copy",
        "rank-skew",
    } <= ids
    strategies = {r.spec.strategy for r in rules}
    assert {
        "split_k",
        "stream_k",
        "persistent",
        "warp_specialization",
        "comm_overlap",
    } <= strategies
    assert all(r.source == "rules/scheduling.yaml" for r in rules)


def bad(text: str) -> str:
    with pytest.raises(AdvisorInputError) as err:
        parse_rules(textwrap.dedent(text), "my.yaml")
    return str(err.value)


def test_good_file_parses():
    (rule,) = parse_rules(GOOD, "my.yaml")
    assert rule.id == "my-tail" and rule.when.columns == {"waves", "tail_fraction"}


def test_malformed_yaml():
    msg = bad("rules:\n  - id: x\n    title: [unclosed\n")
    assert msg.startswith("my.yaml: rule file is not valid YAML (line")


def test_not_a_rules_mapping():
    assert "expected a mapping with a 'rules:' list" in bad("- just\n- a list\n")


def test_unknown_metric_names_file_rule_and_field():
    msg = bad(GOOD.replace("tail_fraction >= 0.25", "tail_fractoin >= 0.25"))
    assert msg.startswith("my.yaml: rule 'my-tail': field 'when': unknown metric 'tail_fractoin'")


def test_unknown_metric_in_savings_evidence_and_message():
    assert "field 'savings': unknown metric 'idle'" in bad(
        GOOD.replace("savings: tail_idle_ns", "savings: idle")
    )
    assert "field 'evidence': unknown metric 'wavez'" in bad(
        GOOD.replace("[waves, tail_fraction]", "[wavez]")
    )
    assert "field 'message': unknown metric 'nope'" in bad(GOOD.replace("{waves:.3f}", "{nope}"))
    assert "field 'at': unknown metric 'worst_ns'" in bad(
        GOOD.replace("savings: tail_idle_ns", "savings: tail_idle_ns\n    at: worst_ns")
    )


def test_wrong_types_and_values():
    assert "field 'scope'" in bad(GOOD.replace("scope: kernels", "scope: 3"))
    assert "field 'scope'" in bad(GOOD.replace("scope: kernels", "scope: everything"))
    assert "field 'evidence'" in bad(GOOD.replace("[waves, tail_fraction]", "waves"))
    assert "field 'severity'" in bad(
        GOOD.replace("strategy: stream_k", "strategy: stream_k\n    severity: huge")
    )
    assert "field 'strategy'" in bad(GOOD.replace("strategy: stream_k", "strategy: Stream K"))


def test_missing_and_extra_fields():
    assert "rule 'my-tail': field 'strategy': missing (required)" in bad(
        "\n".join(line for line in GOOD.splitlines() if "strategy:" not in line)
    )
    assert "field 'colour'" in bad(GOOD + "    colour: red\n")


def test_an_emit_the_emitters_cannot_write_is_refused_at_load():
    # kind gemm for a strategy without a GEMM planner (it raised KeyError at --emit)
    gemm = (
        GOOD.replace("strategy: stream_k", "strategy: my_gemm_trick") + "    emit: {kind: gemm}\n"
    )
    assert bad(gemm).startswith(
        "my.yaml: rule 'my-tail': field 'emit.kind': kind 'gemm' writes GEMM scripts for the "
        "strategies split_k, stream_k, tile_reshape, persistent, warp_specialization only, "
        "not 'my_gemm_trick'"
    )
    # kind grid_stride reads grid_blocks, which only the kernels table has (KeyError before)
    regions = GOOD.replace("scope: kernels", "scope: regions").replace(
        "tail_fraction >= 0.25", "idle_ns > 0"
    )
    regions = regions.replace("waves >= 1", "gpu_busy_ns > 0").replace("tail_idle_ns", "idle_ns")
    regions = regions.replace("message: ", "message: x # ").replace("[waves, tail_fraction]", "[]")
    (ok,) = parse_rules(textwrap.dedent(regions), "my.yaml")  # (the rule itself is valid)
    assert "field 'emit.kind': kind 'grid_stride' reads the column(s) grid_blocks" in bad(
        regions + "    emit: {kind: grid_stride}\n"
    )
    # what the emitters can write: any strategy as advice, a GEMM strategy as gemm
    assert parse_rules(GOOD + "    emit: {kind: gemm}\n", "my.yaml")
    assert parse_rules(regions + "    emit: {kind: advice}\n", "my.yaml")


def test_optional_fields_have_defaults():
    (rule,) = parse_rules(GOOD.replace("    rationale: because\n", ""), "f.yaml")
    assert rule.spec.rationale == ""
    no_title = "\n".join(line for line in GOOD.splitlines() if "title:" not in line)
    (rule,) = parse_rules(no_title, "f.yaml")
    assert rule.spec.title == "my-tail"


def test_duplicate_ids(tmp_path):
    two = GOOD + GOOD.split("rules:\n", 1)[1]
    (tmp_path / "a.yaml").write_text(two)
    with pytest.raises(AdvisorInputError) as err:
        load_rules([tmp_path])
    assert "rule 'my-tail': duplicate id (first defined in" in str(err.value)
    # a user rule with a built-in id replaces the built-in one, in its place
    clash = GOOD.replace("id: my-tail", "id: wave-tail-gemm")
    (tmp_path / "a.yaml").write_text(clash)
    builtin = [r.id for r in load_rules()]
    rules = load_rules([tmp_path])
    assert [r.id for r in rules] == builtin
    assert rules[builtin.index("wave-tail-gemm")].source == str(tmp_path / "a.yaml")
    # ... but two user files with the same id are ambiguous
    (tmp_path / "b.yaml").write_text(clash)
    with pytest.raises(AdvisorInputError) as err:
        load_rules([tmp_path])
    assert f"duplicate id (first defined in {tmp_path / 'a.yaml'})" in str(err.value)


def test_missing_rules_path(tmp_path):
    with pytest.raises(AdvisorInputError, match="no such rules file"):
        load_rules([tmp_path / "nope"])
    with pytest.raises(AdvisorInputError, match="holds no .yaml rule files"):
        load_rules([tmp_path])


def test_evaluate_fires_merges_and_ranks():
    (rule,) = parse_rules(GOOD, "my.yaml")
    table = pd.DataFrame(
        {
            "name": ["k1", "k1", "k2", "k3"],
            "region": ["r", "r", "r", ""],
            "device": [0, 0, 0, 1],
            "waves": [1.0076, 1.5, 1.2, 0.5],
            "tail_fraction": [0.4962, 0.25, 0.4, 0.5],
            "tail_idle_ns": [500.0, 100.0, 2000.0, 9999.0],
        }
    )
    found = evaluate([rule], {"kernels": table}, spans={0: 10_000, 1: 10_000})
    # k3 has waves < 1: no finding; k1's two rows merge (savings add up, largest speaks)
    assert [(f.kernel, f.est_savings_ns) for f in found] == [("k2", 2000), ("k1", 600)]
    k1 = found[1]
    assert k1.evidence == {"waves": 1.0076, "tail_fraction": 0.4962, "instances": 2}
    assert k1.summary.startswith("1.008 waves, 49.6 % idle, 500 ns")
    assert "(largest of 2 such; 600 ns in total)" in k1.summary
    # 2000 of 10000 ns = 20 % (high, >= 10 %); 600 ns = 6 % (medium, >= 2 %)
    assert [f.severity for f in found] == ["high", "medium"]
    assert k1.region == "r" and k1.device == 0


def test_alias_bomb_and_deep_nesting_are_refused():
    # 9 ** 6 = 531,441 nodes once aliases expand: refused before anything is built
    levels = ["a: &l0 [x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 6):
        levels.append(f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]")
    assert "expands to more than 100,000 YAML nodes" in bad("\n".join(levels) + "\n")
    assert "nested too deeply" in bad("[" * 5000 + "]" * 5000)
    assert "nested deeper than 64 levels" in bad("rules: " + "[" * 70 + "]" * 70)


def test_a_finding_outside_every_range_supersedes_the_ones_there_that_name_no_range():
    # launch-bound-range supersedes launch-bound-sequence in its range; the sequences outside
    # every range name no range (region None), the range finding there names OUTSIDE_RANGES:
    # the same time, counted once. A sequence on another device, or inside a named range
    # with no range finding, stays
    from dataclasses import replace

    from advisor.metrics.regions import OUTSIDE_RANGES
    from advisor.rules.engine import _drop_superseded
    from advisor.rules.finding import Finding

    base = Finding(rule="launch-bound-sequence", title="", strategy="cuda_graph", explains=(),
                   severity="medium", kernel="k", region=None, device=0, est_savings_ns=1,
                   at_ns=None, at_rel_ns=None, summary="", gemm_by=None, confidence="",
                   confirm=None, evidence={}, rationale="", watch_for="",
                   references=())  # fmt: skip
    outside = replace(base, rule="launch-bound-range", kernel=None, region=OUTSIDE_RANGES)
    other_device = replace(base, device=1)
    in_a_range = replace(base, region="step")
    kept = _drop_superseded([outside, base, other_device, in_a_range], load_rules())
    assert kept == [outside, other_device, in_a_range]
