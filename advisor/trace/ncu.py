"""Nsight Compute reports: the ``--page raw`` CSV (one row per profiled launch, a units row
under the header), the ``--page details`` CSV beside it (ncu's own rule results), plain or
gzipped, and ``.ncu-rep`` reports exported to both with the ``ncu`` on PATH (or ``$NCU``)
into the cache, as ``.nsys-rep`` reports are (nsys_rep.py).

A report alone is a kernel-level trace: ncu serializes and replays every launch it
profiles, so the launches are laid end to end (no gaps, no host calls, no ranges:
``Trace.timeline`` is False) and each keeps its configuration, duration and counters
(``Trace.counters``, the columns advisor/data/counters.yaml names).
"""

from __future__ import annotations

import csv
import gzip
import io
import math
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd

from advisor.data import load_yaml
from advisor.errors import READ_ERRORS, AdvisorInputError, read_problem
from advisor.trace.counters import kernel_base_name
from advisor.trace.gpus import match_gpu, reserved_shared_mem
from advisor.trace.model import GpuSpec, Trace
from advisor.trace.nsys_rep import EXPORT_TIMEOUT_S, export_cache, make_folder

SUFFIX = ".ncu-rep"
# the first cells of every Nsight Compute CSV page that lists launches (raw, details)
HEADER_START = ["ID", "Process ID", "Process Name", "Host Name", "Kernel Name"]
RAW_EXPORT = "ncu --import R.ncu-rep --csv --page raw > R.ncu.raw.csv"
DETAILS_EXPORT = "ncu --import R.ncu-rep --csv --page details > R.ncu.details.csv"
NO_TIMELINE = (
    "an Nsight Compute report holds no timeline (ncu serializes and replays each launch it "
    "profiles): launch gaps, idle causes, ranges and overlap are not measured; kernels, "
    "waves, tails and counters are (join the counters to a timeline with --counters)"
)
# the details page: its columns naming a rule result
INTEGER_COLUMNS = ["grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z", "registers",
                   "static_smem", "dynamic_smem", "smem_executed"]  # fmt: skip
RULE_COLUMNS = {"Section Name": "section", "Rule Name": "rule", "Rule Type": "type",
                "Estimated Speedup": "speedup", "Estimated Speedup Type": "speedup_type",
                "Rule Description": "description"}  # fmt: skip


def is_ncu_report(path: Path) -> bool:
    return path.name.lower().endswith(SUFFIX)


def _open_text(path: Path):
    opener = gzip.open if path.name.lower().endswith(".gz") else open
    return opener(path, "rt", encoding="utf-8", newline="")


# what reading the head of a file that is no ncu CSV may raise
_SNIFF_ERRORS: tuple[type[Exception], ...] = (*READ_ERRORS, UnicodeDecodeError, csv.Error)


def looks_like_ncu_csv(path: Path) -> bool:
    """Whether ``path`` (plain or gzipped) starts, after any ``==PROF==`` lines, with the
    header of an Nsight Compute CSV page."""
    try:
        with _open_text(path) as fh:
            for _ in range(50):
                line = fh.readline(65536)
                if not line:
                    return False
                if not line.startswith("=="):
                    head = next(csv.reader([line]), [])
                    return head[: len(HEADER_START)] == HEADER_START
    except _SNIFF_ERRORS:
        return False
    return False


def _table(path: Path) -> tuple[list[str], list[list[str]]]:
    """(header, rows) of an ncu CSV page (lines of ncu's own messages before it skipped)."""
    try:
        with _open_text(path) as fh:
            text = fh.read()
    except UnicodeDecodeError:
        raise AdvisorInputError(str(path), "not text: binary data, not an ncu CSV") from None
    except READ_ERRORS as exc:
        raise AdvisorInputError(str(path), f"cannot read: {read_problem(exc)}") from None
    lines = text.splitlines(keepends=True)
    while lines and lines[0].startswith("=="):
        lines.pop(0)
    try:
        rows = list(csv.reader(io.StringIO("".join(lines))))
    except csv.Error as exc:
        raise AdvisorInputError(str(path), f"not a readable CSV: {exc}") from None
    if not rows or rows[0][: len(HEADER_START)] != HEADER_START:
        raise AdvisorInputError(str(path), "not an Nsight Compute CSV (expected the header "
                                           f"{', '.join(HEADER_START)}, ...)")  # fmt: skip
    return rows[0], [r for r in rows[1:] if any(c.strip() for c in r)]


