"""CI gate: compare metric sets of baseline and candidate traces, decide pass or fail.

A *metric set* (``metric_set``) is the JSON-friendly digest of one analysed trace: overall
totals, per NVTX range (by name, summed over instances and devices), per kernel (name, grid,
block: median launch time) and the findings. ``compare`` puts several sets per side against
each other: the median per side, a one-sided Mann-Whitney U test (scipy) when both sides
have at least two traces, else the configured noise floor. Thresholds come from a YAML file
(``DEFAULT_CONFIG`` documents the defaults). Exit codes: 0 pass, 1 regression, 2 bad input.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from advisor.analysis import Analysis
from advisor.errors import AdvisorInputError
from advisor.render.units import fmt_ns, fmt_pct
from advisor.user_yaml import load_packaged_yaml, load_user_yaml

SEVERITY_ORDER = {"low": 0, "medium": 1, "high": 2}
# metric -> True when a larger value is worse
OVERALL = {
    "span_ns": True,
    "gpu_busy_ns": True,
    "tail_idle_ns": True,
    "underfill_idle_ns": True,
    "launch_overhead_ns": True,
    "sync_idle_ns": True,
    "exposed_comm_ns": True,
    "overlap_ratio": False,
}
KERNEL = {"median_ns": True}

DEFAULT_CONFIG = """
# advisor gate thresholds. A metric regresses when the candidate is worse than the baseline
# by more than max(rel * baseline, abs) (and, with one trace per side, by more than
# noise_floor * baseline). abs is in the metric's unit (ns, or a ratio for overlap_ratio).
noise_floor: 0.02          # relative noise floor with a single trace per side
alpha: 0.05                # significance level with several traces per side (Mann-Whitney U)
fail_on_new_findings: high # a new finding of this severity or above fails (or: none)
metrics:
  span_ns:            {rel: 0.05, abs: 100000}
  gpu_busy_ns:        {rel: 0.05, abs: 100000}
  tail_idle_ns:       {rel: 0.10, abs: 50000}
  underfill_idle_ns:  {rel: 0.10, abs: 50000}
  launch_overhead_ns: {rel: 0.10, abs: 50000}
  sync_idle_ns:       {rel: 0.10, abs: 100000}
  exposed_comm_ns:    {rel: 0.10, abs: 100000}
  overlap_ratio:      {rel: 0.0,  abs: 0.05}
  median_ns:          {rel: 0.05, abs: 2000}   # per kernel: median launch time
