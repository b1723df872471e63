"""The closed sets rules, the config emitters and the gate share, each defined once: the
metric tables a rule reads (``Scope``), what ``--emit`` writes for a rule's findings
(``EmitKind``) and the strategies rules recommend (``Strategy`` records, from
advisor/data/strategies.yaml: doc, the GEMM planner's chooser and script template, Gluon
support, the cutlass_profiler pattern, the advice note and its code sketch).

The rule loader checks every rule against them when it is loaded (engine.py,
``emit_problem``); the emitters (configs/emit.py) read a finding's strategy here. A rule may
name a strategy that is not registered: its findings get an advice note without a sketch.
"""

from __future__ import annotations

from enum import Enum

import msgspec

from advisor.data import load_yaml


class TextEnum(str, Enum):
    """A closed set of names: each member is its text (a str), printed and serialized as it."""

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)


class Scope(TextEnum):
    """The metric table a rule reads, one row per candidate finding (tables.SCOPES documents
    each table's columns; engine.LOCATION says which columns name a finding's place)."""

    KERNELS = "kernels"
    REGIONS = "regions"
    SEQUENCES = "sequences"
    STEPS = "steps"
    STRAGGLERS = "stragglers"
    STAGES = "stages"


class EmitKind(TextEnum):
    """What the config emitters (configs/emit.py) write for a rule's findings (docs/configs.md):
    a GEMM script, a CUDA-graph script, a grid-stride script, or a markdown note."""

    GEMM = "gemm"
    LAUNCH = "launch"
    GRID_STRIDE = "grid_stride"
    OVERLAP = "overlap"
    ADVICE = "advice"


# the row columns an emit kind cannot do without (the kinds not listed need none)
EMIT_NEEDS: dict[EmitKind, tuple[str, ...]] = {
    EmitKind.GEMM: ("m", "n", "k"),
    EmitKind.GRID_STRIDE: ("grid_blocks",),
}


class Strategy(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One strategy a rule may recommend (the fields: advisor/data/strategies.yaml's header)."""

    name: str
    doc: str
    chooser: str | None = None  # a function of configs/knobs.py: the GEMM planner's search
    template: str | None = None  # the GEMM script's template (configs/templates/)
    gluon: bool = False  # the GEMM script carries the Gluon warp-specialized Hopper kernel
    cutlass: str = ""  # what cutlass_profiler's kernel pattern adds on capability 9+
    min_cc: tuple[int, str] | None = None  # (least capability major, what needs it)
    note: str = "advice.md"  # the advice note's template (configs/templates/)
    snippet: str = ""  # the code sketch in the advice note

    @property
    def gemm(self) -> bool:
        """The GEMM planner plans its knobs and writes its script (emit kind gemm)."""
        return self.chooser is not None


def _load() -> dict[str, Strategy]:
    """strategies.yaml's records, checked: a GEMM strategy has both a chooser and a template."""
    out = {}
    for name, fields in load_yaml("strategies.yaml").items():
        s = msgspec.convert({**fields, "name": name}, Strategy)
        if (s.chooser is None) != (s.template is None):
            raise ValueError(f"strategies.yaml: {name}: a chooser needs a template and back")
        out[name] = s
    return out


STRATEGIES: dict[str, Strategy] = _load()
# the strategies the GEMM planner plans knobs for and has a script of (emit kind gemm)
GEMM_STRATEGIES: tuple[str, ...] = tuple(n for n, s in STRATEGIES.items() if s.gemm)


def strategy(name: str) -> Strategy:
    """The record of a strategy; for a name that is not registered (a user rule's own), one
    that writes a plain advice note."""
    return STRATEGIES.get(name) or Strategy(name=name, doc="")


def emit_problem(kind: EmitKind, strategy_name: str, columns: set[str]) -> str | None:
    """Why the config emitters cannot write ``kind`` for a finding of ``strategy_name`` whose
    row holds ``columns`` (None: they can)."""
    if kind == EmitKind.GEMM and not strategy(strategy_name).gemm:
        known = ", ".join(GEMM_STRATEGIES)
        return (f"kind 'gemm' writes GEMM scripts for the strategies {known} only, not "
                f"{strategy_name!r} (emit kind advice writes a note for any strategy)")  # fmt: skip
    missing = [c for c in EMIT_NEEDS.get(kind, ()) if c not in columns]
    if missing:
        return (f"kind {str(kind)!r} reads the column(s) {', '.join(missing)}, which the rule's "
                "scope does not have (scope kernels has them)")  # fmt: skip
    return None