def _number(text: str) -> float:
    """An ncu cell as a number: thousands separators dropped; text or n/a -> NaN."""
    try:
        return float(text.replace(",", "").strip())
    except ValueError:
        return math.nan


def _in_unit(values: np.ndarray, unit: str | None, want: str | None, what: str, path) -> np.ndarray:
    """``values`` (in the CSV's ``unit``) in the unit counters.yaml gives (``want``)."""
    if want not in load_yaml("counters.yaml")["units"]:
        return values
    factors = load_yaml("counters.yaml")["units"][want]
    unit = (unit or "").strip() or want
    if unit not in factors:
        raise AdvisorInputError(str(path), f"{what}: unknown unit {unit!r} (expected one of "
                                           f"{', '.join(factors)})")  # fmt: skip
    return values * float(factors[unit])


def _dims(cell: str) -> tuple[float, float, float]:
    """'(6, 22, 1)' -> (6.0, 22.0, 1.0); NaN where unreadable."""
    parts = [p for p in cell.strip().strip("()").split(",") if p.strip()] if cell else []
    x, y, z = [_number(p) for p in parts[:3]] + [math.nan] * (3 - min(len(parts), 3))
    return x, y, z


def read_ncu(path: str | Path) -> Trace:
    """Read an Nsight Compute raw page (``.csv`` or ``.csv.gz``) into a kernel-level Trace
    with its counters; a details page beside it (the same name with ``details`` for
    ``raw``) adds ncu's rule results. AdvisorInputError for another page or a report
    without launches."""
    p = Path(path)
    header, rows = _table(p)
    if "Rule Name" in header or {"Metric Name", "Metric Value"} <= set(header):
        raise AdvisorInputError(
            str(p),
            "the details page of an Nsight Compute report (ncu's sections and rule results), "
            f"not the raw page advisor reads per launch: export it with {RAW_EXPORT} "
            "(a details page beside it, named with 'details' for 'raw', is read too)",
        )
    spec = load_yaml("counters.yaml")
    duration = spec["launch"]["duration"]["ncu"]
    if duration not in header:
        raise AdvisorInputError(
            str(p),
            f"an Nsight Compute CSV without {duration}: not the raw page advisor reads "
            f"(another page or version?); export it with {RAW_EXPORT}",
        )
    units = None
    if rows and rows[0][0].strip() == "":  # the units row under the header
        units = dict(zip(header, rows.pop(0), strict=False))
    whole = [r for r in rows if len(r) == len(header)]
    warnings: list[str] = []
    if len(whole) < len(rows):
        warnings.append(f"{len(rows) - len(whole):,} of {len(rows):,} rows of the raw page "
                        "have another number of cells than its header (a damaged file): "
                        "dropped")  # fmt: skip
    rows = whole
    if not rows:
        raise AdvisorInputError(
            str(p), "Nsight Compute report without kernel launches (nothing was profiled: "
                    "check ncu's -k / -c / --launch-skip filters)",
        )  # fmt: skip
    col = {name: i for i, name in enumerate(header)}

    def metric(name: str, want: str | None = None) -> np.ndarray:
        if name not in col:
            return np.full(len(rows), math.nan)
        values = np.array([_number(r[col[name]]) for r in rows], dtype=np.float64)
        return _in_unit(values, (units or {}).get(name), want, name, p)

    kept = np.isfinite(dur := metric(duration, "ns")) & (dur > 0)
    if not kept.all():
        warnings.append(f"{int((~kept).sum()):,} of {len(rows):,} profiled launches without a "
                        f"valid duration ({duration}) dropped")  # fmt: skip
        rows = [r for r, k in zip(rows, kept, strict=True) if k]
        if not rows:
            raise AdvisorInputError(str(p), f"no profiled launch has a valid duration ({duration})")
    kernels = _kernels(rows, col, metric, spec["launch"])
    counters = _counters(kernels, metric, spec["counters"])
    missing = [v["ncu"] for v in spec["counters"].values() if v["ncu"] not in col]
    if missing:
        warnings.append(
            f"the raw page lacks {len(missing)} of the {len(spec['counters'])} metrics advisor "
            f"reads ({', '.join(missing[:3])}{', ...' if len(missing) > 3 else ''}): captured "
            "without --set full? the decisions that need them are not made"
        )
    trace = Trace(path=str(p), format="ncu-csv", producer_version="Nsight Compute (raw page)",
                  kernels=kernels, counters=counters, timeline=False,
                  gpus=_gpus(rows, col, kernels, spec["device"]),
                  warnings=[NO_TIMELINE, *warnings], counter_notes=list(warnings))  # fmt: skip
    details = details_beside(p)
    if details is not None:
        _add_rules(trace, details)
    return trace


