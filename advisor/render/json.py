"""The stable JSON document of ``advisor analyze --format json`` (schema in docs/json.md)."""

from __future__ import annotations

import json
import math

import pandas as pd

from advisor.analysis import WINDOW_COLUMNS, Analysis
from advisor.metrics.regions import WINDOW_KEYS
from advisor.plain import plain

SCHEMA_VERSION = 1


def _int(x) -> int | None:
    """An integer field; None where the trace had no (valid) value."""
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else int(x)


def kernel_rows(k: pd.DataFrame) -> list[dict]:
    rows = []
    for r in k.itertuples():
        rows.append(
            {
                "name": r.name,
                "demangled": r.demangled,
                "device": int(r.device),
                "region": getattr(r, "region", None),
                "grid": [_int(r.grid_x), _int(r.grid_y), _int(r.grid_z)],
                "grid_blocks": int(r.grid_blocks),
                "block": [_int(r.block_x), _int(r.block_y), _int(r.block_z)],
                "block_threads": int(r.block_threads),
                "registers_per_thread": _int(r.registers),
                "shared_mem_per_block": _int(r.smem_per_block),
                "launches": int(r.launches),
                "total_ns": int(r.total_ns),
                "median_ns": int(r.median_ns),
                "ctas_per_sm": _int(r.ctas_per_sm),
                "occupancy_limiter": r.limiter,
                "slots": _int(r.slots),
                "waves": r.waves,
                "tail_fraction": r.tail_fraction,
                "tail_idle_ns": int(round(r.tail_idle_ns)),
                "underfill_idle_ns": int(round(r.underfill_idle_ns)),
                "persistent": bool(r.persistent),
                "comm": bool(r.comm),
                "underfilled": bool(r.underfilled),
            }
        )
    return rows


REGION_KEYS = [*WINDOW_KEYS, *WINDOW_COLUMNS, "overlap_ratio"]


def region_rows(regions: pd.DataFrame) -> list[dict]:
    out = []
    for rec in regions[REGION_KEYS].to_dict("records"):
        row = {}
        for key, v in rec.items():
            if key.endswith("_ns") or key in ("device", "ops", "launches", "sync_gaps"):
                row[key] = int(round(v))
            else:
                row[key] = v
        out.append(row)
    return out


def collective_rows(coll: pd.DataFrame) -> list[dict]:
    if coll.empty:
        return []
    per = coll.groupby("instance").agg(
        name=("name", "first"), skew_ns=("skew_ns", "first"), last=("last_device", "first")
    )
    g = per.groupby("name").agg(
        instances=("skew_ns", "size"),
        median_skew_ns=("skew_ns", "median"),
        max_skew_ns=("skew_ns", "max"),
        most_often_last_device=("last", lambda s: s.mode().iloc[0]),
    )
    return [
        {"name": name, **{k: int(v) for k, v in rec.items()}}
        for name, rec in g.sort_values("max_skew_ns", ascending=False).iterrows()
    ]


def document(a: Analysis, findings: list[dict]) -> dict:
    """The full JSON-ready dict for one analysis."""
    t = a.trace
    gpus = [{"device": d, **spec.to_dict()} for d, spec in sorted(t.gpus.items())]
    seq = a.sequences.head(50)
    return plain(
        {
            "schema_version": SCHEMA_VERSION,
            "trace": {
                "path": t.path,
                "format": t.format,
                "producer_version": t.producer_version,
                "gpus": gpus,
                "devices": t.devices,
                "warnings": a.warnings,
            },
            "selection": a.selection,
            "summary": a.summary(),
            "kernels": kernel_rows(a.kernel_table()),
            "region_kernels": kernel_rows(a.kernel_table(by_region=True)),
            "regions": region_rows(a.regions),
            "launch_gaps": a.gaps.to_dict("records"),
            "streams": a.streams.to_dict("records"),
            "sequences": seq.to_dict("records"),
            "collectives": collective_rows(a.collectives),
            "findings": [{k: v for k, v in f.items() if not k.startswith("_")} for f in findings],
        }
    )


def render(a: Analysis, findings: list[dict]) -> str:
    """JSON text (indented, keys in schema order)."""
    return json.dumps(document(a, findings), indent=2)
