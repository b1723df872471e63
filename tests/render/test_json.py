"""The JSON document's kernel rows (built a column at a time) against each group's own
values, field by field, on a real trace with hardware counters and on missing values."""

import json

import numpy as np
import pytest
from conftest import SAMPLES

import advisor
from advisor.plain import plain, plain_int
from advisor.render.json import (
    COUNTER_EVIDENCE,
    PART_ROWS,
    document,
    document_parts,
    json_bytes,
    kernel_rows,
)

COUNTERS = SAMPLES / "counters"

# JSON field -> (kernel table column, how one value is made plain)
FIELDS = {
    "name": ("name", plain), "demangled": ("demangled", plain), "device": ("device", int),
    "region": ("region", plain), "grid_blocks": ("grid_blocks", int),
    "block_threads": ("block_threads", int), "registers_per_thread": ("registers", plain_int),
    "shared_mem_per_block": ("smem_per_block", plain_int), "launches": ("launches", int),
    "total_ns": ("total_ns", int), "median_ns": ("median_ns", int),
    "ctas_per_sm": ("ctas_per_sm", plain_int), "occupancy_limiter": ("limiter", plain),
    "slots": ("slots", plain_int), "waves": ("waves", plain),
    "tail_fraction": ("tail_fraction", plain),
    "tail_idle_ns": ("tail_idle_ns", lambda v: int(round(v))),
    "underfill_idle_ns": ("underfill_idle_ns", lambda v: int(round(v))),
    "persistent": ("persistent", bool), "comm": ("comm", bool),
    "underfilled": ("underfilled", bool),
}  # fmt: skip


def _check(k, rows):
    assert len(rows) == len(k)
    for i, row in enumerate(rows):
        for field, (col, make) in FIELDS.items():
            want = make(k[col].iat[i]) if col in k else None
            assert row[field] == want and type(row[field]) is type(want), (i, field)
        assert row["grid"] == [plain_int(k[c].iat[i]) for c in ("grid_x", "grid_y", "grid_z")]
        assert row["block"] == [plain_int(k[c].iat[i]) for c in ("block_x", "block_y", "block_z")]
        counted = "counter_launches" in k and k["counter_launches"].iat[i] > 0
        assert ("counters" in row) == counted, i
        if counted:
            assert row["counters"] == plain({c: k[c].iat[i] for c in COUNTER_EVIDENCE})


def test_kernel_rows_hold_each_groups_values():
    raw = COUNTERS / "counters.ncu.raw.csv.gz"
    result = advisor.analyze(COUNTERS / "counters.sqlite", counters=raw)
    k = result.analysis.kernel_table()
    assert (k["counter_launches"] > 0).any() and (k["counter_launches"] == 0).any()
    _check(k, kernel_rows(k))
    by_region = result.analysis.kernel_table(by_region=True)
    _check(by_region, kernel_rows(by_region))


def test_kernel_rows_with_missing_values():
    k = advisor.analyze(SAMPLES / "h200_train_steps.sqlite").analysis.kernel_table()
    k = k.head(6).copy()
    k["grid_x"] = k["grid_x"].astype(float)
    k.loc[k.index[0], ["grid_x", "waves", "ctas_per_sm"]] = np.nan
    k["limiter"] = k["limiter"].astype(object)
    k.loc[k.index[1], "limiter"] = None
    rows = kernel_rows(k)
    _check(k, rows)
    assert rows[0]["grid"][0] is None and rows[0]["waves"] is None
    assert rows[1]["occupancy_limiter"] is None


def _joined(*args, part: int) -> bytes:
    """document_parts joined (what the command line writes one piece after another)."""
    parts = list(document_parts(*args, part=part))
    assert all(isinstance(p, bytes) for p in parts)
    return b"".join(parts)


@pytest.mark.parametrize("part", [1, 2, 5, 20_000])
def test_the_document_written_a_part_at_a_time_is_the_same_bytes(part):
    # long lists made into dicts `part` rows at a time and spliced into the rest: byte for
    # byte the document's own JSON, with ranges (train steps), counters, and none at all
    cases = [
        advisor.analyze(SAMPLES / "h200_train_steps.sqlite"),
        advisor.analyze(
            COUNTERS / "counters.sqlite", counters=COUNTERS / "counters.ncu.raw.csv.gz"
        ),
        advisor.analyze(SAMPLES / "h200_scheduling.sqlite"),
    ]
    for r in cases:
        want = json_bytes(document(r.analysis, r.finding_list, r.ranks))
        assert _joined(r.analysis, r.finding_list, r.ranks, part=part) == want
    assert any(len(r.document["regions"]) > 5 for r in cases)  # (several parts at 1, 2, 5)


def test_a_jobs_document_written_a_part_at_a_time_is_the_same_bytes():
    ranks = sorted((SAMPLES.parent / "tests" / "data" / "public" / "kineto").glob(
        "hta_sampled_rank-*.json.gz"))  # fmt: skip
    r = advisor.analyze([str(p) for p in ranks], jobs=1)
    assert r.ranks and len(r.document["regions"]) > 2
    want = json_bytes(r.document)
    assert _joined(r.analysis, r.finding_list, r.ranks, part=2) == want


def test_the_kernel_groups_are_made_once_for_the_document(monkeypatch, kernel_group_calls):
    # document_parts makes the whole kernel groups' table once (after the head, not beside
    # it: memory), and the long list reads the analysis' kept table: one kernel_groups call
    # for the whole table (and one per region), with two threads as with one
    from advisor.metrics import ahead

    calls = kernel_group_calls
    for threads in (2, 1):
        monkeypatch.setattr(ahead, "ANALYSIS_THREADS", threads)
        r = advisor.analyze(SAMPLES / "h200_train_steps.sqlite")  # (its rules: per region)
        calls.clear()
        joined = _joined(r.analysis, r.finding_list, r.ranks, part=PART_ROWS)
        assert calls == [("shape",)]
        assert joined == json_bytes(document(r.analysis, r.finding_list, r.ranks))


def _float_times(value, path: str = "") -> list[str]:
    """The paths of float values under *_ns keys (docs/json.md: times are integer ns)."""
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _float_times(v, f"{path}.{k}")]
    if isinstance(value, list):
        return [p for v in value for p in _float_times(v, f"{path}[]")]
    return [path] if isinstance(value, float) and path.endswith("_ns") else []


@pytest.mark.parametrize("name", ["hta_alexnet_cuda_sync.json.gz",
                                  "tracelens_normalization_mi300x.json.gz"])  # fmt: skip
def test_every_time_in_the_document_is_an_integer(name):
    # (their medians, and the evidence of their kernel and step findings, were floats)
    from conftest import PUBLIC

    doc = json.loads(advisor.analyze(str(PUBLIC / "kineto" / name)).to_json())
    assert doc["launch_gaps"] and doc["findings"]
    assert _float_times(doc) == []


def test_integer_times_round_half_to_even():
    from advisor.plain import integer_times

    doc = {"median_ns": 1000.5, "max_ns": 1001.5, "share": 0.5, "rows": [{"gap_ns": 2.5}],
           "name_ns": "text", "none_ns": None}  # fmt: skip
    assert integer_times(doc) == {"median_ns": 1000, "max_ns": 1002, "share": 0.5,
                                  "rows": [{"gap_ns": 2}], "name_ns": "text",
                                  "none_ns": None}  # fmt: skip