def details_beside(raw: Path) -> Path | None:
    """The details page next to a raw page: its name with 'details' for the last 'raw',
    gzipped or not."""
    name = raw.name
    at = name.rfind("raw")
    if at < 0:
        return None
    other = name[:at] + "details" + name[at + 3 :]
    plain = other.removesuffix(".gz")
    for candidate in (other, plain, plain + ".gz"):
        if raw.with_name(candidate).is_file():
            return raw.with_name(candidate)
    return None


def _kernels(rows, col: dict, metric, launch: dict) -> pd.DataFrame:
    """trace.kernels of the profiled launches, laid end to end in profiling order."""
    duration = np.round(metric(launch["duration"]["ncu"], "ns")).astype(np.int64)
    start = np.concatenate([[0], np.cumsum(duration)[:-1]]).astype(np.int64)
    full = [r[col["Kernel Name"]] for r in rows]
    k = pd.DataFrame({
        "device": [int(_number(r[col["Device"]])) if "Device" in col and
                   math.isfinite(_number(r[col["Device"]])) else 0 for r in rows],
        "stream": [_number(r[col["Stream"]]) if "Stream" in col else 0.0 for r in rows],
        "start": start, "end": start + duration,
        "name": [kernel_base_name(f) for f in full], "demangled": full,
    })  # fmt: skip
    for axis, source in (("grid", "Grid Size"), ("block", "Block Size")):
        text = [_dims(r[col[source]]) if source in col else (math.nan,) * 3 for r in rows]
        for i, d in enumerate("xyz"):
            values = metric(launch[f"{axis}_{d}"]["ncu"])
            k[f"{axis}_{d}"] = np.where(np.isnan(values), [t[i] for t in text], values)
    for field in ("registers", "static_smem", "dynamic_smem", "smem_executed", "cluster_x",
                  "cluster_y", "cluster_z"):  # fmt: skip
        k[field] = metric(launch[field]["ncu"], launch[field].get("unit"))
    for d in "xyz":  # (ncu writes 0 for a launch without clusters)
        k[f"cluster_{d}"] = k[f"cluster_{d}"].where(k[f"cluster_{d}"] > 0)
    for c in INTEGER_COLUMNS:  # (integers, as the other readers give them, where all known)
        if np.isfinite(k[c].to_numpy(np.float64)).all():
            k[c] = k[c].astype(np.int64)
    k["stream"] = k["stream"].fillna(0).astype(np.int64)
    k["correlation"] = [_number(r[col["ID"]]) for r in rows]
    k["pid"] = [_number(r[col["Process ID"]]) for r in rows]
    k["graph_node"] = np.nan
    for c in ("correlation", "pid"):
        if np.isfinite(k[c].to_numpy(np.float64)).all():
            k[c] = k[c].astype(np.int64)
    return k


