"""The gate's *metric set*, typed: what ``digest.metric_set`` makes of one analysed trace, what
``advisor baseline save`` stores (``to_dict``: plain JSON data) and what ``compare`` and
``calibrate`` read (``load``: this version's sets and the stored sets of earlier ones).

Versions: 4 lists each kernel with its key as data (``KernelKey``: name, grid, threads per
block); 3 keyed kernels by their display text (``name grid=XxYxZ block=N``), each entry naming
its kernel; 2 by the text alone. Stored sets of versions 2 and 3 are read: their keys are
taken apart once, here, anchored on the kernel's name (version 3) or on the last " grid=" of
the text (version 2: the grid and block follow it), and checked to give the same text back.
Version 1 (no steady-state samples) cannot be compared: such a baseline is saved again.
"""

from __future__ import annotations

import re
from typing import Any, Literal

import msgspec

from advisor.errors import AdvisorInputError, json_problem
from advisor.rules.finding import FindingKey

VERSION = 4
READABLE = (2, 3, 4)  # the versions ``load`` reads

Dim = int | float  # as the trace recorded it (float traces: 256.0; NaN: not recorded)
Severity = Literal["low", "medium", "high"]


class KernelKey(msgspec.Struct, frozen=True):
    """A kernel as the gate tells kernels apart: its name, grid and threads per block."""

    name: str
    grid: tuple[Dim, Dim, Dim]
    block: Dim

    @property
    def text(self) -> str:
        """How the gate's rows name it: ``name grid=XxYxZ block=N``."""
        x, y, z = self.grid
        return f"{self.name} grid={x}x{y}x{z} block={self.block}"


class KernelEntry(msgspec.Struct):
    """One kernel's steady launches: how many, their median GPU time and the samples (ns)."""

    key: KernelKey
    launches: int
    median_ns: float
    samples: list[float]


class RangeEntry(msgspec.Struct):
    """One top-level range name: its instances (cold ones among them) and, per metric, one
    sample per steady instance."""

    instances: int
    cold: int
    samples: dict[str, list[float]]


class ColdInstance(msgspec.Struct):
    """A range instance left out of the steady state, and why."""

    range: str
    device: int
    period_ns: int
    reason: str


class Startup(msgspec.Struct):
    """What the steady state leaves out: start-up idle (ns) and the cold instances."""

    startup_idle_ns: float = 0.0
    cold_instances: list[ColdInstance] = msgspec.field(default_factory=list)


class GateFinding(msgspec.Struct):
    """What the gate keeps of a finding (new findings fail; ``explains`` links a row to it)."""

    rule: str
    title: str
    strategy: str
    severity: Severity
    kernel: str | None
    region: str | None
    device: int
    est_savings_ns: int
    explains: list[str]

    @property
    def key(self) -> FindingKey:
        return FindingKey(self.rule, self.kernel, self.region, self.device)


class MetricSet(msgspec.Struct, kw_only=True):
    """The digest of one analysed trace: steady-state totals (``overall``), per range name
    (``regions``) and per kernel (``kernels``, in the order of their texts), what was left
    out (``startup``), its findings and data-quality warnings."""

    version: int = VERSION
    trace: str | None
    gpus: list[str]
    overall: dict[str, float | None]
    regions: dict[str, RangeEntry]
    kernels: list[KernelEntry]
    startup: Startup
    findings: list[GateFinding]
    warnings: list[str]

    def kernels_by_text(self) -> dict[str, KernelEntry]:
        """The kernels keyed by their texts (the keys of the gate's kernel rows)."""
        return {k.key.text: k for k in self.kernels}

    def to_dict(self) -> dict[str, Any]:
        """As plain JSON data (what a baseline store holds; a grid as a list)."""
        out: dict[str, Any] = msgspec.to_builtins(self)
        for entry in out["kernels"]:
            entry["key"]["grid"] = list(entry["key"]["grid"])
        return out


ENTRY_FIELDS = ("launches", "median_ns", "samples")  # a kernel entry's, besides its key
# a version 2/3 key's text after the kernel's name
_KEY_TAIL = re.compile(r" grid=([^x ]+)x([^x ]+)x([^x ]+) block=(\S+)")


def _dim(text: str) -> Dim:
    return int(text) if re.fullmatch(r"-?\d+", text) else float(text)


def _key_from_text(text: str, name: str) -> KernelKey:
    """A version 2/3 kernel key taken apart after its name (ValueError when it is not one)."""
    m = _KEY_TAIL.fullmatch(text[len(name) :]) if text.startswith(name) else None
    if m is None:
        raise ValueError(f"kernel key {text[:200]!r} is not 'NAME grid=XxYxZ block=N'")
    x, y, z, block = (_dim(g) for g in m.groups())
    key = KernelKey(name, (x, y, z), block)
    if key.text != text:
        raise ValueError(f"kernel key {text[:200]!r} does not read back")
    return key


def _upgraded(doc: dict) -> dict:
    """A version 2 or 3 set in version 4's form (kernels listed with their keys as data)."""
    kernels = []
    for text, entry in sorted(doc["kernels"].items()):
        needs = ("name",) * (doc["version"] == 3) + ENTRY_FIELDS
        missing = [k for k in needs if k not in entry]
        if missing:
            raise ValueError(f"kernel {text[:200]!r} has no {missing[0]!r}")
        name = entry["name"] if doc["version"] == 3 else text.rpartition(" grid=")[0]
        rest = {k: entry[k] for k in ENTRY_FIELDS}
        kernels.append({"key": _key_from_text(text, name), **rest})
    return {**doc, "version": VERSION, "kernels": kernels}


def load(doc: MetricSet | dict, side: str = "baseline") -> MetricSet:
    """A metric set as ``compare`` reads it: ``doc`` itself, or a stored one (this version's,
    or an earlier one's that can be read) checked and typed. AdvisorInputError names the
    trace and what is wrong (``side``: baseline or candidate, for the message)."""
    if isinstance(doc, MetricSet):
        return doc
    trace = doc.get("trace") if isinstance(doc, dict) else None
    version = doc.get("version") if isinstance(doc, dict) else None
    if not isinstance(version, int) or version < READABLE[0]:
        raise AdvisorInputError(
            trace,
            f"{side} metric set was saved by an earlier advisor (no steady-state samples):"
            " save the baseline again with `advisor baseline save`",
        )
    if version > VERSION:
        raise AdvisorInputError(
            trace,
            f"{side} metric set was saved by a newer advisor (version {version}, this one "
            f"reads {', '.join(map(str, READABLE))}): save the baseline again with this one",
        )
    try:
        return msgspec.convert(doc if version == VERSION else _upgraded(doc), MetricSet)
    except (msgspec.ValidationError, KeyError, TypeError, AttributeError, ValueError) as exc:
        if isinstance(exc, msgspec.ValidationError):
            why = json_problem(exc)
        else:
            why = f"{exc.args[0]!r} is missing" if isinstance(exc, KeyError) else str(exc)
        raise AdvisorInputError(trace, f"damaged {side} metric set: {why}") from None
