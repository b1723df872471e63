"""AMD hardware counters (issue 29): a rocprofv3 ``counter_collection.csv`` (one row per
dispatch and counter), a rocprof-compute (Omniperf) ``pmc_perf.csv`` (one row per dispatch,
a column per counter, a ``sysinfo.csv`` beside it) and a rocpd database's PMC tables
(rocpd.py reads those rows) -> ``Trace.counters``: one row per profiled dispatch with the
columns of advisor/data/counters.yaml, filled by the formulas of
advisor/data/amd_counters.yaml (what is missing is NaN, and one warning says which counters
and what that limits).

A counters CSV alone is a kernel-level trace, as an Nsight Compute report is: rocprofv3 and
rocprof-compute serialize the dispatches to count them (one kernel on the GPU at a time), so
the dispatches are laid end to end with their measured durations (``Trace.timeline`` False)
and gaps, host calls and overlap are not measured. Joined to a timeline (``--counters``,
trace/counters.py) the dispatches match by kernel name, launch size and order; these files
give the grid and workgroup as totals (work-items), so the join compares total workgroups
and threads (``grid_total``).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from dataclasses import replace
from functools import cache
from pathlib import Path

import numpy as np
import pandas as pd

from advisor.data import load_yaml
from advisor.errors import READ_ERRORS, AdvisorInputError
from advisor.trace.gpus import FACT_LIMITS, cdna_spec, fact
from advisor.trace.model import GpuSpec, Trace
from advisor.trace.rocprof import (
    Layout,
    dispatches_to_kernels,
    normalize,
    numbers,
    read_csv,
    sibling_gpus,
    sniff,
)

FORMAT = "rocprof-counters"
NO_TIMELINE = (
    "a counters file holds no timeline (rocprofv3 and rocprof-compute serialize the "
    "dispatches to count them): launch gaps, idle causes, ranges and overlap are not "
    "measured; kernels, waves, tails and counters are (join the counters to a kernel trace "
    "of the program with --counters)"
)
LONG = {"Counter_Name", "Counter_Value"}  # a rocprofv3 counter_collection: one row per counter
_INSTANCE = re.compile(r"(?s)^(?P<base>.*?)(?:\[(?P<i>\d+)\])?$")
_FUNCS = {"max_of": "max", "mean_of": "mean"}


def spec() -> dict:
    """advisor/data/amd_counters.yaml."""
    return load_yaml("amd_counters.yaml")


def value_columns() -> list[str]:
    """The columns of trace.counters a counter tool fills per launch (counters.yaml:
    ``counters`` and ``physical``)."""
    c = load_yaml("counters.yaml")
    return [*c["counters"], *c["physical"]]


# --- the formulas ------------------------------------------------------------------------


@cache
def _parsed(formula: str) -> ast.Expression:
    """A formula of amd_counters.yaml, checked: numbers, counter names, + - * / and
    max_of(NAME) / mean_of(NAME) only (ValueError otherwise: a damaged data file)."""
    tree = ast.parse(" ".join(formula.split()), mode="eval")
    for node in ast.walk(tree):
        ok = isinstance(node, (ast.Expression, ast.BinOp, ast.UnaryOp, ast.USub, ast.Add,
                               ast.Sub, ast.Mult, ast.Div, ast.Name, ast.Load, ast.Call,
                               ast.Constant))  # fmt: skip
        if isinstance(node, ast.Call):
            ok = (isinstance(node.func, ast.Name) and node.func.id in _FUNCS
                  and len(node.args) == 1 and isinstance(node.args[0], ast.Name))  # fmt: skip
        if isinstance(node, ast.Constant):
            ok = isinstance(node.value, (int, float)) and not isinstance(node.value, bool)
        if not ok:
            raise ValueError(f"amd_counters.yaml: {formula!r}: {type(node).__name__} not allowed")
    return tree


def needs(formula: str) -> list[tuple[str, str | None]]:
    """The (counter, instance reduction or None for its total) a formula reads, in order."""
    out: list[tuple[str, str | None]] = []
    tree = _parsed(formula)
    calls = {id(n.args[0]): _FUNCS[n.func.id] for n in ast.walk(tree) if isinstance(n, ast.Call)
             and isinstance(n.func, ast.Name)}  # fmt: skip
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id not in _FUNCS:
            item = (node.id, calls.get(id(node)))
            if item not in out:
                out.append(item)
    return out


@cache
def wanted_counters() -> frozenset[str]:
    """Every counter a formula of amd_counters.yaml reads."""
    formulas = [f["formula"] for v in spec()["values"].values() for f in v]
    return frozenset(c for f in formulas for c, _ in needs(f))


def _base_name(name: str) -> str:
    """'TCC_HIT[3]' -> 'TCC_HIT', 'TCC_HIT_sum' -> 'TCC_HIT', else the name."""
    m = _INSTANCE.match(name.strip())
    base = m["base"] if m else name
    return base[:-4] if base.endswith("_sum") and not (m and m["i"]) else base


def _columns_read(names: list[str]) -> list[str]:
    """The counter columns of a pmc_perf.csv that are parsed: thousands of columns (each L2
    counter once per channel), of which only those a formula reads, and a counter's
    instances (``X[i]``) only where a formula reads them or the file has no total."""
    read = wanted_counters()
    totals = {c for c in names if c in read or (c.endswith("_sum") and c[:-4] in read)}
    per_instance = {c for v in spec()["values"].values() for f in v
                    for c, how in needs(f["formula"]) if how}  # fmt: skip
    out = []
    for c in names:
        base = _base_name(c)
        own_total = {base, base + "_sum"} & totals
        if c in totals or (base in read and (base in per_instance or not own_total)):
            out.append(c)
    return out


class Readings:
    """Per profiled dispatch (rows 0..n-1): the counters a file gave, as totals over their
    instances and, where the file gives each instance, their max and mean over instances.

    ``row``: the dispatch row of each reading, ``name``: the counter as written (``X``,
    ``X_sum`` or ``X[i]``), ``value``: the number. A plain name given several times for one
    dispatch is one value per instance (rocprofv3 and rocpd write one row per dimension when
    asked to); ``X_sum`` is the total of ``X``; ``X[i]`` is instance i."""

    def __init__(self, row: np.ndarray, name: pd.Series, value: np.ndarray, n: int) -> None:
        self.n = n
        wanted = wanted_counters()
        parts = name.astype(str).str.strip().str.extract(_INSTANCE.pattern)
        base = parts["base"].fillna("").astype(str)
        inst = parts["i"].notna().to_numpy()
        plain_sum = base.str.endswith("_sum").to_numpy() & ~inst
        base = base.where(~plain_sum, base.str.slice(0, -4))
        kind = np.where(inst, "inst", np.where(plain_sum, "sum", "plain"))
        keep = base.isin(wanted).to_numpy() & np.isfinite(np.asarray(value, dtype=np.float64))
        frame = pd.DataFrame({"row": np.asarray(row)[keep], "name": base.to_numpy()[keep],
                              "kind": kind[keep], "value": np.asarray(value)[keep]})  # fmt: skip
        self.present = set(frame["name"])
        self.groups = set(zip(frame["kind"], frame["name"], strict=True))
        self.stats = (frame.groupby(["kind", "name", "row"])["value"]
                      .agg(["sum", "max", "mean", "count"]))  # fmt: skip

    def _column(self, kind: str, name: str, stat: str, at_least: int = 1) -> np.ndarray:
        out = np.full(self.n, np.nan)
        if (kind, name) not in self.groups:
            return out
        part = self.stats.loc[(kind, name)]
        part = part[part["count"] >= at_least]
        out[part.index.to_numpy(np.int64)] = part[stat].to_numpy(np.float64)
        return out

    def total(self, name: str) -> np.ndarray:
        """Per dispatch: the counter summed over its instances (NaN where not given)."""
        out = self._column("plain", name, "sum")
        for kind in ("sum", "inst"):
            out = np.where(np.isnan(out), self._column(kind, name, "sum"), out)
        return out

    def over_instances(self, name: str, how: str) -> np.ndarray:
        """Per dispatch: max or mean over the counter's instances (NaN where the file gives
        only its total)."""
        out = self._column("inst", name, how, at_least=2)
        return np.where(np.isnan(out), self._column("plain", name, how, at_least=2), out)

    def has(self, name: str, how: str | None) -> bool:
        """Whether any dispatch has the counter (per instance, for a reduction)."""
        if name not in self.present:
            return False
        values = self.total(name) if how is None else self.over_instances(name, how)
        return bool(np.isfinite(values).any())


def _evaluate(node: ast.AST, r: Readings) -> np.ndarray:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body, r)
    if isinstance(node, ast.Constant):
        assert isinstance(node.value, (int, float))  # (_parsed allows numbers only)
        return np.full(r.n, float(node.value))
    if isinstance(node, ast.Name):
        return r.total(node.id)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        arg = node.args[0]
        assert isinstance(arg, ast.Name)
        return r.over_instances(arg.id, _FUNCS[node.func.id])
    if isinstance(node, ast.UnaryOp):
        return -_evaluate(node.operand, r)
    assert isinstance(node, ast.BinOp)
    ops: dict[type, Callable] = {ast.Add: np.add, ast.Sub: np.subtract, ast.Mult: np.multiply,
                                 ast.Div: np.true_divide}  # fmt: skip
    with np.errstate(divide="ignore", invalid="ignore"):
        out = ops[type(node.op)](_evaluate(node.left, r), _evaluate(node.right, r))
    return np.where(np.isfinite(out), out, np.nan)


def derive(r: Readings, label: str) -> tuple[dict[str, np.ndarray], list[str]]:
    """The trace.counters value columns from ``r`` by amd_counters.yaml (the first formula
    whose counters the file has; every other column NaN), and the warnings: formulas used
    with a note, and one naming the values left out with their counters and what that
    limits (``label``: the file, for the message)."""
    s = spec()
    out = {c: np.full(r.n, np.nan) for c in value_columns()}
    notes: list[str] = []
    missing: dict[str, list[str]] = {}
    for column, formulas in s["values"].items():
        chosen = next((f for f in formulas if all(r.has(c, how) for c, how in
                                                  needs(f["formula"]))), None)  # fmt: skip
        if chosen is None:
            first = needs(formulas[0]["formula"])
            missing[column] = sorted(c if how is None else f"{c} per instance"
                                     for c, how in first if not r.has(c, how))  # fmt: skip
            continue
        out[column] = _evaluate(_parsed(chosen["formula"]), r)
        if chosen.get("note"):
            notes.append(f"{label}: {' '.join(chosen['note'].split())}")
    if missing:
        parts = [f"{' '.join(s['limits'][c].split())} needs {', '.join(names)}"
                 for c, names in missing.items() if s["limits"].get(c)]  # fmt: skip
        wanted = sorted({n for names in missing.values() for n in names
                         if not n.endswith(" per instance")})  # fmt: skip
        hint = f" (collect them: rocprofv3 --pmc {' '.join(wanted)})" if wanted else ""
        notes.append(
            f"{label}: {len(missing)} of the {len(s['values'])} values advisor reads from AMD "
            f"counters are missing ({'; '.join(parts)}): those decisions are not made{hint}"
        )
    return out, notes


# --- one table per file: the dispatches and their counters --------------------------------


def counters_table(kernels: pd.DataFrame, values: dict[str, np.ndarray], rows: np.ndarray,
                   duration: np.ndarray, grid_total: bool) -> pd.DataFrame:  # fmt: skip
    """trace.counters for dispatches that are rows ``rows`` of ``kernels`` (launch = that
    row; profiled = the order the file lists them): name, launch size, registers,
    ``grid_total`` (the file gave the grid and workgroup as totals), ``duration_ns`` (the
    profiled dispatch's own, NaN where unknown) and the value columns."""
    k = kernels.iloc[rows]
    out = pd.DataFrame({
        "launch": np.asarray(rows, dtype=np.int64),
        "profiled": np.arange(len(rows), dtype=np.int64),
        "name": k["demangled"].astype(str).to_numpy(object),
        **{c: k[c].to_numpy() for c in ("grid_x", "grid_y", "grid_z", "block_x", "block_y",
                                        "block_z", "registers")},
        "grid_total": grid_total,
        "duration_ns": np.asarray(duration, dtype=np.float64),
    })  # fmt: skip
    for column, v in values.items():
        if column != "duration_ns":
            out[column] = v
    return out


def is_counter_layout(layout: Layout | None) -> bool:
    return layout is not None and layout.kind == "counters"


# what reading the header of a file that is no CSV may raise (pandas' parser errors and
# EmptyDataError are ValueErrors)
_SNIFF_ERRORS: tuple[type[Exception], ...] = (*READ_ERRORS, ValueError, UnicodeDecodeError)


def looks_like_amd_counters(path: Path) -> bool:
    """Whether ``path`` is a CSV whose header is a rocprofv3 counter_collection's or a
    rocprof-compute pmc_perf's (the header alone is read)."""
    try:
        head = pd.read_csv(path, nrows=0, encoding="utf-8-sig")
    except _SNIFF_ERRORS:
        return False
    return is_counter_layout(sniff([str(c) for c in head.columns]))


def read_amd_counters(path: str | Path, alone: bool = True,
                      raw: pd.DataFrame | None = None) -> Trace:  # fmt: skip
    """A counter_collection.csv or pmc_perf.csv (plain or gzipped) as a kernel-level Trace
    with its counters (the module doc). AdvisorInputError for another layout or a file
    without dispatches; ``alone`` (the file is the trace analyzed, not --counters): also
    for one without the dispatches' durations, and dispatches without one are dropped.
    ``raw``: the file's cells, when read already."""
    p = Path(path)
    raw = read_csv(p) if raw is None else raw
    layout = sniff([str(c) for c in raw.columns])
    if layout is None or not is_counter_layout(layout):
        head = ", ".join(map(str, list(raw.columns)[:6]))
        raise AdvisorInputError(str(p), f"not an AMD counters file: its header ({head}) is "
                                "neither a rocprofv3 counter_collection's nor a rocprof-compute "
                                "pmc_perf's")  # fmt: skip
    meta, readings = _dispatches(raw, layout, p)
    values, notes = derive(readings, p.name)
    nan = pd.Series(np.nan, index=meta.index)
    duration = (meta.get("end", nan) - meta.get("start", nan)).to_numpy(np.float64)
    timed = np.isfinite(duration) & (duration > 0)
    warnings = [NO_TIMELINE]
    if alone and not timed.any():
        raise AdvisorInputError(
            str(p), f"{layout.name}: dispatches without timestamps cannot be analyzed in time; "
            "its counters join a kernel trace of the same program: advisor analyze "
            f"KERNEL_TRACE --counters {p.name}",
        )  # fmt: skip
    if alone and not timed.all():
        warnings.append(f"{int((~timed).sum()):,} of {len(timed):,} profiled dispatches without "
                        "a valid duration (Start/End_Timestamp) dropped")  # fmt: skip
        keep = np.flatnonzero(timed)
        meta = meta.iloc[keep].reset_index(drop=True)
        values = {c: v[keep] for c, v in values.items()}
        duration, timed = duration[keep], timed[keep]
    # laid end to end in profiling order (ncu.py does the same with its replayed launches)
    length = np.where(timed, np.round(np.where(timed, duration, 0)), 0).astype(np.int64)
    meta["start"] = np.concatenate([[0], np.cumsum(length)[:-1]]).astype(np.int64)
    meta["end"] = meta["start"] + length
    kernels = dispatches_to_kernels(meta, 0)
    if "arch_vgpr" not in meta:
        kernels["registers"] = -1  # (unknown: the occupancy model says so)
    rows = np.arange(len(kernels))
    trace = Trace(path=str(p), format=FORMAT, producer_version=layout.name, kernels=kernels,
                  counters=counters_table(kernels, values, rows, np.where(timed, duration, np.nan),
                                          grid_total=True),
                  timeline=False, warnings=[*warnings, *notes], counter_notes=notes)  # fmt: skip
    gpus, gpu_notes, sources = _gpus(p, layout, trace)
    trace.gpus, trace.sources = gpus, sources
    trace.warnings += gpu_notes
    return trace


def _dispatches(raw: pd.DataFrame, layout: Layout, p: Path) -> tuple[pd.DataFrame, Readings]:
    """One row per profiled dispatch (normalized as rocprof.py does, in Dispatch_Id order)
    and the counters read for each."""
    table = normalize(raw, layout, str(p))
    if table.empty:
        raise AdvisorInputError(str(p), f"{layout.name}: no kernel dispatches")
    if "dispatch" not in table or table["dispatch"].isna().all():
        raise AdvisorInputError(str(p), f"{layout.name}: no Dispatch_Id column with values")
    if table["dispatch"].isna().any():
        raise AdvisorInputError(str(p), f"{layout.name}: data row "
                                f"{int(np.flatnonzero(table['dispatch'].isna())[0]) + 1} has no "
                                "Dispatch_Id")  # fmt: skip
    if set(raw.columns) >= LONG:
        text = raw["Counter_Value"].astype(str).str.strip()
        value = numbers(text, text, "Counter_Value", str(p))
        first = ~table["dispatch"].duplicated()
        meta = table[first.to_numpy()].sort_values("dispatch", kind="stable")
        at = pd.Index(meta["dispatch"]).get_indexer(table["dispatch"])
        meta = meta.reset_index(drop=True)
        return meta, Readings(at, raw["Counter_Name"], value.to_numpy(np.float64), len(meta))
    # pmc_perf: a column per counter (and per counter instance)
    s = spec()
    repeats = re.compile(s["pmc_perf_meta_repeats"])
    names = [c for c in raw.columns if c not in s["pmc_perf_meta"] and not repeats.match(c)]
    if not names:
        raise AdvisorInputError(str(p), f"{layout.name} without counter columns")
    names = _columns_read(names)
    order = np.argsort(table["dispatch"].to_numpy(np.float64), kind="stable")
    meta = table.iloc[order].reset_index(drop=True)
    cells = raw[names].iloc[order].reset_index(drop=True)
    text = cells.astype(str).apply(lambda c: c.str.strip())
    n = len(meta)
    values = np.column_stack([numbers(text[c], text[c], c, str(p)).to_numpy(np.float64)
                              for c in names]) if names else np.zeros((n, 0))  # fmt: skip
    at = np.tile(np.arange(n), len(names))
    flat = values.reshape(-1, order="F")  # (column by column, as ``at`` and the names)
    counter = pd.Series(np.repeat(np.array(names, dtype=object), n))
    return meta, Readings(at, counter, flat, n)


def _gpus(p: Path, layout: Layout, trace: Trace) -> tuple[dict[int, GpuSpec], list[str], list]:
    """GPU facts from the file beside it: rocprofv3's agent_info.csv, rocprof-compute's
    sysinfo.csv (facts, notes, the files read)."""
    if layout.name.startswith("rocprof-compute"):
        sysinfo = _sysinfo_beside(p)
        if sysinfo is None:
            return {}, [], []
        spec_, note = read_sysinfo(sysinfo)
        if spec_ is None:
            return {}, [note] if note else [], []
        return {int(d): spec_ for d in trace.devices}, [], [sysinfo.name]
    return sibling_gpus(p, trace)


def _sysinfo_beside(p: Path) -> Path | None:
    """sysinfo.csv beside a pmc_perf.csv: the same name with sysinfo for the last
    pmc_perf (rocprof-compute writes both into the workload folder)."""
    name = p.name
    at = name.rfind("pmc_perf")
    if at < 0:
        return None
    other = p.with_name(name[:at] + "sysinfo" + name[at + len("pmc_perf") :])
    return other if other.is_file() else None


def _gfx_number(text) -> float | None:
    """'gfx942' -> 90402 (major * 10000 + minor * 100 + stepping, as agent records give it)."""
    m = re.fullmatch(r"\s*gfx(\d{1,2})([0-9a-f])([0-9a-f])\s*", str(text), re.IGNORECASE)
    return float(int(m[1]) * 10000 + int(m[2], 16) * 100 + int(m[3], 16)) if m else None


def read_sysinfo(path: Path) -> tuple[GpuSpec | None, str]:
    """The GPU facts of a rocprof-compute sysinfo.csv (one row: gpu_model, gpu_arch,
    cu_per_gpu, simd_per_cu, max_waves_per_cu, wave_size, max_sclk (MHz), hbm_bw (GB/s)),
    or None and why."""
    try:
        row = read_csv(path).iloc[0]
    except (AdvisorInputError, IndexError):
        return None, f"{path.name} beside it is not a readable sysinfo.csv: its facts are not used"
    simds = fact(row.get("simd_per_cu"), FACT_LIMITS["warps"])
    waves = fact(row.get("max_waves_per_cu"), FACT_LIMITS["warps"])
    name = str(row.get("gpu_model") or "AMD GPU")
    base = cdna_spec(name=name, gfx=_gfx_number(row.get("gpu_arch")), cus=row.get("cu_per_gpu"),
                     simds=simds, waves=waves / simds if simds and waves else None, lds_kb=None,
                     wave=row.get("wave_size"), source=f"trace ({path.name})")  # fmt: skip
    if base is None:
        return None, f"{path.name} beside it gives no usable compute-unit count: not used"
    clock = fact(row.get("max_sclk"), FACT_LIMITS["clock_hz"] / 1e6)
    bandwidth = fact(row.get("hbm_bw"), FACT_LIMITS["bandwidth_bs"] / 1e9)
    facts = replace(base, clock_mhz=clock or base.clock_mhz,
                    memory_bandwidth_gbs=bandwidth or base.memory_bandwidth_gbs)  # fmt: skip
    return facts, ""
