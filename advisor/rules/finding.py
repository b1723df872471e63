"""What a rule reports: a frozen ``Finding``, the ``EmitRequest`` it carries for the config
emitters, the ``Emitted`` outcome of ``--emit``, the ``FindingGroup`` the terminal and the
markdown report list (one rule at one kernel and range over devices), and the one
serializer every renderer and the gate use (``finding_dict``; fields in docs/json.md)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

from advisor.metrics.regions import OUTSIDE_RANGES
from advisor.rules.registry import EmitKind
from advisor.units import fmt_ns


class FindingKey(NamedTuple):
    """Where a finding applies, one finding per key: (rule, kernel, range, device)."""

    rule: str
    kernel: str | None
    region: str | None
    device: int

    def place(self) -> str:
        """The key's kernel, range and device that it has, as text: ``gemm, step, 0``."""
        return ", ".join(str(x) for x in self[1:] if x is not None)


@dataclass(frozen=True)
class EmitRequest:
    """What a rule's ``emit:`` block asks of the config emitters: ``kind``, its ``params``,
    and ``row``: the plain values of the table row that spoke for the finding (m, n, k,
    median_ns, ops, launches, ...), read by the emitters."""

    kind: EmitKind
    params: dict[str, Any] = field(default_factory=dict)
    row: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Emitted:
    """The outcome of ``--emit`` for one finding: the files written (absolute or as given),
    or what a config still lacks (``missing``); for GEMM scripts also the chosen ``knobs``
    and the equivalent ``cutlass_profiler`` command."""

    config: tuple[str, ...] = ()
    missing: str | None = None
    knobs: dict[str, Any] | None = None
    cutlass_profiler: str | None = None


@dataclass(frozen=True)
class Finding:
    """One finding: a rule fired at a (kernel, range, device). Times in ns;
    ``est_savings_ns`` is an estimate (an upper bound under the rule's model); ``at_ns``/
    ``at_rel_ns``: where its worst instance starts (trace clock / from the first GPU op);
    ``gemm_by``/``confidence``/``confirm``: how a GEMM rule's kernel is known to be a GEMM;
    ``rank``: the trace (rank) holding the device when several traces were analysed as one
    job; ``emitted``: set by ``with_emitted`` after ``--emit``; ``counters``: what the
    hardware counters say about its kernel (None without counters; docs/json.md). Read-only:
    the dict and list values are shared with the rule and must not be changed."""

    rule: str
    title: str
    strategy: str
    explains: tuple[str, ...]
    severity: str
    kernel: str | None
    region: str | None
    device: int
    est_savings_ns: int
    at_ns: int | None
    at_rel_ns: int | None
    summary: str
    gemm_by: str | None
    confidence: str
    confirm: str | None
    evidence: dict[str, Any]
    rationale: str
    watch_for: str
    references: tuple[str, ...]
    emit: EmitRequest | None = None
    rank: int | None = None
    emitted: Emitted | None = None
    counters: dict[str, Any] | None = None

    @property
    def key(self) -> FindingKey:
        """(rule, kernel, range, device): one finding per key."""
        return FindingKey(self.rule, self.kernel, self.region, self.device)

    def location(self) -> list[str]:
        """Where it applies, as the parts it has: kernel, ``range NAME``, ``device N``."""
        where = "outside every range" if self.region == OUTSIDE_RANGES else f"range {self.region}"
        parts = [x for x in (self.kernel, self.region and where) if x]
        return parts + [f"device {self.device}"]

    @property
    def config(self) -> tuple[str, ...]:
        """The files ``--emit`` wrote for it (empty without --emit or when none could be)."""
        return self.emitted.config if self.emitted else ()

    @property
    def missing(self) -> str | None:
        """What its config lacks (e.g. the GEMM shape), when --emit could not write one."""
        return self.emitted.missing if self.emitted else None

    def with_emitted(self, emitted: Emitted | None) -> Finding:
        return replace(self, emitted=emitted)

    def with_rank(self, rank: int | None) -> Finding:
        return replace(self, rank=rank)


SEVERITY_ORDER = ("high", "medium", "low")  # (most severe first)


