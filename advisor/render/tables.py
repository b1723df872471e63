"""The listing commands' tables (``advisor rules list``, ``advisor gpus``, ``advisor baseline
list``), fitted to the terminal like the report's (render.fit): what a user types back (a
rule id, a GPU name, a baseline name) is never shortened; numbers are right-justified;
columns are left out in a stated order when narrow."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import RenderableType

from advisor.render.fit import Col, fitted_table
from advisor.rules.engine import Rule


def _whole(header: str, values: Sequence[str], drop: int = 0) -> Col:
    """A text column never narrower than its longest value (nothing in it shortened; with
    ``drop``, left out rather than shortened when narrow)."""
    return Col(header, text=True, identifies=not drop, drop=drop,
               min=max(map(len, values), default=1))  # fmt: skip


def rule_listing(rules: Sequence[Rule], width: int) -> RenderableType:
    """The rules in force: id, scope, strategy, title, file."""
    cols = (_whole("id", [r.id for r in rules]), Col("scope", text=True, drop=1),
            Col("strategy", text=True, drop=2, min=14), Col("title", text=True, wrap=True),
            _whole("file", [r.source for r in rules], drop=3))  # fmt: skip
    rows = [[r.id, str(r.spec.scope), r.spec.strategy, r.spec.title, r.source] for r in rules]
    return fitted_table(f"{len(rules)} rules", cols, rows, width)


def gpu_listing(gpus: Sequence[dict], width: int) -> RenderableType:
    """The built-in GPU facts (``gpus``: GpuSpec.to_dict of each): name (the value of
    --gpu), SMs/CUs, architecture and the per-SM limits."""
    cols = (_whole("name", [g["name"] for g in gpus]), Col("SMs/CUs"),
            Col("cc/arch", text=True, min=7), Col("warps/SM", drop=2), Col("blocks/SM", drop=3),
            Col("regs/SM", drop=4), Col("smem/SM (B)", drop=1))  # fmt: skip
    keys = ("name", "sm_count", "compute_capability", "max_warps_per_sm", "max_blocks_per_sm",
            "registers_per_sm", "shared_mem_per_sm")  # fmt: skip
    rows = [[str(g[k]) for k in keys] for g in gpus]
    return fitted_table("Built-in GPU facts (used when a trace has none)", cols, rows, width)


def baseline_listing(rows: Sequence[dict], title: str, width: int) -> RenderableType:
    """Saved baselines: name (what --baseline-name takes), traces, when saved (UTC)."""
    cols = (_whole("name", [r["name"] for r in rows]), Col("traces"),
            Col("saved (UTC)", text=True, drop=1, min=19))  # fmt: skip
    cells = [[r["name"], str(r["traces"]), r["saved"]] for r in rows]
    return fitted_table(title, cols, cells, width)
