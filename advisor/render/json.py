"""The stable JSON document of ``advisor analyze --format json`` (schema in docs/json.md)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

import numpy as np
import orjson
import pandas as pd

from advisor import views
from advisor.analysis import WINDOW_COLUMNS, Analysis
from advisor.data import load_yaml
from advisor.metrics.regions import WINDOW_KEYS
from advisor.plain import integer_times, plain, plain_int_list, plain_list, rounded_int_list
from advisor.rules.finding import Finding, finding_dict
from advisor.rules.tables import step_table

SCHEMA_VERSION = 1
# a kernel group's hardware counters in its JSON row (data/counters.yaml ``evidence``)
COUNTER_EVIDENCE = load_yaml("counters.yaml")["evidence"]
TOP_KERNELS = 50  # rows of top_kernels in the document


def kernel_rows(k: pd.DataFrame) -> list[dict]:
    """One plain dict per kernel group (docs/json.md ``kernels``), built a column at a time
    (a trace of many distinct kernels has as many groups)."""
    n = len(k)
    columns: list[list] = []
    for col, kind in _KERNEL_FIELDS.values():
        if isinstance(col, tuple):  # (grid and block: a list of three per row)
            parts = [_KERNEL_VALUES[kind](k[c]) for c in col]
            columns.append([list(t) for t in zip(*parts, strict=True)])
        else:  # (a table without regions: None)
            columns.append(_KERNEL_VALUES[kind](k[col]) if col in k else [None] * n)
    rows = [dict(zip(_KERNEL_FIELDS, row, strict=True)) for row in zip(*columns, strict=True)]
    if "counter_launches" in k:  # (hardware counters: --counters, an ncu report)
        for i in np.flatnonzero(k["counter_launches"].to_numpy() != 0).tolist():
            rows[i]["counters"] = plain({c: k[c].iat[i] for c in COUNTER_EVIDENCE})
    return rows


# kernel_rows' fields in document order: JSON key -> (kernel table column(s), its kind)
_KERNEL_FIELDS = {
    "name": ("name", "plain"), "demangled": ("demangled", "plain"), "device": ("device", "int"),
    "region": ("region", "plain"), "grid": (("grid_x", "grid_y", "grid_z"), "maybe_int"),
    "grid_blocks": ("grid_blocks", "int"),
    "block": (("block_x", "block_y", "block_z"), "maybe_int"),
    "block_threads": ("block_threads", "int"),
    "registers_per_thread": ("registers", "maybe_int"),
    "shared_mem_per_block": ("smem_per_block", "maybe_int"), "launches": ("launches", "int"),
    "total_ns": ("total_ns", "int"), "median_ns": ("median_ns", "int"),
    "ctas_per_sm": ("ctas_per_sm", "maybe_int"), "occupancy_limiter": ("limiter", "plain"),
    "slots": ("slots", "maybe_int"), "waves": ("waves", "plain"),
    "tail_fraction": ("tail_fraction", "plain"), "tail_idle_ns": ("tail_idle_ns", "rounded"),
    "underfill_idle_ns": ("underfill_idle_ns", "rounded"),
    "persistent": ("persistent", "bool"), "comm": ("comm", "bool"),
    "underfilled": ("underfilled", "bool"),
}  # fmt: skip
# how a kind's column becomes plain values (NaN -> None where a value may be missing)
_KERNEL_VALUES = {
    "plain": plain_list,
    "maybe_int": plain_int_list,
    "int": lambda c: c.to_numpy(np.int64).tolist(),
    "rounded": rounded_int_list,
    "bool": lambda c: c.to_numpy().astype(bool).tolist(),
}


REGION_KEYS = [*WINDOW_KEYS, *WINDOW_COLUMNS, "overlap_ratio"]


_INT_KEYS = {"device", "ops", "launches", "sync_gaps"}


def region_rows(regions: pd.DataFrame) -> list[dict]:
    """One plain dict per region window: times and counts as integers (rounded half to
    even, like ``round``), other fields as plain values (NaN -> None)."""
    columns = []
    for key in REGION_KEYS:
        values = regions[key]
        if key.endswith("_ns") or key in _INT_KEYS:
            columns.append(rounded_int_list(values))
        else:
            columns.append(plain_list(values))
    return [dict(zip(REGION_KEYS, row, strict=True)) for row in zip(*columns, strict=True)]


STEP_KEYS = ["name", "device", "steps", "steady_steps", "step_ns", "busy_ns", "idle_ns",
             "overhead_ns", "sync_idle_ns", "launches", "median_gap_ns", "graph_saving_ns",
             "first_start_ns"]  # fmt: skip


def step_rows(a: Analysis) -> list[dict]:
    """One dict per step family (a repeated top-level range) and device: medians over its
    steady steps (ns, rounded to integers), counts as integers (docs/json.md)."""
    t = step_table(a)
    rows = []
    for r in t.to_dict("records"):
        rows.append({k: (r[k] if k == "name" else None if pd.isna(r[k]) else int(round(r[k])))
                     for k in STEP_KEYS})  # fmt: skip
    return rows


def document(
    a: Analysis, findings: list[Finding], ranks: list[dict] | None = None, long_lists: bool = True
) -> dict:
    """The full JSON-ready dict for one analysis (``ranks``: the traces of a job read as
    one, when several were given). Without ``long_lists``, the LONG_LISTS are empty lists
    (document_parts writes them a part at a time)."""
    t = a.trace
    gpus = [{"device": d, **spec.to_dict()} for d, spec in sorted(t.gpus.items())]
    seq = a.sequences.head(views.SEQUENCES_SHOWN)
    doc = integer_times(
        plain(
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
                # (filled below: these give plain values already, row by row of long tables)
                "kernels": None,
                "region_kernels": None,
                "regions": None,
                "launch_gaps": a.gaps.to_dict("records"),
                "streams": a.streams.to_dict("records"),
                "sequences": seq.to_dict("records"),
                "collectives": views.collectives(a).to_dict("records"),
                "top_kernels": views.top_kernels(a).head(TOP_KERNELS).to_dict("records"),
                "copies": views.copies(a).to_dict("records"),
                "sync_stalls": views.sync_stalls(a).to_dict("records"),
                "steps": step_rows(a),
                "pipeline_stages": views.pipeline_stages(a)[views.PIPELINE_COLUMNS].to_dict(
                    "records"
                ),
                "findings": [finding_dict(f) for f in findings],
            }
        )
    )
    for key, (tables, rows) in LONG_LISTS.items():
        doc[key] = [row for t in tables(a) for row in rows(t)] if long_lists else []
    if ranks is not None:
        doc["ranks"] = plain(ranks)
    return doc


# the document's lists with a row per kernel group or range instance (as many as a trace of
# many distinct kernels or a job of many ranks has): key -> (its table, as consecutive
# stretches of rows: a job's range instances are read back from their files a stretch at a
# time; the rows of one)
LONG_LISTS: dict[str, tuple[Callable[[Analysis], Iterable[pd.DataFrame]],
                            Callable[[pd.DataFrame], list]]]  # fmt: skip
LONG_LISTS = {
    "kernels": (lambda a: [a.kernel_table()], kernel_rows),
    "region_kernels": (lambda a: [a.kernel_table(by_region=True)], kernel_rows),
    "regions": (lambda a: a.region_chunks(REGION_KEYS), region_rows),
}
PART_ROWS = 5_000  # rows of a long list made into dicts at a time by document_parts


def document_parts(
    a: Analysis, findings: list[Finding], ranks: list[dict] | None = None, part: int = PART_ROWS
) -> Iterator[bytes]:
    """json_bytes of ``document(a, findings, ranks)`` as consecutive pieces (joined: the same
    bytes), each made when the next is asked for: the LONG_LISTS are made into dicts ``part``
    rows at a time (a job of 64 ranks lists 188K range instances), each part's dicts dropped
    once written by orjson. A part is written at the top level, then indented one level
    deeper (JSON text holds no raw newline inside a string, so every newline starts a line
    of its layout). The command line spools the pieces (staged.spooled) before it writes
    any: a failure leaves no half document."""
    # (the kernel groups, the first long list's table, are made after the head, not beside
    # it: both read every op or launch, and at 10M kernels their temporaries together were
    # the command's largest in use, 1.89 GB, for 0.5 s saved)
    head = json_bytes(document(a, findings, ranks, long_lists=False))
    pos = 0
    for key, (tables, rows) in LONG_LISTS.items():
        at, empty = None, b'\n  "' + key.encode() + b'": []'
        for t in tables(a):
            for lo in range(0, len(t), part):
                sep = b",\n"
                if at is None:  # (a top-level key: two spaces in, its quote unescaped)
                    at, sep = head.index(empty, pos), b""
                    yield head[pos : at + len(empty) - 1] + b"\n"  # (up to its '[')
                text = json_bytes(rows(t.iloc[lo : lo + part]))  # b'[\n  {...},\n  {...}\n]'
                yield sep + b"  " + text[2:-2].replace(b"\n", b"\n  ")
                del text
        if at is not None:
            yield b"\n  ]"
            pos = at + len(empty)
    yield head[pos:]


def render(a: Analysis, findings: list[Finding], ranks: list[dict] | None = None) -> str:
    """JSON text (indented, keys in schema order)."""
    return json_text(document(a, findings, ranks))


def json_text(value) -> str:
    """``value`` as JSON text indented by two spaces, keys in insertion order (orjson:
    numpy scalars as numbers, NaN as null)."""
    return json_bytes(value).decode()


def json_bytes(value) -> bytes:
    """json_text as UTF-8 bytes (what orjson writes: no text copy of a large document)."""
    return orjson.dumps(value, default=_plain_or_fail, option=_OPTIONS)


_OPTIONS = orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY


def _plain_or_fail(value):
    """orjson's hook for types it does not know: their plain value (pd.NA -> None)."""
    out = plain(value)
    if out is value:
        raise TypeError(f"not JSON serializable: {type(value).__name__}")
    return out