def _counters(kernels: pd.DataFrame, metric, counters: dict) -> pd.DataFrame:
    """trace.counters: one row per profiled launch, its own launch (``launch`` = its row)."""
    out = pd.DataFrame({
        "launch": np.arange(len(kernels), dtype=np.int64),
        "profiled": np.arange(len(kernels), dtype=np.int64),
        "name": kernels["demangled"].to_numpy(object),
        **{c: kernels[c].to_numpy() for c in ("grid_x", "grid_y", "grid_z", "block_x", "block_y",
                                              "block_z", "registers")},
    })  # fmt: skip
    for column, source in counters.items():
        out[column] = metric(source["ncu"])
    return out


def _gpus(rows, col: dict, kernels: pd.DataFrame, names: dict) -> dict[int, GpuSpec]:
    """GPU facts from the device attributes ncu records with each launch (the first launch
    on each device); clock, bandwidth and peak rate from the built-in entry of its name."""
    out: dict[int, GpuSpec] = {}
    for device, row in zip(kernels["device"].to_numpy(), rows, strict=True):
        if int(device) in out:
            continue

        def attr(key: str, row=row) -> float:
            name = names[key]
            return _number(row[col[name]]) if name in col else math.nan

        sms = attr("sm_count")
        if not (math.isfinite(sms) and sms > 0):
            continue  # (no facts: load.py warns and falls back)
        display = row[col[names["name"]]].strip() if names["name"] in col else ""
        base = match_gpu(display) if display else None
        major, minor = attr("cc_major"), attr("cc_minor")
        cc = f"{int(major)}.{int(minor)}" if math.isfinite(major) and math.isfinite(minor) else (
            base.compute_capability if base else "0.0")  # fmt: skip
        defaults = base.to_dict() if base else {}

        def fact(key: str, default, attr=attr) -> int:
            value = attr(key)
            return int(value) if math.isfinite(value) and value > 0 else default

        reserved = attr("reserved_shared_mem_per_block")
        clock = attr("clock_khz")
        out[int(device)] = GpuSpec(
            name=display or (base.name if base else "unknown GPU"),
            vendor="nvidia",
            sm_count=int(sms),
            compute_capability=cc,
            warp_size=fact("warp_size", 32),
            max_warps_per_sm=fact("max_warps_per_sm", defaults.get("max_warps_per_sm", 64)),
            max_blocks_per_sm=fact("max_blocks_per_sm", defaults.get("max_blocks_per_sm", 32)),
            registers_per_sm=fact("registers_per_sm", defaults.get("registers_per_sm", 65536)),
            shared_mem_per_sm=fact("shared_mem_per_sm", defaults.get("shared_mem_per_sm", 0)),
            max_shared_mem_per_block=fact("max_shared_mem_per_block",
                                          defaults.get("max_shared_mem_per_block", 0)),
            reserved_shared_mem_per_block=int(reserved) if math.isfinite(reserved) and reserved >= 0
            else reserved_shared_mem("nvidia", cc),
            clock_mhz=clock / 1000 if math.isfinite(clock) and clock > 0 else defaults.get(
                "clock_mhz"),
            memory_bandwidth_gbs=defaults.get("memory_bandwidth_gbs"),
            dense_fp16_tflops=defaults.get("dense_fp16_tflops"),
            source="trace (Nsight Compute device attributes)",
        )  # fmt: skip
    return out


def read_rules(path: Path) -> pd.DataFrame:
    """ncu's rule results of a details page: one row per result (profiled = the launch's
    position among the page's launches, ID = its ``ID``; name: the launch's kernel name)."""
    header, rows = _table(path)
    if "Rule Name" not in header:
        raise AdvisorInputError(str(path), "an Nsight Compute CSV without rule results: not "
                                           f"the details page ({DETAILS_EXPORT})")  # fmt: skip
    col = {name: i for i, name in enumerate(header)}
    ids: dict[str, int] = {}
    out = []
    for r in rows:
        launch = ids.setdefault(r[0], len(ids))
        cells = {k: (r[col[c]] if c in col and col[c] < len(r) else "")
                 for c, k in RULE_COLUMNS.items()}  # fmt: skip
        if not cells["rule"].strip():
            continue
        out.append({"profiled": launch, "id": r[0], "name": r[col["Kernel Name"]],
                    **cells, "speedup": _number(cells["speedup"])})  # fmt: skip
    cols = ["profiled", "id", "name", *RULE_COLUMNS.values()]
    return pd.DataFrame(out, columns=cols)


