"""The listing commands' tables (render.tables) at narrow widths: what a user types back
(a rule id, a GPU name, a baseline name) is always whole, numbers right-justified, lines
within the width, and a note names the columns left out."""

import io

import pytest
from rich.console import Console

from advisor.render.tables import baseline_listing, gpu_listing, rule_listing
from advisor.rules.engine import load_rules
from advisor.trace.gpus import builtin_gpus


def _printed(renderable, width: int) -> list[str]:
    buf = io.StringIO()
    Console(file=buf, width=width, color_system=None).print(renderable)
    lines = buf.getvalue().splitlines()
    assert all(len(line) <= width for line in lines)
    return lines


def _first_cells(lines: list[str]) -> list[str]:
    """Each body line's first cell, stripped (continuation lines give '')."""
    return [line.split("│")[1].strip() for line in lines if line.startswith("│")]


@pytest.mark.parametrize("width", [60, 80, 120])
def test_every_rule_id_is_whole(width):
    rules = load_rules()
    lines = _printed(rule_listing(rules, width), width)
    assert [c for c in _first_cells(lines) if c] == [r.id for r in rules]
    note = next((line.strip() for line in lines if "left out" in line), "")
    assert note == {60: "(left out at this width: scope, strategy, file)",
                    80: "(left out at this width: strategy, file)", 120: ""}[width]  # fmt: skip


@pytest.mark.parametrize("width", [60, 80])
def test_every_gpu_name_is_whole_and_numbers_right_justified(width):
    # (two A100-PCIe variants both read "A100-PCIe…" when names were shortened)
    gpus = builtin_gpus()
    lines = _printed(gpu_listing([g.to_dict() for g in gpus], width), width)
    assert _first_cells(lines) == [g.name for g in gpus]
    t4 = next(line for line in lines if line.startswith("│ T4 "))
    assert t4.split("│")[2] == "      40 "  # (SMs/CUs: right-justified)
    assert "left out at this width" in "\n".join(lines)


def test_baseline_names_are_whole():
    rows = [{"name": "nightly-h200-llama3-70b-tp8-pp2", "traces": 16,
             "saved": "2026-12-06 15:00:00"}]  # fmt: skip
    lines = _printed(baseline_listing(rows, "baselines in /x", 60), 60)
    assert _first_cells(lines) == ["nightly-h200-llama3-70b-tp8-pp2"]
    # (too narrow for a table: one block per baseline, its name still whole)
    lines = _printed(baseline_listing(rows, "baselines in /x", 40), 40)
    assert "- nightly-h200-llama3-70b-tp8-pp2:" in lines
