"""Rule engine: load and validate YAML rule files, evaluate them over the metric tables.

A rule file holds ``rules:``, a list of rules (see docs/rules.md):

  id, title, scope (the table it reads: registry.Scope), when (condition, or a list ANDed),
  savings (expression, ns), strategy (registry.STRATEGIES, or a name of the user's own),
  severity (auto | high | medium | low), message (a template over the row's columns),
  evidence (columns), rationale, watch_for, references (links), emit (what the config
  emitter writes: kind, a registry.EmitKind, plus optional parameters).

Conditions and savings are expressions of ``advisor.rules.expr``, evaluated vectorized over
a whole table; nothing is ``eval``-ed. Every problem in a file is reported as
``FILE: rule 'ID': field 'FIELD': what is wrong``.
"""

from __future__ import annotations

import math
import re
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Annotated, Literal

import msgspec
import numpy as np
import pandas as pd

from advisor.data import builtin_rules_dir, gate_metrics, load_yaml
from advisor.errors import AdvisorInputError
from advisor.metrics.counters import rules_in_words
from advisor.metrics.grouping import row_groups
from advisor.metrics.keys import first_max_rows
from advisor.metrics.regions import OUTSIDE_RANGES
from advisor.plain import plain, plain_int
from advisor.rules.expr import Expr, ExprError, compile_expr
from advisor.rules.finding import EmitRequest, Finding
from advisor.rules.registry import EmitKind, Scope, emit_problem
from advisor.rules.tables import SCOPES
from advisor.units import fmt_ns, fmt_pct
from advisor.user_yaml import load_packaged_yaml, load_user_yaml
from advisor.validate import FieldError, Invalid, convert

# where a finding points, per scope: (kernel column, region column)
LOCATION: dict[Scope, tuple[str | None, str]] = {
    Scope.KERNELS: ("name", "region"),
    Scope.SEQUENCES: ("top_kernel", "region"),
    Scope.REGIONS: (None, "name"),
    Scope.STEPS: (None, "name"),
    Scope.STRAGGLERS: (None, "name"),
    Scope.STAGES: (None, "name"),
}


class EmitSpec(msgspec.Struct, forbid_unknown_fields=True):
    kind: EmitKind
    params: dict = {}


