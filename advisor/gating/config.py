"""Gate thresholds: the defaults (advisor/data/gate.yaml, each number's measurement in
docs/gate.md) overridden key by key by a user's ``gate.yaml``."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Annotated, Literal

import msgspec
from msgspec import Meta

from advisor.data import gate_metrics, load_yaml
from advisor.errors import AdvisorInputError
from advisor.user_yaml import load_user_yaml
from advisor.validate import FieldError, Invalid, convert

# metric -> True when a larger value is worse (data/gate_metrics.yaml)
TIME_METRICS = gate_metrics()["time"]
OVERALL = {**TIME_METRICS, **gate_metrics()["ratio"]}
COUNTS = gate_metrics()["counts"]  # per range instance
RANGE = {**OVERALL, **COUNTS}
KERNEL = gate_metrics()["kernel"]
ALL_METRICS = {**RANGE, **KERNEL}


class Threshold(msgspec.Struct, forbid_unknown_fields=True):
    """A metric regresses beyond max(rel * baseline, abs); either bound alone is allowed
    (the one not given is 0: off). ``rel: parts`` (span_ns only) composes it."""

    rel: float | Literal["parts"] = 0.0
    abs: Annotated[float, Meta(ge=0)] = 0.0

    def __post_init__(self) -> None:
        if self.rel != "parts" and self.rel < 0:
            raise FieldError("rel", "must be >= 0")


class GateConfig(msgspec.Struct, forbid_unknown_fields=True):
    noise_floor: Annotated[float, Meta(ge=0, le=1)]
    alpha: Annotated[float, Meta(gt=0, lt=1)]
    confidence: Annotated[float, Meta(gt=0, lt=1)]
    fail_on_new_findings: Literal["low", "medium", "high", "none"]
    metrics: dict[str, Threshold]

    def rel(self, metric: str) -> float:
        """The relative tolerance of a metric (0 when none is configured; 'parts' is
        resolved by the caller)."""
        th = self.metrics.get(metric)
        return 0.0 if th is None or th.rel == "parts" else float(th.rel)


def load_config(path: str | Path | None = None) -> GateConfig:
    """The defaults, overridden key by key by a YAML file (errors name file and field)."""
    base = copy.deepcopy(load_yaml("gate.yaml"))
    if path is not None:
        p = Path(path)
        try:
            text = p.read_text()
        except (OSError, UnicodeDecodeError) as exc:
            raise AdvisorInputError(str(p), f"cannot read gate config: {exc}") from None
        user = load_user_yaml(text, str(p), "gate config") or {}
        if not isinstance(user, dict):
            raise AdvisorInputError(str(p), "gate config must be a mapping")
        given = user.pop("metrics", None) or {}
        if not isinstance(given, dict):
            raise AdvisorInputError(str(p), "gate config field 'metrics': must be a mapping")
        base = {**base, **user, "metrics": {**base["metrics"], **given}}
    thresholds = {}
    try:  # one metric at a time: a problem names its metric
        for name, bounds in base["metrics"].items():
            if isinstance(bounds, dict) and not ({"rel", "abs"} & set(bounds)):
                raise Invalid(f"metrics.{name}", "give rel, abs or both")
            thresholds[name] = convert(bounds, Threshold, at=f"metrics.{name}")
        cfg = convert({**base, "metrics": {}}, GateConfig)
    except Invalid as bad:
        raise AdvisorInputError(
            str(path), f"gate config field {bad.field!r}: {bad.problem}"
        ) from None
    cfg.metrics = thresholds
    unknown = set(cfg.metrics) - set(ALL_METRICS)
    if unknown:
        raise AdvisorInputError(str(path), f"gate config: unknown metric {sorted(unknown)[0]!r}")
    parts = [m for m, th in cfg.metrics.items() if th.rel == "parts" and m != "span_ns"]
    if parts:
        raise AdvisorInputError(str(path), f"gate config: rel 'parts' is for span_ns only, "
                                           f"not {parts[0]!r}")  # fmt: skip
    return cfg
