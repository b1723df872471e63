"""Hand-built metric sets (the current version) for gate tests."""

from __future__ import annotations

import numpy as np

from advisor.gating.digest import VERSION

OVERALL_DEFAULT = {"span_ns": 1_000_000.0, "gpu_busy_ns": 1_000_000.0, "tail_idle_ns": 0.0,
                   "underfill_idle_ns": 0.0, "launch_overhead_ns": 0.0, "sync_idle_ns": 0.0,
                   "exposed_comm_ns": 0.0, "overlap_ratio": None}  # fmt: skip


def mset(
    overall=None, regions=None, kernels=None, findings=(), gpus=("H200",), trace="t", names=None
):
    """A metric set: ``regions`` {name: {metric: samples}}, ``kernels`` {key: samples};
    each kernel entry names its kernel: ``names`` {key: name}, else the key's text before
    " grid=" (this builder's convention, not the gate's)."""
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
        "kernels": {
            key: {
                "name": (names or {}).get(key, key.partition(" grid=")[0]),
                "launches": len(v),
                "median_ns": float(np.median(v)),
                "samples": list(map(float, v)),
            }
            for key, v in (kernels or {}).items()
        },  # fmt: skip
        "startup": {"startup_idle_ns": 0.0, "cold_instances": []},
        "findings": list(findings),
        "warnings": [],
    }


def finding(rule="sync-stall-steps", region="step", kernel=None, savings=5_000_000,
            severity="high", explains=("sync_idle_ns", "sync_gaps")):  # fmt: skip
    return {"rule": rule, "title": rule.replace("-", " "), "strategy": "remove_sync",
            "severity": severity, "kernel": kernel, "region": region, "device": 0,
            "est_savings_ns": savings, "explains": list(explains)}  # fmt: skip