class RuleSpec(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """One rule as written. Required: id, scope, when, savings, strategy; the rest have
    defaults (title: the id; message: the title; rationale, watch_for: empty)."""

    id: Annotated[str, msgspec.Meta(pattern=r"^[a-z0-9][a-z0-9_-]*\Z", max_length=64)]
    title: str = ""
    scope: Scope
    when: str | list[str]
    savings: str
    strategy: Annotated[str, msgspec.Meta(pattern=r"^[a-z][a-z_]*\Z")]
    severity: Literal["auto", "high", "medium", "low"] = "auto"
    message: str = ""
    evidence: list[str] = []
    rationale: str = ""
    watch_for: str = ""
    references: list[str] = []
    emit: EmitSpec | None = None
    # rule ids whose findings inside this one's range (same device; for a steps finding:
    # the ranges of its step family) claim the same time: they are dropped when it fires
    supersedes: list[str] = []
    # whose findings it supersedes: on its own device only, or on every device (a
    # straggler's finding explains the waits that the other devices' findings report)
    supersedes_devices: Literal["same", "all"] = "same"
    # gate metrics (docs/gate.md) whose regression this rule's findings explain: a failing
    # gate row names the candidate's finding of such a rule at the same range or kernel
    explains: list[str] = []
    # the column (ns, the trace's own clock) saying where a finding points in a timeline
    # (where it has no value: at_ns, the scope's worst instance)
    at: str = "at_ns"

    def __post_init__(self) -> None:
        known = {m for group in gate_metrics().values() for m in group}
        unknown = [m for m in self.explains if m not in known]
        if unknown:
            raise FieldError("explains", f"unknown gate metric {unknown[0]!r}")
        self.title = self.title.strip() or self.id
        self.message = self.message.strip() or self.title


class RuleFile(msgspec.Struct, forbid_unknown_fields=True):
    """A rule file: new or replacing rules (a user rule with a built-in id replaces it) and
    ids of rules to switch off."""

    rules: list[dict] = []
    disable: list[str] = []


@dataclass
class Rule:
    """One validated rule, expressions compiled."""

    spec: RuleSpec
    when: Expr
    savings: Expr
    source: str
    fields: list[str] = field(default_factory=list)

    @property
    def id(self) -> str:
        return self.spec.id


class _Template(string.Formatter):
    """``{column}`` or ``{column:spec}`` with spec time | pct | int | a Python format spec;
    plain column names only (no attribute or index access)."""

    def get_field(self, field_name, args, kwargs):
        return kwargs[field_name], field_name

    def format_field(self, value, spec):
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return "unknown"
        if spec == "time":
            return fmt_ns(value)
        if spec == "pct":
            return fmt_pct(value)
        if spec == "int":
            return str(int(value))
        return super().format_field(value, spec)


TEMPLATE = _Template()


def _template_fields(message: str) -> list[str]:
    names = []
    for _, name, spec, conv in TEMPLATE.parse(message):
        if name is None:
            continue
        if not name.isidentifier() or conv:
            raise ExprError(f"template field {{{name}}} must be a plain column name")
        if spec and spec not in ("time", "pct", "int"):
            format(1.5, spec)  # raises ValueError for a bad spec
        names.append(name)
    return names


def _field_of(rule_id: str, fld: str) -> str:
    return f"rule {rule_id!r}: field {fld!r}"


def parse_rule_file(text: str, source: str, packaged: bool = False) -> tuple[list[Rule], list[str]]:
    """Validate one rule file's text: (its rules, the ids it disables). AdvisorInputError
    names file, rule and field. ``packaged``: a built-in file (parsed without the limits
    user files get)."""
    doc = load_packaged_yaml(text) if packaged else load_user_yaml(text, source, "rule file")
    try:
        top = convert(doc, RuleFile)
    except Invalid as exc:
        raise AdvisorInputError(
            source, "expected a mapping with a 'rules:' list and/or a 'disable:' list of ids"
        ) from exc
    if not top.rules and not top.disable:
        raise AdvisorInputError(source, "holds no rules and disables none")
    return _parse_specs(top.rules, source), top.disable


def parse_rules(text: str, source: str, packaged: bool = False) -> list[Rule]:
    """The rules of one rule file's text (see parse_rule_file)."""
    return parse_rule_file(text, source, packaged)[0]


def _parse_specs(specs: list[dict], source: str) -> list[Rule]:
    """Validate and compile each rule mapping of one file."""
    rules = []
    for i, raw in enumerate(specs):
        rid = raw.get("id", f"#{i + 1}") if isinstance(raw, dict) else f"#{i + 1}"
        try:
            spec = convert(raw, RuleSpec, "(rule)")
        except Invalid as bad:
            raise AdvisorInputError(source, f"{_field_of(rid, bad.field)}: {bad.problem}") from None
        known = set(SCOPES[spec.scope])
        why = emit_problem(spec.emit.kind, spec.strategy, known) if spec.emit else None
        if why:
            raise AdvisorInputError(source, f"{_field_of(spec.id, 'emit.kind')}: {why}")
        conds = [spec.when] if isinstance(spec.when, str) else spec.when
        try:
            fld = "when"
            if not conds:
                raise ExprError("needs at least one condition")
            when = compile_expr(" and ".join(f"({c})" for c in conds), known)
            fld = "savings"
            savings = compile_expr(spec.savings, known)
            fld = "at"
            if spec.at not in known:
                raise ExprError(f"unknown metric {spec.at!r}")
            fld = "evidence"
            unknown = [c for c in spec.evidence if c not in known]
            if unknown:
                raise ExprError(f"unknown metric {unknown[0]!r}")
            fld = "message"
            fields = _template_fields(spec.message)
            unknown = [c for c in fields if c not in known and c != "savings"]
            if unknown:
                raise ExprError(f"unknown metric {unknown[0]!r} in the template")
        except (ExprError, ValueError) as exc:
            raise AdvisorInputError(source, f"{_field_of(spec.id, fld)}: {exc}") from None
        rules.append(Rule(spec=spec, when=when, savings=savings, source=source, fields=fields))
    return rules


def rule_files(path: Path) -> list[Path]:
    """The YAML files of a rules folder (sorted), or the file itself."""
    if path.is_dir():
        return sorted(p for p in path.iterdir() if p.suffix in (".yaml", ".yml"))
    return [path]


def load_rules(extra: Sequence[str | Path] = (), builtin: bool = True) -> list[Rule]:
    """Built-in rules, then user files/folders in order: a user rule whose id is a built-in
    one replaces it (in place); ``disable: [id, ...]`` switches rules off. The same id
    twice among the user files, or disabling an unknown id, is an error."""
    sources: list[tuple[str, str, bool]] = []  # (source, text, packaged)
    if builtin:
        root = builtin_rules_dir()
        for item in sorted(root.iterdir(), key=lambda p: p.name):
            if item.name.endswith((".yaml", ".yml")):
                sources.append((f"rules/{item.name}", item.read_text(), True))
    for entry in extra:
        p = Path(entry)
        if not p.exists():
            raise AdvisorInputError(str(p), "no such rules file or folder")
        files = rule_files(p)
        if not files:
            raise AdvisorInputError(str(p), "folder holds no .yaml rule files")
        for f in files:
            try:
                sources.append((str(f), f.read_text(), False))
            except (OSError, UnicodeDecodeError) as exc:
                raise AdvisorInputError(str(f), f"cannot read rule file: {exc}") from None
    by_id: dict[str, Rule] = {}  # (insertion order: built-ins first, replacements in place)
    disabled: list[tuple[str, str]] = []  # (id, source)
    for source, text, packaged in sources:
        rules, off = (_parse_packaged(text, source) if packaged
                      else parse_rule_file(text, source))  # fmt: skip
        for rule in rules:
            first = by_id.get(rule.id)
            if first is not None and (packaged or not _is_builtin(first)):
                raise AdvisorInputError(
                    source, f"rule {rule.id!r}: duplicate id (first defined in {first.source})"
                )
            by_id[rule.id] = rule
        disabled += [(rid, source) for rid in off]
    gone: set[str] = set()
    for rid, source in disabled:
        if by_id.pop(rid, None) is None and rid not in gone:
            raise AdvisorInputError(source, f"disable: no rule with id {rid!r}")
        gone.add(rid)
    return list(by_id.values())


@cache
def _parse_packaged(text: str, source: str) -> tuple[tuple[Rule, ...], tuple[str, ...]]:
    """parse_rule_file of a built-in file, once per process (the CLI checks its options
    before the analysis builds them again; rules are not changed once parsed)."""
    rules, off = parse_rule_file(text, source, packaged=True)
    return tuple(rules), tuple(off)


def _is_builtin(rule: Rule) -> bool:
    return rule.source.startswith("rules/")


def _severity(rule: Rule, savings: float, span: float) -> str:
    if rule.spec.severity != "auto":
        return rule.spec.severity
    share = savings / span if span > 0 else 0.0
    floors = load_yaml("thresholds.yaml")["severity_shares"]  # (data/thresholds.yaml)
    for label in ("high", "medium"):
        if share >= floors[label]:
            return label
    return "low"


def _plain(value):
    """A table cell for messages and evidence: plain Python, integral floats as int, other
    floats rounded to 4 decimals."""
    value = plain(value)
    if isinstance(value, float):
        return int(value) if value.is_integer() and abs(value) < 2**53 else round(value, 4)
    return value


def _gemm_identity(rule: Rule, row: dict) -> dict:
    """For findings of GEMM rules (emit kind gemm): ``gemm_by`` (shape, op, user, name, or
    unconfirmed: the structural guess), ``confidence`` and, when unconfirmed, ``confirm``:
    the flags that would confirm it. Other findings: gemm_by None, confidence confirmed."""
    if rule.spec.emit is None or rule.spec.emit.kind != EmitKind.GEMM or "gemm_by" not in row:
        return {"gemm_by": None, "confidence": "confirmed", "confirm": None}
    if row.get("gemm_by"):
        return {"gemm_by": row["gemm_by"], "confidence": "confirmed", "confirm": None}
    exact = "^" + re.escape(str(row.get("name", ""))) + "$"
    return {
        "gemm_by": "unconfirmed",
        "confidence": "unconfirmed",
        "confirm": f"--gemm '{exact}' (or --shape '{exact}=MxNxK' to give its shape)",
    }


def evaluate(rules: list[Rule], tables: Mapping[Scope, pd.DataFrame], spans: dict) -> list[Finding]:
    """Findings of every rule over its scope's table, merged per location, ranked.

    ``spans``: device -> steady-state span (ns) for automatic severity. Findings of one rule
    at the same (kernel, region, device) merge: savings add up, the largest instance speaks.
    """
    found: dict[tuple, Finding] = {}
    for rule in rules:
        table = tables.get(rule.spec.scope)
        if table is None or table.empty:
            continue
        mask = rule.when.mask(table)
        if not mask.any():  # (most rules fire nowhere: no rows of a wide table are taken)
            continue
        hits = table[mask].reset_index(drop=True)
        savings = rule.savings.evaluate(hits).astype(float).fillna(0).clip(lower=0).to_numpy()
        kcol, rcol = LOCATION[rule.spec.scope]
        # one finding per location (groups in order of first appearance), spoken by its
        # largest instance (first on ties); the savings of all instances add up (each
        # rounded to ns, as reported)
        if rcol:
            hits[rcol] = hits[rcol].astype(object).fillna("")
        group = row_groups(hits, [c for c in (kcol, rcol, "device") if c])
        totals = np.bincount(group, weights=np.round(savings))
        counts = np.bincount(group)
        for pos, total, n in zip(first_max_rows(group, savings), totals, counts, strict=True):
            row = hits.iloc[pos]
            values = {c: _plain(row[c]) for c in row.index}
            values["savings"] = float(savings[pos])
            f = _finding(rule, values, int(row["device"]), total, int(n), spans)
            found[f.key] = f
    out = _drop_superseded(list(found.values()), rules)
    return sorted(out, key=lambda f: (-f.est_savings_ns, f.rule, str(f.kernel)))


def _finding(
    rule: Rule, values: dict, device: int, total: float, instances: int, spans: dict
) -> Finding:
    """The finding of ``rule`` at one location: ``values``, the row of its largest instance;
    ``total``, the rounded savings of its ``instances`` (ns)."""
    kcol, rcol = LOCATION[rule.spec.scope]
    # an estimate never exceeds the device's steady-state span
    est = int(min(total, spans.get(device, total)))
    identity = _gemm_identity(rule, values)
    evidence = {c: values[c] for c in rule.spec.evidence}
    summary = TEMPLATE.format(rule.spec.message, **values)
    counters = counters_say(rule, values)
    if counters is not None and counters["says"]:  # (counters that say nothing: no words)
        summary += f"; counters ({counters['counter_launches']} launch(es)): {counters['says']}"
        if counters["ncu_related"]:
            summary += f"; ncu: {counters['ncu_related']}"
    if instances > 1:
        evidence["instances"] = instances
        summary += f" (largest of {instances} such; {fmt_ns(est)} in total)"
    if identity["confidence"] == "unconfirmed":
        summary += (
            "; GEMM unconfirmed (no name, op or shape says so: a structural guess), "
            f"confirm with {identity['confirm']}"
        )
    # severity: the savings' share of the device's steady span, or of the time the finding
    # is about when its table says (severity_base_ns: a step family's steps)
    base = values.get("severity_base_ns") or spans.get(device, 0)
    emit = rule.spec.emit
    return Finding(
        rule=rule.id,
        title=rule.spec.title,
        strategy=rule.spec.strategy,
        explains=tuple(rule.spec.explains),
        severity=_severity(rule, est, base),
        kernel=values.get(kcol) if kcol else None,
        region=values.get(rcol) or None,
        device=device,
        est_savings_ns=est,
        **_at(rule, values),
        summary=summary,
        **identity,
        evidence=evidence,
        rationale=" ".join(rule.spec.rationale.split()),
        watch_for=" ".join(rule.spec.watch_for.split()),
        references=tuple(rule.spec.references),
        emit=EmitRequest(emit.kind, dict(emit.params), values) if emit else None,
        counters=counters,
    )


def _at(rule: Rule, values: dict) -> dict:
    """at_ns and at_rel_ns of a finding: its rule's ``at`` column where that has a value,
    else the scope's at_ns (the relative time counted from the same first GPU op)."""
    at, rel = values.get("at_ns"), values.get("at_rel_ns")
    mine = values.get(rule.spec.at)
    if rule.spec.at != "at_ns" and mine is not None:  # (_plain: None where missing)
        origin = None if at is None or rel is None else at - rel
        at = mine
        rel = None if origin is None else mine - origin
    return {"at_ns": plain_int(at), "at_rel_ns": plain_int(rel)}


def counters_say(rule: Rule, values: dict) -> dict | None:
    """What the hardware counters say about the kernel of a finding (None when its row has
    none): ``says`` (counters.yaml's sentences whose numbers are known), the evidence
    columns, Nsight Compute's rule results (``ncu_rules``) and, in words, those that fired
    on the kernel and bear on the rule's strategy (``ncu_related``)."""
    if not values.get("has_counters"):
        return None
    spec = load_yaml("counters.yaml")
    said = []
    for text in spec["says"]:
        fields = [name for _, name, _, _ in TEMPLATE.parse(text) if name]
        if all(values.get(f) is not None for f in fields):
            said.append(TEMPLATE.format(text, **values))
    results = values.get("ncu_rule_results") or []
    related = {name for name, r in spec["ncu_rules"].items()
               if rule.spec.strategy in r["strategies"]}  # fmt: skip
    return {"says": "; ".join(said), **{c: values.get(c) for c in spec["evidence"]},
            "ncu_related": rules_in_words(results, related), "ncu_rules": results}  # fmt: skip


def _drop_superseded(findings: list[Finding], rules: list[Rule]) -> list[Finding]:
    """Drop the findings a fired rule supersedes (RuleSpec.supersedes): those of that rule on
    the same device and range (a steps finding's range holds all its steps; a finding on the
    time outside every range, OUTSIDE_RANGES, holds the findings there that name no range)."""
    by_id = {r.id: r for r in rules}
    # (rule id, device or None for every device, range)
    claims: set[tuple[str, int | None, str | None]] = set()
    for f in findings:
        spec = by_id[f.rule].spec
        device = f.device if spec.supersedes_devices == "same" else None
        ranges = (f.region, None) if f.region == OUTSIDE_RANGES else (f.region,)
        claims.update((rid, device, r) for rid in spec.supersedes for r in ranges)
    if not claims:
        return findings
    return [f for f in findings if (f.rule, f.device, f.region) not in claims
            and (f.rule, None, f.region) not in claims]  # fmt: skip
