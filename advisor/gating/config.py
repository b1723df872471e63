"""Gate thresholds: the defaults (advisor/data/gate.yaml, each number's measurement in
docs/gate.md) overridden key by key by a user's ``gate.yaml``."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from advisor.data import gate_metrics, load_yaml
from advisor.errors import AdvisorInputError
from advisor.user_yaml import field_problem, load_user_yaml

# metric -> True when a larger value is worse (data/gate_metrics.yaml)
TIME_METRICS = gate_metrics()["time"]
OVERALL = {**TIME_METRICS, **gate_metrics()["ratio"]}
COUNTS = gate_metrics()["counts"]  # per range instance
RANGE = {**OVERALL, **COUNTS}
KERNEL = gate_metrics()["kernel"]
ALL_METRICS = {**RANGE, **KERNEL}


class Threshold(BaseModel):
    """A metric regresses beyond max(rel * baseline, abs); either bound alone is allowed
    (the one not given is 0: off). ``rel: parts`` (span_ns only) composes it."""

    model_config = ConfigDict(extra="forbid")
    rel: float | Literal["parts"] = 0.0
    abs: float = Field(default=0.0, ge=0)

    @model_validator(mode="before")
    @classmethod
    def _one_bound_at_least(cls, value):
        if isinstance(value, dict) and not ({"rel", "abs"} & set(value)):
            raise ValueError("give rel, abs or both")
        return value

    @model_validator(mode="after")
    def _non_negative(self) -> Threshold:
        if self.rel != "parts" and self.rel < 0:
            raise ValueError("rel must be >= 0")
        return self


class GateConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    noise_floor: float = Field(ge=0, le=1)
    alpha: float = Field(gt=0, lt=1)
    confidence: float = Field(gt=0, lt=1)
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
        metrics = {**base["metrics"], **(user.pop("metrics", None) or {})}
        base = {**base, **user, "metrics": metrics}
    try:
        cfg = GateConfig.model_validate(base)
    except ValidationError as exc:
        fld, problem = field_problem(exc)
        raise AdvisorInputError(str(path), f"gate config field {fld!r}: {problem}") from None
    unknown = set(cfg.metrics) - set(ALL_METRICS)
    if unknown:
        raise AdvisorInputError(str(path), f"gate config: unknown metric {sorted(unknown)[0]!r}")
    parts = [m for m, th in cfg.metrics.items() if th.rel == "parts" and m != "span_ns"]
    if parts:
        raise AdvisorInputError(str(path), f"gate config: rel 'parts' is for span_ns only, "
                                           f"not {parts[0]!r}")  # fmt: skip
    return cfg