def _add_rules(trace: Trace, details: Path) -> None:
    """Attach the rule results of ``details`` to ``trace`` when its launches are the raw
    page's (the same IDs and kernel names), else warn and leave them out."""
    try:
        rules = read_rules(details)
    except AdvisorInputError as exc:
        trace.warnings.append(f"{details.name} beside the raw page is not read: {exc.message}")
        return
    ids = trace.kernels["correlation"].to_numpy()
    names = dict(zip(ids, trace.kernels["demangled"], strict=True))
    known = rules["id"].map(lambda i: names.get(_number(i)))
    same = known.notna() & (known == rules["name"])
    if len(rules) and not same.all():
        trace.warnings.append(
            f"{details.name} beside the raw page describes other launches ({int((~same).sum())} "
            "of its rule results name an ID or kernel the raw page does not hold): its rule "
            "results are left out"
        )
        return
    position = {i: n for n, i in enumerate(ids)}
    rules["profiled"] = rules["id"].map(lambda i: position[_number(i)]).astype(np.int64)
    trace.counter_rules = rules.drop(columns=["id", "name"]).reset_index(drop=True)
    trace.sources.append(f"{details.name} (ncu's rule results)")


def find_ncu() -> str | None:
    """The ncu executable: ``$NCU`` when set, else ``ncu`` on PATH."""
    return os.environ.get("NCU") or shutil.which("ncu")


def export_report(path: Path) -> tuple[Path, Path]:
    """The raw and details pages of an ``.ncu-rep`` as CSV (made now, or found in the
    cache folder ``ncu-rep/<sha256 of the report>.{raw,details}.csv``)."""
    ncu = find_ncu()
    if ncu is None:
        raise AdvisorInputError(
            str(path),
            "an Nsight Compute report: ncu is not on PATH (set NCU=/path/to/ncu), or export it "
            f"yourself: {RAW_EXPORT} (and {DETAILS_EXPORT} beside it)",
        )
    digest, folder = export_cache(path, "ncu-rep")
    out = {page: folder / f"{digest}.{page}.csv" for page in ("raw", "details")}
    if all(p.is_file() for p in out.values()):
        return out["raw"], out["details"]
    make_folder(folder)
    for page, target in out.items():
        partial = folder / f".{digest}.{os.getpid()}.partial.{page}.csv"
        cmd = [ncu, "--import", str(path), "--csv", "--page", page]
        try:
            with open(partial, "w") as fh:
                proc = subprocess.run(cmd, stdout=fh, stderr=subprocess.PIPE, text=True,
                                      timeout=EXPORT_TIMEOUT_S)  # fmt: skip
        except (OSError, subprocess.TimeoutExpired) as exc:
            partial.unlink(missing_ok=True)
            raise AdvisorInputError(str(path), f"ncu --import failed to run: {exc}") from None
        if proc.returncode != 0:
            partial.unlink(missing_ok=True)
            said = " ".join((proc.stderr or "").split())[-300:] or "no output"
            raise AdvisorInputError(str(path), f"ncu --import failed (exit {proc.returncode}): "
                                               f"{said}")  # fmt: skip
        os.replace(partial, target)
    return out["raw"], out["details"]


def read_ncu_report(path: Path) -> Trace:
    """An ``.ncu-rep``: its raw and details pages exported (export_report), then read."""
    raw, details = export_report(path)
    trace = read_ncu(raw)
    trace.path = str(path)
    trace.sources.insert(0, f"{raw} (ncu --page raw export)")
    return trace
