"""Hand-built metric sets for gate tests: the current version (``mset``, as stored) and as
versions 2 and 3 stored them (``as_version``)."""

from __future__ import annotations

import re

import numpy as np

from advisor.gating.metricset import VERSION, KernelKey

OVERALL_DEFAULT = {"span_ns": 1_000_000.0, "gpu_busy_ns": 1_000_000.0, "tail_idle_ns": 0.0,
                   "underfill_idle_ns": 0.0, "launch_overhead_ns": 0.0, "sync_idle_ns": 0.0,
                   "exposed_comm_ns": 0.0, "overlap_ratio": None}  # fmt: skip


def kkey(text: str, name: str | None = None) -> KernelKey:
    """The key of a kernel written as ``NAME grid=XxYxZ block=N`` (``name``: where the name
    itself holds " grid="), or as a bare name (grid 1x1x1, 256 threads)."""
    m = re.fullmatch(r"(.*) grid=(\d+)x(\d+)x(\d+) block=(\d+)", text)
    if m is None:
        return KernelKey(text, (1, 1, 1), 256)
    x, y, z, block = (int(g) for g in m.groups()[1:])
    return KernelKey(name or m.group(1), (x, y, z), block)


def mset(
    overall=None, regions=None, kernels=None, findings=(), gpus=("H200",), trace="t", names=None
):
    """A metric set as stored: ``regions`` {name: {metric: samples}}, ``kernels`` {key:
    samples} (a key as ``kkey`` reads it; ``names`` {key: name} for names holding " grid=")."""
    keys = {text: kkey(text, (names or {}).get(text)) for text in kernels or {}}
    return {
        "version": VERSION,
        "trace": trace,
        "gpus": list(gpus),
        "overall": {**OVERALL_DEFAULT, **(overall or {})},
        "regions": {
            name: {
                "instances": len(next(iter(s.values()), [])),
                "cold": 0,
                "samples": {m: list(map(float, v)) for m, v in s.items()},
            }
            for name, s in (regions or {}).items()
        },  # fmt: skip
        "kernels": [
            {
                "key": {"name": keys[t].name, "grid": list(keys[t].grid), "block": keys[t].block},
                "launches": len(v),
                "median_ns": float(np.median(v)),
                "samples": list(map(float, v)),
            }
            for t, v in sorted((kernels or {}).items(), key=lambda kv: keys[kv[0]].text)
        ],  # fmt: skip
        "startup": {"startup_idle_ns": 0.0, "cold_instances": []},
        "findings": list(findings),
        "warnings": [],
    }


def as_version(doc: dict, version: int) -> dict:
    """A current set as advisor stored it in ``version`` 2 (kernels keyed by their text) or 3
    (keyed by their text, each entry naming its kernel)."""
    kernels = {}
    for e in doc["kernels"]:
        key = KernelKey(e["key"]["name"], tuple(e["key"]["grid"]), e["key"]["block"])
        entry = {k: e[k] for k in ("launches", "median_ns", "samples")}
        kernels[key.text] = {"name": key.name, **entry} if version == 3 else entry
    return {**doc, "version": version, "kernels": kernels}


def finding(rule="sync-stall-steps", region="step", kernel=None, savings=5_000_000,
            severity="high", explains=("sync_idle_ns", "sync_gaps")):  # fmt: skip
    return {"rule": rule, "title": rule.replace("-", " "), "strategy": "remove_sync",
            "severity": severity, "kernel": kernel, "region": region, "device": 0,
            "est_savings_ns": savings, "explains": list(explains)}  # fmt: skip