"""


class Threshold(BaseModel):
    """A metric regresses beyond max(rel * baseline, abs); either bound alone is allowed
    (the one not given is 0: off)."""

    model_config = ConfigDict(extra="forbid")
    rel: float = Field(default=0.0, ge=0)
    abs: float = Field(default=0.0, ge=0)

    @model_validator(mode="before")
    @classmethod
    def _one_bound_at_least(cls, value):
        if isinstance(value, dict) and not ({"rel", "abs"} & set(value)):
            raise ValueError("give rel, abs or both")
        return value


class GateConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    noise_floor: float = Field(ge=0, le=1)
    alpha: float = Field(gt=0, lt=1)
    fail_on_new_findings: Literal["low", "medium", "high", "none"]
    metrics: dict[str, Threshold]


def load_config(path: str | Path | None = None) -> GateConfig:
    """The defaults, overridden key by key by a YAML file (errors name file and field)."""
    base = load_packaged_yaml(DEFAULT_CONFIG)
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
        err = exc.errors()[0]
        fld = ".".join(str(x) for x in err["loc"])
        raise AdvisorInputError(str(path), f"gate config field {fld!r}: {err['msg']}") from None
    unknown = set(cfg.metrics) - set(OVERALL) - set(KERNEL)
    if unknown:
        raise AdvisorInputError(str(path), f"gate config: unknown metric {sorted(unknown)[0]!r}")
    return cfg


def metric_set(a: Analysis, findings: list[dict]) -> dict:
    """The digest of one analysed trace that the gate compares (JSON-serializable)."""
    s = a.summary()
    overall = {m: s.get(m) for m in OVERALL}
    regions: dict[str, dict] = {}
    if not a.regions.empty:
        r = a.regions.assign(span_ns=a.regions["end_ns"] - a.regions["start_ns"])
        sums = r.groupby("name")[
            [m for m in OVERALL if m != "overlap_ratio"] + ["comm_ns", "overlap_ns"]
        ]
        for name, row in sums.sum().iterrows():
            vals = {m: float(row[m]) for m in OVERALL if m != "overlap_ratio"}
            vals["overlap_ratio"] = row["overlap_ns"] / row["comm_ns"] if row["comm_ns"] else None
            regions[str(name)] = vals
    kernels: dict[str, dict] = {}
    k = a.kernel_table()
    if not k.empty:
        k = k.assign(key=k["name"] + " grid=" + k["grid_x"].astype(str) + "x"
                     + k["grid_y"].astype(str) + "x" + k["grid_z"].astype(str)
                     + " block=" + k["block_threads"].astype(str))  # fmt: skip
        for key, g in k.groupby("key"):
            kernels[str(key)] = {"median_ns": float(g["median_ns"].median()),
                                 "launches": int(g["launches"].sum())}  # fmt: skip
    gpus = sorted({spec.name for d, spec in a.trace.gpus.items() if d in a.trace.devices})
    return {
        "trace": a.trace.path,
        "gpus": gpus,
        "overall": overall,
        "regions": regions,
        "kernels": kernels,
        "findings": [
            {k: f[k] for k in ("rule", "strategy", "severity", "kernel", "region", "device",
                               "est_savings_ns")}
            for f in findings
        ],
        "warnings": list(a.warnings),  # what the trace lacks (data quality)
    }  # fmt: skip


@dataclass
class Row:
    scope: str  # overall | range | kernel | finding
    key: str
    metric: str
    baseline: float | None
    candidate: float | None
    status: str  # regression | improvement | unchanged | not significant | only in ...
    detail: str = ""

    @property
    def delta(self) -> float | None:
        if self.baseline is None or self.candidate is None:
            return None
        return self.candidate - self.baseline


@dataclass
class GateResult:
    rows: list[Row]
    method: str
    notes: list[str]

    @property
    def failed(self) -> bool:
        return any(r.status in ("regression", "new finding") for r in self.rows)


def _judge(metric, worse_up, base_vals, cand_vals, cfg: GateConfig):
    base, cand = statistics.median(base_vals), statistics.median(cand_vals)
    th = cfg.metrics.get(metric)
    if th is None:
        return base, cand, "unchanged", ""
    delta = (cand - base) if worse_up else (base - cand)  # > 0: candidate worse
    limit = max(th.rel * abs(base), th.abs)
    several = len(base_vals) >= 2 and len(cand_vals) >= 2
    if not several:
        limit = max(limit, cfg.noise_floor * abs(base))
    shown = fmt_pct(limit) if metric == "overlap_ratio" else fmt_ns(limit)
    if abs(delta) <= limit:
        return base, cand, "unchanged", f"within {shown}"
    if several:
        from scipy.stats import mannwhitneyu  # imported on use: scipy is slow to import

        alt = "greater" if (delta > 0) == worse_up else "less"
        p = mannwhitneyu(cand_vals, base_vals, alternative=alt).pvalue
        if p > cfg.alpha:  # significant when p <= alpha
            return base, cand, "not significant", f"p={p:.3f} > {cfg.alpha}"
        return base, cand, "regression" if delta > 0 else "improvement", f"p={p:.3f}"
    return base, cand, "regression" if delta > 0 else "improvement", f"threshold {shown}"


def _values(sets: list[dict], scope: str, key: str | None, metric: str) -> list[float]:
    out = []
    for s in sets:
        src = s[scope] if key is None else s[scope].get(key, {})
        value = src.get(metric)
        if value is not None:
            out.append(float(value))
    return out


def compare(base: list[dict], cand: list[dict], cfg: GateConfig) -> GateResult:
    """Compare metric sets (several traces per side allowed); incompatible sets raise."""
    gb = {g for s in base for g in s["gpus"]}
    gc = {g for s in cand for g in s["gpus"]}
    if gb and gc and gb != gc:
        raise AdvisorInputError(None, f"incompatible traces: baseline GPUs {', '.join(sorted(gb))}"
                                      f" vs candidate {', '.join(sorted(gc))}")  # fmt: skip
    rb = {k for s in base for k in s["regions"]}
    rc = {k for s in cand for k in s["regions"]}
    if rb and rc and not rb & rc:
        raise AdvisorInputError(None, "incompatible traces: no NVTX range in common")
    several = len(base) >= 2 and len(cand) >= 2
    method = (
        f"medians of {len(base)} vs {len(cand)} traces, one-sided Mann-Whitney U (alpha "
        f"{cfg.alpha})" if several else
        f"one trace per side: noise floor {cfg.noise_floor:.0%} (a weaker verdict than with "
        "several traces per side)"
    )  # fmt: skip
    rows: list[Row] = []
    for metric, worse_up in OVERALL.items():
        bv, cv = _values(base, "overall", None, metric), _values(cand, "overall", None, metric)
        if bv and cv:
            rows.append(Row("overall", "all", metric, *_judge(metric, worse_up, bv, cv, cfg)))
    for scope, label, metrics in (("regions", "range", OVERALL), ("kernels", "kernel", KERNEL)):
        keys_b = {k for s in base for k in s[scope]}
        keys_c = {k for s in cand for k in s[scope]}
        for key in sorted(keys_b | keys_c):
            if key not in keys_c:
                rows.append(Row(label, key, "-", None, None, "only in baseline"))
                continue
            if key not in keys_b:
                rows.append(Row(label, key, "-", None, None, "only in candidate"))
                continue
            for metric, worse_up in metrics.items():
                bv, cv = _values(base, scope, key, metric), _values(cand, scope, key, metric)
                if bv and cv:
                    rows.append(Row(label, key, metric, *_judge(metric, worse_up, bv, cv, cfg)))
    rows.extend(_new_findings(base, cand, cfg))
    # (the method already says when one trace per side makes the verdict weaker)
    notes = _quality_notes("baseline", base) + _quality_notes("candidate", cand)
    return GateResult(rows=rows, method=method, notes=notes)


QUALITY_NOTES = 3  # data-quality warnings shown per trace


def _quality_notes(side: str, sets: list[dict]) -> list[str]:
    """Each trace's data-quality warnings (metric sets saved before they were recorded
    have none): the numbers compared may be limited by them."""
    notes = []
    for s in sets:
        warnings = s.get("warnings") or []
        notes += [f"{side} {s['trace']}: {w}" for w in warnings[:QUALITY_NOTES]]
        if len(warnings) > QUALITY_NOTES:
            notes.append(f"{side} {s['trace']}: {len(warnings) - QUALITY_NOTES} more warning(s)")
    return notes


def _new_findings(base: list[dict], cand: list[dict], cfg: GateConfig) -> list[Row]:
    if cfg.fail_on_new_findings == "none":
        return []
    floor = SEVERITY_ORDER[cfg.fail_on_new_findings]

    def key(f):
        return (f["rule"], f["kernel"], f["region"], f["device"])

    seen = {key(f) for s in base for f in s["findings"]}
    out = []
    for s in cand:
        for f in s["findings"]:
            if key(f) not in seen and SEVERITY_ORDER[f["severity"]] >= floor:
                where = ", ".join(str(x) for x in key(f)[1:] if x is not None)
                out.append(Row("finding", f"{f['rule']} ({where})", f["strategy"], None,
                               float(f["est_savings_ns"]), "new finding",
                               f"severity {f['severity']}"))  # fmt: skip
                seen.add(key(f))
    return out