@dataclass(frozen=True)
class FindingGroup:
    """The findings of one rule at one (kernel, range) on one or more devices, as the
    terminal and markdown report list them (a job of many ranks repeats a finding per
    device; the JSON keeps every one): ``members``, largest savings first; the first's text
    and evidence stand for the group."""

    members: tuple[Finding, ...]

    @property
    def first(self) -> Finding:
        return self.members[0]

    @property
    def devices(self) -> list[int]:
        return sorted(f.device for f in self.members)

    @property
    def est_savings_ns(self) -> int:
        """The members' savings summed (device time, as the summary sums devices; ns)."""
        return sum(f.est_savings_ns for f in self.members)

    @property
    def severity(self) -> str:
        """The most severe of the members' severities."""
        return min((f.severity for f in self.members), key=_severity_rank)

    def location(self) -> list[str]:
        """Where it applies: the first's kernel and range, and its device or devices."""
        where = self.first.location()
        if len(self.members) == 1:
            return where
        return [*where[:-1], f"devices {device_list(self.devices, counted=True)}"]

    def others(self) -> str:
        """The other members in words ('' for one): which device the text is, and the
        others' savings."""
        return f"(device {self.first.device} shown; {self.also()})" if self.also() else ""

    def also(self) -> str:
        """The other members' devices and savings ('' for one): ``also device 1: 0.91 ms``."""
        rest = self.members[1:]
        if not rest:
            return ""
        if len(rest) == 1:
            return f"also device {rest[0].device}: {fmt_ns(rest[0].est_savings_ns)}"
        low, high = min(f.est_savings_ns for f in rest), max(f.est_savings_ns for f in rest)
        each = fmt_ns(high) if low == high else f"{fmt_ns(low)} to {fmt_ns(high)}"
        return f"also devices {device_list(sorted(f.device for f in rest))}: {each} each"


def _severity_rank(severity: str) -> int:
    return SEVERITY_ORDER.index(severity) if severity in SEVERITY_ORDER else len(SEVERITY_ORDER)


def group_across_devices(findings: list[Finding]) -> list[FindingGroup]:
    """``findings`` (ranked) as groups of one rule at one (kernel, range) over devices,
    ranked by their summed savings (ties in the order of their best member)."""
    groups: dict[tuple, list[Finding]] = {}
    for f in findings:
        groups.setdefault((f.rule, f.kernel, f.region), []).append(f)
    out = [FindingGroup(tuple(sorted(m, key=lambda f: -f.est_savings_ns)))
           for m in groups.values()]  # fmt: skip
    return sorted(out, key=lambda g: -g.est_savings_ns)  # (stable: ties keep their order)


def device_list(devices: list[int], counted: bool = False) -> str:
    """Sorted device ids in words, runs of three or more joined: ``0-3, 5, 7, 8``; with
    ``counted``, how many after them where more than two (``0-63 (64)``)."""
    parts: list[str] = []
    start = prev = devices[0]
    for d in [*devices[1:], None]:
        if d is not None and d == prev + 1:
            prev = d
            continue
        if prev - start >= 2:
            parts.append(f"{start}-{prev}")
        else:
            parts += [str(x) for x in range(start, prev + 1)]
        if d is not None:
            start = prev = d
    count = f" ({len(devices)})" if counted and len(devices) > 2 else ""
    return ", ".join(parts) + count


def finding_dict(f: Finding) -> dict[str, Any]:
    """The plain dict of a finding (the JSON document's, the report's and the gate's):
    ``confirm`` only for unconfirmed GEMMs, ``counters`` only where hardware counters
    describe its kernel, ``rank`` only in a many-trace analysis, the ``--emit`` outcome
    (missing, knobs, cutlass_profiler, config) only after --emit."""
    out: dict[str, Any] = {
        "rule": f.rule,
        "title": f.title,
        "strategy": f.strategy,
        "explains": list(f.explains),
        "severity": f.severity,
        "kernel": f.kernel,
        "region": f.region,
        "device": f.device,
        "est_savings_ns": f.est_savings_ns,
        "at_ns": f.at_ns,
        "at_rel_ns": f.at_rel_ns,
        "summary": f.summary,
        "gemm_by": f.gemm_by,
        "confidence": f.confidence,
    }
    if f.confirm is not None:
        out["confirm"] = f.confirm
    out["evidence"] = f.evidence
    if f.counters is not None:
        out["counters"] = f.counters
    out.update(
        rationale=f.rationale,
        watch_for=f.watch_for,
        references=list(f.references),
    )
    if f.rank is not None:
        out["rank"] = f.rank
    e = f.emitted
    if e is not None:
        if e.missing is not None:
            out["missing"] = e.missing
        if e.knobs is not None:
            out["knobs"] = e.knobs
            out["cutlass_profiler"] = e.cutlass_profiler
        out["config"] = list(e.config) or None
    return out
