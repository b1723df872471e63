"""rocprofv3 rocpd SQLite databases (ROCm >= 7.0, ``<host>/<pid>_results.db``) -> Trace,
read-only.

A rocpd database keeps each profiled process's rows in tables named with a uuid suffix
(``rocpd_kernel_dispatch_<uuid>``, one set per process; a merged database holds several) and
tells them apart by their ``guid`` column. rocprofv3 also writes views without the suffix
(``rocpd_kernel_dispatch`` ...); they are used when present, else the suffixed tables are read
as one. Every time is a row of ``rocpd_timestamp`` (ns); every name a row of
``rocpd_string``. Read:

  rocpd_kernel_dispatch   kernels: grid and workgroup sizes (the grid counts work-items:
                          workgroups = ceil(grid / workgroup) per axis), LDS per dispatch,
                          track (agent, queue, stream, pid, tid), event (correlation id)
  rocpd_info_kernel_symbol  kernel names (display_name, as rocpd's own views show them) and
                          register counts (arch + accum VGPRs, SGPRs)
  rocpd_info_agent        GPU facts from the agent's properties (extdata: cu_count,
                          simd_per_cu, max_waves_per_simd, wave_front_size, lds_size_in_kb,
                          gfx_target_version); devices numbered by logical_index, as the
                          rocprofv3 CSV and JSON outputs number them
  rocpd_region            host calls by category: HIP_* and RCCL_API -> API table (launches,
                          synchronizations, joined to GPU work by correlation id);
                          MARKER_CORE_API (roctx ranges) -> ranges
  rocpd_memory_copy       copies: direction from the source/destination agents' types, bytes
  rocpd_pmc_event         hardware counters (rocprofv3 --pmc): one value per dispatch event
  rocpd_info_pmc          and counter (its name), as amd_counters.py reads them into
                          Trace.counters (each dispatch's own launch)

The schema followed is ROCm's rocprofiler-sdk ``rocpd_tables.sql`` / ``rocpd_views.sql``
(schema_version 3). Newer rocprofv3 writes the times inline (``start``/``end`` and
``pid``/``tid``/``agent_id``/``queue_id``/``stream_id`` columns on the dispatch, region and
copy rows, no ``rocpd_timestamp`` or ``rocpd_track``): those are read the same way. Where a
database's correlation ids are all 0, kernels are paired with their launch calls by order on
each thread (the n-th launch call with the n-th dispatch it made), and the trace says so.
"""

from __future__ import annotations

import json
import re
import sqlite3
from contextlib import closing
from pathlib import Path

import numpy as np
import pandas as pd

from advisor.errors import AdvisorInputError
from advisor.trace.amd_counters import Readings, counters_table, derive
from advisor.trace.gpus import agent_spec, device_index
from advisor.trace.model import Trace, empty_table
from advisor.trace.nsys import (
    SQLITE_ERRORS,
    adbc_sqlite,
    driver_failed,
    ro_uri,
    sqlite_problem,
    sqlite_text,
    utf8_checked,
)
from advisor.trace.rocprof import damaged_agents_warning, dispatches_to_kernels

KERNELS = "rocpd_kernel_dispatch"
API_CATEGORY = re.compile(r"^(HIP_|RCCL_API)")  # HIP runtime/compiler API, RCCL API
MARKER_CATEGORY = "MARKER_CORE_API"  # roctxRangePush/Pop, roctxRangeStart/Stop
TABLES = ("rocpd_metadata", "rocpd_string", "rocpd_info_agent", "rocpd_info_kernel_symbol",
          "rocpd_track", "rocpd_timestamp", "rocpd_event", "rocpd_region", KERNELS,
          "rocpd_memory_copy", "rocpd_pmc_event", "rocpd_info_pmc")  # fmt: skip


def _names(conn: sqlite3.Connection) -> dict[str, str]:
    """Table/view name -> type of every object in the database (a name stored as a blob, in
    a damaged schema, names nothing rocpd reads: left out)."""
    rows = conn.execute("SELECT name, type FROM sqlite_master")
    return {name: kind for name, kind in rows if isinstance(name, str)}


def is_rocpd(path: Path) -> bool:
    """True when the SQLite file at ``path`` holds rocpd tables (kernel dispatches or the
    metadata table, with or without a uuid suffix)."""
    try:
        with closing(sqlite3.connect(ro_uri(path), uri=True)) as conn:
            conn.text_factory = sqlite_text  # (a damaged schema's names may not be UTF-8)
            names = _names(conn)
    except SQLITE_ERRORS:
        return False
    return any(n.startswith(("rocpd_kernel_dispatch", "rocpd_metadata")) for n in names)


def _sources(names: dict[str, str]) -> dict[str, str]:
    """FROM expression per rocpd table: its view when rocprofv3 wrote one, else the union of
    its uuid-suffixed tables (a merged database holds one per process)."""
    out = {}
    for base in TABLES:
        if base in names:
            out[base] = f'"{base}"'
            continue
        parts = sorted(n for n, kind in names.items() if kind == "table"
                       and re.fullmatch(re.escape(base) + r"_[0-9A-Za-z_]+", n))  # fmt: skip
        if parts:
            union = " UNION ALL ".join(f'SELECT * FROM "{p}"' for p in parts)
            out[base] = f"({union})"
    return out


def read_rocpd(path: str | Path) -> Trace:
    """Read a rocprofv3 rocpd database (read-only) into a Trace."""
    p = Path(path)
    try:
        with closing(sqlite3.connect(ro_uri(p), uri=True)) as conn:
            conn.text_factory = sqlite_text  # (text that is not UTF-8: a damaged database)
            return _read(conn, p)
    except SQLITE_ERRORS as exc:
        raise AdvisorInputError(
            str(p), f"corrupt or unreadable rocpd database: {sqlite_problem(exc)}"
        ) from exc


def _frame(conn: sqlite3.Connection, sql: str) -> pd.DataFrame:
    """A query's rows (for the small tables: agents, symbols, strings, tracks). Columns are
    named in lower case: SQLite matches a column whatever its case, and names a result
    column as the schema spells it (a damaged schema may say logical_iNdex)."""
    cur = conn.execute(sql)
    cols = [c[0].lower() for c in cur.description]
    return pd.DataFrame.from_records(cur.fetchall(), columns=cols)


def _columns(conn: sqlite3.Connection, p: Path, sql: str) -> pd.DataFrame:
    """A large table's columns, through Arrow (ADBC: no Python object per row) when the
    driver can type them, else through sqlite3."""
    adbc, errors = adbc_sqlite()
    if adbc is None:  # (not installed)
        return _frame(conn, sql)
    try:
        with closing(adbc.connect(ro_uri(p))) as db, closing(db.cursor()) as cur:
            cur.execute(sql)
            table = utf8_checked(cur.fetch_arrow_table())
            return table.rename_columns([c.lower() for c in table.column_names]).to_pandas()
    except errors as exc:  # a column it cannot type (or a page it cannot read): sqlite3
        if not driver_failed(exc):
            raise
        return _frame(conn, sql)


# the dispatch table's numeric columns (as read: aliases of the SELECTs below)
_DISPATCH_NUMBERS = ("dispatch", "kernel_id", "start_id", "end_id", "track_id", "event_id",
                     "grid_x", "grid_y", "grid_z", "wg_x", "wg_y", "wg_z", "lds")  # fmt: skip


def _numbers(d: pd.DataFrame, cols: tuple[str, ...]) -> dict[str, int]:
    """The columns of ``d`` among ``cols`` as numbers, in place (SQLite stores text or a
    blob in any column, and infinite reals: those become missing); returns the count made
    missing per column."""
    lost = {}
    for col in cols:
        if col not in d or d[col].dtype.kind in "iu":
            continue
        values = pd.to_numeric(d[col], errors="coerce")
        values = values.where(~np.isinf(values))  # (inf, or 'inf' as text, is no count)
        if n := int((values.isna() & d[col].notna()).sum()):
            lost[col] = n
        d[col] = values
    return lost


def _number_notes(lost: dict[str, int]) -> list[str]:
    """The warnings for values of the dispatch table that were not numbers."""
    return [f"{n:,} kernel dispatches have a non-numeric {col!r} (a damaged database): "
            "treated as missing" for col, n in lost.items()]  # fmt: skip


def _first_pid(pids: pd.Series) -> int:
    """The process id of the first dispatch that has one (0: none)."""
    for v in pids.dropna():
        if (pid := device_index(v)) is not None:
            return pid
    return 0


def _whole(value) -> int | None:
    """An integer cell as int64 holds it (a whole float too, and the digits of one: the
    driver reads a column that mixes text and integers as text); None for anything else."""
    if isinstance(value, str) and re.fullmatch(r"\s*-?\d{1,19}\s*", value):
        value = int(value)
    if isinstance(value, bool):
        return None
    if isinstance(value, int | np.integer):
        return int(value) if -(2**63) <= value < 2**63 else None
    if isinstance(value, float | np.floating) and np.isfinite(value) and value == int(value):
        return int(value) if -(2**63) < value < 2**63 else None
    return None


class _ById:
    """Rows of a rocpd table looked up by (guid, id): ids are unique per guid (the tables of
    one process), so each guid's ids are sorted once and searched."""

    def __init__(self, table: pd.DataFrame, guid: str | None = None) -> None:
        """``guid``: the one process's, for a table read without its guid column. Rows
        whose id is no integer (a damaged database) cannot be looked up."""
        self.parts = {}
        ids = pd.to_numeric(table["id"], errors="coerce")
        whole = (ids == ids.round()) & (ids.abs() < 2**62)
        table = table[whole].assign(id=ids[whole].astype("int64"))
        groups = [(guid, table)] if "guid" not in table else table.groupby("guid", sort=False)
        for guid, g in groups:
            g = g.sort_values("id", kind="stable")
            self.parts[guid] = (g["id"].to_numpy(np.int64), g)

    def get(self, guids, ids: pd.Series, column: str) -> np.ndarray:
        """``column`` of the rows (guid, id) as numbers; NaN where there is none or it is not
        a number (a damaged database). ``guids``: per row, or one value for all (a database
        of one process)."""
        out = np.full(len(ids), np.nan)
        for rows, values in self._found(guids, ids, column):
            out[rows] = pd.to_numeric(pd.Series(values), errors="coerce").to_numpy(np.float64)
        out[np.isinf(out)] = np.nan  # ('inf' as text: no number a track or event holds)
        return out

    def get_text(self, guids, ids: pd.Series, column: str) -> np.ndarray:
        """``column`` of the rows (guid, id) as text; None where there is none."""
        out = np.full(len(ids), None, dtype=object)
        for rows, values in self._found(guids, ids, column):
            out[rows] = [v if v is None or isinstance(v, str) else str(v) for v in values]
        return out

    def get_int(self, guids, ids: pd.Series, column: str) -> tuple[np.ndarray, np.ndarray]:
        """(int64 values, found) of an integer column: exact at any size (timestamps since
        the epoch pass 2^53 ns, beyond float64's integers); 0 and not found where there is
        none or it is not an integer that int64 holds (a damaged database)."""
        out = np.zeros(len(ids), dtype=np.int64)
        found = np.zeros(len(ids), dtype=bool)
        for rows, values in self._found(guids, ids, column):
            if values.dtype.kind != "i":  # (text, blobs, reals or NULLs among them)
                ints = [_whole(v) for v in values]
                keep = np.array([v is not None for v in ints], dtype=bool)
                rows = rows[keep]
                values = np.array([v for v in ints if v is not None], dtype=np.int64)
            out[rows] = values.astype(np.int64)
            found[rows] = True
        return out, found

    def _found(self, guids, ids: pd.Series, column: str):
        """(row positions, values) of the rows whose (guid, id) is in the table."""
        key = pd.to_numeric(ids, errors="coerce").to_numpy(np.float64)
        one = not isinstance(guids, np.ndarray)
        for guid in [guids] if one else pd.unique(guids):
            usable = ~np.isnan(key) & (np.abs(key) < 2**62)
            rows = np.flatnonzero(usable if one else (guids == guid) & usable)
            if guid not in self.parts or not len(rows) or not len(self.parts[guid][0]):
                continue
            sorted_ids, g = self.parts[guid]
            want = key[rows].astype(np.int64)
            at = np.minimum(np.searchsorted(sorted_ids, want), len(sorted_ids) - 1)
            hit = sorted_ids[at] == want
            yield rows[hit], g[column].to_numpy()[at[hit]]


def _read(conn: sqlite3.Connection, p: Path) -> Trace:
    src = _sources(_names(conn))
    if KERNELS in src and "rocpd_timestamp" not in src and "start" in _cols(conn, src[KERNELS]):
        return _read_inline(conn, p, src)
    needed = (KERNELS, "rocpd_timestamp", "rocpd_track", "rocpd_info_kernel_symbol")
    missing = [t for t in needed if t not in src]
    if missing:
        raise AdvisorInputError(
            str(p), f"rocpd database without {', '.join(missing)}: profile with rocprofv3 "
            "--kernel-trace (or --sys-trace)",
        )  # fmt: skip
    agents = _agents(conn, src)
    # one process (the usual database): its guid is not read for every row of the big tables
    present = [g for (g,) in conn.execute(f"SELECT DISTINCT guid FROM {src['rocpd_track']}")]
    single = len(present) == 1
    one = present[0] if single else None
    g_col = "" if single else "guid, "  # (one process: no text column of millions of rows)
    times = _ById(_columns(conn, p, f"SELECT {g_col}id, value FROM {src['rocpd_timestamp']}"), one)
    tracks = _ById(
        _frame(
            conn,
            f"""SELECT guid, id, agent_id, queue_id,
        COALESCE(stream_id, queue_id) AS stream, pid, tid FROM {src["rocpd_track"]}""",
        )
    )
    events = _events(conn, p, src, g_col, one)
    d = _columns(
        conn, p,
        f"""SELECT {g_col}dispatch_id AS dispatch, kernel_id, start_id, end_id, track_id,
               event_id, grid_size_x AS grid_x, grid_size_y AS grid_y, grid_size_z AS grid_z,
               workgroup_size_x AS wg_x, workgroup_size_y AS wg_y, workgroup_size_z AS wg_z,
               group_segment_size AS lds FROM {src[KERNELS]}""",
    )  # fmt: skip
    damaged = _numbers(d, _DISPATCH_NUMBERS)
    guids = one if single else d["guid"].to_numpy(object)
    if single:
        d["guid"] = one  # (the symbols and agents are looked up by it: one value)
    d["start"], has_start = times.get_int(guids, d["start_id"], "value")
    d["end"], has_end = times.get_int(guids, d["end_id"], "value")
    for col, out in (("agent_id", "agent"), ("queue_id", "queue"), ("stream", "stream"),
                     ("pid", "pid"), ("tid", "tid")):  # fmt: skip
        d[out] = tracks.get(guids, d["track_id"], col)
    d["correlation"] = events.get(guids, d["event_id"], "correlation_id")
    rows = len(d)
    k = d[has_start & has_end & d["tid"].notna().to_numpy()].reset_index(drop=True)
    if k.empty:
        why = " with their timestamps and tracks" if rows else ""
        raise AdvisorInputError(str(p), f"rocpd database: no kernel dispatches{why}")
    symbols = _frame(
        conn,
        f"""SELECT id, guid, kernel_name, display_name, arch_vgpr_count, accum_vgpr_count,
               sgpr_count FROM {src["rocpd_info_kernel_symbol"]}""",
    ).set_index(["guid", "id"])
    key = pd.MultiIndex.from_arrays([k["guid"], k["kernel_id"]])
    sym = symbols[~symbols.index.duplicated()].reindex(key)  # (an id twice: damaged, first)
    names = sym["display_name"].where(sym["display_name"].notna(), sym["kernel_name"])
    k["name"] = pd.Categorical(names.fillna("<unknown>").to_numpy())  # (few distinct)
    for col, out in (("arch_vgpr_count", "arch_vgpr"), ("accum_vgpr_count", "accum_vgpr"),
                     ("sgpr_count", "sgpr")):  # fmt: skip
        k[out] = pd.to_numeric(sym[col], errors="coerce").to_numpy()
    pairs = pd.MultiIndex.from_arrays([k["guid"], k["agent"]])
    device = pd.Series(agents.device, dtype="float64")
    device.index = pd.MultiIndex.from_tuples(device.index) if len(device) else device.index
    k["device"] = device.reindex(pairs).to_numpy() if len(device) else np.nan
    pid = _first_pid(k["pid"])
    version = _schema_version(conn, src)
    k = k.sort_values("start", kind="stable", ignore_index=True)  # (the kernels' order)
    trace = Trace(
        path=str(p), format="rocpd", producer_version=f"rocprofv3 rocpd (schema {version})",
        kernels=dispatches_to_kernels(k, pid),
    )  # fmt: skip
    _counters(conn, p, src, k, trace)
    trace.gpus = agents.specs
    trace.warnings += agents.notes + _number_notes(damaged)
    if rows > len(k):
        trace.warnings.append(
            f"{rows - len(k):,} of {rows:,} kernel dispatches dropped: their timestamp or track "
            "rows are missing (a damaged database); every metric is computed without them"
        )
    regions = _regions(conn, p, src, times, tracks, events, one)
    api = regions[regions["category"].str.match(API_CATEGORY.pattern)]
    if len(api):
        trace.api = _host_rows(api, "name", correlation=api["correlation"].astype("float64"))
    else:
        trace.warnings.append(
            "no HIP API regions in the rocpd database: idle gaps cannot be attributed to host "
            "causes (capture with rocprofv3 --hip-trace or --sys-trace)"
        )
    markers = regions[
        (regions["category"] == MARKER_CATEGORY) & (regions["end"] > regions["start"])
    ]
    if len(markers):
        trace.nvtx = _host_rows(markers, "text", domain="")
    trace.memcpy = _copies(conn, src, agents, pid)
    return trace


def _cols(conn: sqlite3.Connection, source: str) -> set[str]:
    """The column names of a table, view or union (``source``: a FROM expression)."""
    cur = conn.execute(f"SELECT * FROM {source} LIMIT 0")
    return {c[0] for c in cur.description}


def _pick(conn: sqlite3.Connection, source: str, wanted: dict[str, str]) -> str:
    """A SELECT list of ``wanted`` (alias -> column), NULL for the columns ``source`` lacks."""
    have = _cols(conn, source)
    return ", ".join(f'"{col}" AS {alias}' if col in have else f"NULL AS {alias}"
                     for alias, col in wanted.items())  # fmt: skip


def _read_inline(conn: sqlite3.Connection, p: Path, src: dict[str, str]) -> Trace:
    """A database whose rows carry their times and thread inline (newer rocprofv3)."""
    if "rocpd_info_kernel_symbol" not in src:
        raise AdvisorInputError(str(p), "rocpd database without rocpd_info_kernel_symbol: "
                                "profile with rocprofv3 --kernel-trace")  # fmt: skip
    agents = _agents(conn, src)
    cols = {"guid": "guid", "dispatch": "dispatch_id", "kernel_id": "kernel_id",
            "start": "start", "end": "end", "agent": "agent_id", "queue": "queue_id",
            "stream_id": "stream_id", "pid": "pid", "tid": "tid", "event_id": "event_id",
            "grid_x": "grid_size_x", "grid_y": "grid_size_y", "grid_z": "grid_size_z",
            "wg_x": "workgroup_size_x", "wg_y": "workgroup_size_y",
            "wg_z": "workgroup_size_z", "lds": "group_segment_size"}  # fmt: skip
    d = _frame(conn, f"SELECT {_pick(conn, src[KERNELS], cols)} FROM {src[KERNELS]}")
    rows = len(d)
    damaged = _numbers(d, (*_DISPATCH_NUMBERS, "agent", "queue", "stream_id", "pid", "tid"))
    start, end = (pd.Series([_whole(v) for v in d[c]], dtype=object) for c in ("start", "end"))
    d = d.assign(start=start, end=end)[start.notna() & end.notna()].reset_index(drop=True)
    if d.empty:
        raise AdvisorInputError(str(p), "rocpd database: no kernel dispatches with their times")
    d["guid"] = d["guid"].fillna("").astype(str)
    d["stream"] = d["stream_id"].where(d["stream_id"].notna(), d["queue"])
    d["start"] = d["start"].astype(np.int64)
    d["end"] = d["end"].astype(np.int64)
    events = _events(conn, p, src, "guid, " if "guid" in _cols(conn, src.get(
        "rocpd_event", src[KERNELS])) else "", None)  # fmt: skip
    d["correlation"] = events.get(d["guid"].to_numpy(object), d["event_id"], "correlation_id")
    symbols = _frame(
        conn, f"""SELECT {_pick(conn, src["rocpd_info_kernel_symbol"], {
            "id": "id", "guid": "guid", "kernel_name": "kernel_name",
            "display_name": "display_name", "arch_vgpr_count": "arch_vgpr_count",
            "accum_vgpr_count": "accum_vgpr_count", "sgpr_count": "sgpr_count"})}
        FROM {src["rocpd_info_kernel_symbol"]}""",
    )  # fmt: skip
    symbols["guid"] = symbols["guid"].fillna("").astype(str)
    symbols = symbols.set_index(["guid", "id"])
    sym = symbols[~symbols.index.duplicated()].reindex(
        pd.MultiIndex.from_arrays([d["guid"], d["kernel_id"]])
    )
    names = sym["display_name"].where(sym["display_name"].notna(), sym["kernel_name"])
    d["name"] = pd.Categorical(names.fillna("<unknown>").to_numpy())
    for col, out in (("arch_vgpr_count", "arch_vgpr"), ("accum_vgpr_count", "accum_vgpr"),
                     ("sgpr_count", "sgpr")):  # fmt: skip
        d[out] = pd.to_numeric(sym[col], errors="coerce").to_numpy()
    # the dispatch names its agent by node id (the agent row's absolute index) or row id
    by_node = {(g, a): dev for (g, a), dev in agents.by_node.items()}
    d["device"] = [by_node.get((g, a), agents.device.get((g, a), np.nan))
                   for g, a in zip(d["guid"], d["agent"], strict=True)]  # fmt: skip
    pid = _first_pid(d["pid"])
    d = d.sort_values("start", kind="stable", ignore_index=True)  # (the kernels' order)
    trace = Trace(path=str(p), format="rocpd",
                  producer_version=f"rocprofv3 rocpd (schema {_schema_version(conn, src)}, "
                  "inline times)", kernels=dispatches_to_kernels(d, pid))  # fmt: skip
    _counters(conn, p, src, d, trace)
    trace.gpus = agents.specs
    trace.warnings += agents.notes + _number_notes(damaged)
    if rows > len(d):
        trace.warnings.append(f"{rows - len(d):,} of {rows:,} kernel dispatches dropped: "
                              "their times are missing (a damaged database)")  # fmt: skip
    if "rocpd_region" in src and "rocpd_string" in src:
        r = _frame(
            conn,
            f"""SELECT {
                _pick(
                    conn,
                    src["rocpd_region"],
                    {
                        "guid": "guid",
                        "name_id": "name_id",
                        "start": "start",
                        "end": "end",
                        "pid": "pid",
                        "tid": "tid",
                        "event_id": "event_id",
                    },
                )
            } FROM {src["rocpd_region"]}""",
        )
        r["guid"] = r["guid"].fillna("")
        strings = _frame(conn, f"SELECT guid, id, string FROM {src['rocpd_string']}")
        strings["guid"] = strings["guid"].fillna("")
        strings = _ById(strings)
        g = r["guid"].to_numpy(object)
        r["name"] = strings.get_text(g, r["name_id"], "string")
        r["category"] = pd.Series(strings.get_text(g, pd.Series(events.get(g, r["event_id"],
                                  "category_id")), "string")).fillna("").astype(str)  # fmt: skip
        r["correlation"] = events.get(g, r["event_id"], "correlation_id")
        _numbers(r, ("pid", "tid"))
        r["start"], r["end"] = ([_whole(v) for v in r[c]] for c in ("start", "end"))
        r = r[r["start"].notna() & r["end"].notna() & r["name"].notna() & r["pid"].notna()
              & r["tid"].notna()].astype({"start": np.int64, "end": np.int64})  # fmt: skip
        api = r[r["category"].str.match(API_CATEGORY.pattern)]
        if len(api):
            trace.api = _host_rows(api, "name", correlation=api["correlation"].astype("float64"))
        markers = r[(r["category"] == MARKER_CATEGORY) & (r["end"] > r["start"])]
        if len(markers):
            trace.nvtx = _host_rows(markers, "text", domain="")
    if trace.api.empty:
        trace.warnings.append(
            "no HIP API regions in the rocpd database: idle gaps cannot be attributed to host "
            "causes (capture with rocprofv3 --hip-trace or --sys-trace)"
        )
    pair_by_order(trace, d["tid"].to_numpy(np.float64))
    return trace


SERIALIZED = (
    "the database holds hardware counters (rocprofv3 --pmc): rocprofv3 serializes the "
    "dispatches to count them, so its gaps and overlap are not the program's own (trace it "
    "without --pmc for those, and join these counters with --counters)"
)


def _counters(conn: sqlite3.Connection, p: Path, src: dict[str, str], k: pd.DataFrame,
              trace: Trace) -> None:  # fmt: skip
    """Give ``trace`` (in place) the hardware counters of the database's PMC tables: each
    value joined to its dispatch by the dispatch's event (``k``: the dispatches, one per row
    of trace.kernels, with guid and event_id), read by amd_counters.yaml; what names no
    dispatch is counted in a warning."""
    if "rocpd_pmc_event" not in src or "rocpd_info_pmc" not in src:
        return
    e, i = src["rocpd_pmc_event"], src["rocpd_info_pmc"]
    guid = "E.guid" if "guid" in _cols(conn, e) else "''"
    same = "AND I.guid = E.guid" if guid != "''" and "guid" in _cols(conn, i) else ""
    try:
        pmc = _columns(conn, p, f"""SELECT {guid} AS guid, E.event_id AS event_id, I.name AS
                       name, E.value AS value FROM {e} E JOIN {i} I ON I.id = E.pmc_id
                       {same}""")  # fmt: skip
    except SQLITE_ERRORS as exc:  # (damaged counter tables: the timeline is still read)
        trace.warnings.append(f"the hardware counter tables (rocpd_pmc_event, rocpd_info_pmc) "
                              f"cannot be read ({sqlite_problem(exc)}): no counters")  # fmt: skip
        return
    if pmc.empty:
        return
    _numbers(pmc, ("event_id", "value"))
    keys = pd.DataFrame({"guid": k["guid"].fillna("").astype(str).to_numpy(),
                         "event_id": pd.to_numeric(k["event_id"], errors="coerce").to_numpy(),
                         "row": np.arange(len(k))})  # fmt: skip
    pmc["guid"] = pmc["guid"].fillna("").astype(str)
    on = ["guid", "event_id"] if (keys["guid"] != "").any() else ["event_id"]
    keys = keys.dropna(subset=["event_id"]).drop_duplicates(on)
    found = pmc.merge(keys[[*on, "row"]], on=on, how="left")
    lost = int(found["row"].isna().sum())
    found = found[found["row"].notna()]
    if found.empty:
        trace.warnings.append(f"none of the {len(pmc):,} hardware counter values (rocpd_pmc_event) "
                              "names a kernel dispatch of the database: not used")  # fmt: skip
        return
    at = found["row"].to_numpy(np.int64)
    readings = Readings(at, found["name"], found["value"].to_numpy(np.float64), len(k))
    values, notes = derive(readings, p.name)
    rows = np.unique(at)
    kernels = trace.kernels
    own = (kernels["end"] - kernels["start"]).to_numpy(np.float64)[rows]
    trace.counters = counters_table(kernels, {c: v[rows] for c, v in values.items()}, rows, own,
                                    grid_total=False)  # fmt: skip
    if lost:
        notes.append(f"{lost:,} of {len(pmc):,} hardware counter values (rocpd_pmc_event) name "
                     "no kernel dispatch of the database: left out")  # fmt: skip
    trace.warnings += [SERIALIZED, *notes]
    trace.counter_notes += notes
    trace.sources.append(f"{p.name}: hardware counters of {len(rows):,} dispatches (PMC tables)")


def pair_by_order(trace: Trace, tids: np.ndarray) -> None:
    """Where every kernel's correlation id is 0 or missing (newer rocprofv3 databases),
    pair each thread's launch calls with the dispatches it made (``tids``: per kernel row,
    the dispatching thread), in order (the n-th launch call with the n-th dispatch of that
    thread), giving both a correlation id; say so."""
    api = trace.api
    k = trace.kernels.assign(tid=tids)
    corr = pd.to_numeric(k["correlation"], errors="coerce").fillna(0)
    if api.empty or (corr != 0).any():
        return
    launch = api["name"].astype(str).str.contains("Launch", regex=False).to_numpy()
    calls = api[launch].sort_values(["pid", "tid", "start"], kind="stable")
    k_order = k.assign(_row=np.arange(len(k))).sort_values(["pid", "tid", "start"],
                                                            kind="stable")  # fmt: skip
    call_rank = calls.groupby(["pid", "tid"]).cumcount()
    k_rank = k_order.groupby(["pid", "tid"]).cumcount()
    keys_calls = pd.MultiIndex.from_arrays([calls["pid"], calls["tid"], call_rank])
    keys_k = pd.MultiIndex.from_arrays([k_order["pid"], k_order["tid"], k_rank])
    ids = pd.Series(np.arange(1, len(calls) + 1, dtype=np.float64), index=keys_calls)
    paired = ids.reindex(keys_k).to_numpy()
    new_k = np.full(len(k), np.nan)
    new_k[k_order["_row"].to_numpy()] = paired
    trace.kernels["correlation"] = new_k
    api_corr = np.full(len(api), np.nan)
    api_corr[api.index.get_indexer(calls.index)] = ids.to_numpy()
    api["correlation"] = api_corr
    trace.warnings.append(
        f"correlation ids are all 0 in this database: {int(np.isfinite(paired).sum()):,} of "
        f"{len(k):,} kernels paired with their launch calls by order on each thread (the "
        "n-th launch call with the n-th dispatch); a dispatch made without a traced call "
        "shifts the pairing"
    )


def _host_rows(regions: pd.DataFrame, text: str, **extra) -> pd.DataFrame:
    """Host regions as a Trace table: start, end, their name as ``text``, tid, pid, and the
    ``extra`` columns."""
    out = pd.DataFrame(
        {
            "start": regions["start"].to_numpy(),
            "end": regions["end"].to_numpy(),
            text: regions["name"].to_numpy(object),
            "tid": regions["tid"].astype("int64").to_numpy(),
            "pid": regions["pid"].astype("int64").to_numpy(),
        }
    )
    for col, values in extra.items():
        out[col] = values.to_numpy() if isinstance(values, pd.Series) else values
    return out


def _left_event(src: dict[str, str], alias: str) -> str:
    """The LEFT JOIN of a row's event (its correlation id and category), or a stand-in
    with NULLs when the database has no event table."""
    if "rocpd_event" in src:
        return (
            f"LEFT JOIN {src['rocpd_event']} E ON E.id = {alias}.event_id AND E.guid = {alias}.guid"
        )
    return "LEFT JOIN (SELECT NULL AS id, NULL AS correlation_id, NULL AS category_id) E ON 0"


def _schema_version(conn: sqlite3.Connection, src: dict[str, str]) -> str:
    if "rocpd_metadata" not in src:
        return "?"
    row = conn.execute(
        f"SELECT value FROM {src['rocpd_metadata']} WHERE tag = 'schema_version' LIMIT 1"
    ).fetchone()
    return str(row[0]) if row else "?"


class _Agents:
    """Device ids (logical_index) per (guid, agent id), and GPU facts per device."""

    def __init__(self) -> None:
        self.device: dict[tuple, int] = {}
        self.by_node: dict[tuple, int] = {}  # (guid, absolute index) -> device
        self.is_gpu: dict[tuple, bool] = {}
        self.specs: dict = {}
        self.notes: list[str] = []  # (damaged agent rows)


def _agents(conn: sqlite3.Connection, src: dict[str, str]) -> _Agents:
    out = _Agents()
    if "rocpd_info_agent" not in src:
        return out
    rows = _frame(
        conn,
        f"""SELECT id, guid, type, absolute_index, logical_index, type_index, name,
               product_name, extdata FROM {src["rocpd_info_agent"]}""",
    )
    for row in rows.itertuples(index=False):
        # the device: logical index, else absolute index, else row id (None: damaged row)
        device = next((i for i in map(device_index, (row.logical_index, row.absolute_index,
                                                     row.id)) if i is not None), None)  # fmt: skip
        if device is None or _whole(row.id) is None:
            continue
        guid = row.guid if isinstance(row.guid, str) else ""
        out.device[(guid, _whole(row.id))] = device
        if (node := device_index(row.absolute_index)) is not None:
            out.by_node[(guid, node)] = device
        out.is_gpu[(guid, _whole(row.id))] = str(row.type).upper() == "GPU"
        if str(row.type).upper() != "GPU":
            continue
        try:
            facts = json.loads(row.extdata or "{}")
        except (TypeError, ValueError):
            facts = {}
        if not isinstance(facts, dict) or not facts.get("cu_count"):
            continue  # no properties: the built-in table may still know the product name
        name = row.product_name or facts.get("product_name") or row.name or "AMD GPU"
        spec = agent_spec(facts, name, "trace (rocpd agents)")
        if spec is not None:
            out.specs[device] = spec
        else:
            out.notes.append(damaged_agents_warning(1, "rocpd_info_agent"))
    return out


def _events(
    conn: sqlite3.Connection, p: Path, src: dict[str, str], g_col: str, one: str | None
) -> _ById:
    """Events by (guid, id): their correlation id and category string id."""
    if "rocpd_event" not in src:
        return _ById(pd.DataFrame({"guid": [], "id": [], "correlation_id": [],
                                   "category_id": []}))  # fmt: skip
    sql = f"SELECT {g_col}id, correlation_id, category_id FROM {src['rocpd_event']}"
    return _ById(_columns(conn, p, sql), one)


def _regions(
    conn: sqlite3.Connection, p: Path, src: dict[str, str], times: _ById, tracks: _ById,
    events: _ById, guid: str | None,
) -> pd.DataFrame:  # fmt: skip
    """Host regions (API calls, markers): category, name, times, pid/tid, correlation;
    regions whose times or track are missing are left out (as the rocpd views' joins do)."""
    cols = ["category", "name", "start", "end", "pid", "tid", "correlation"]
    if any(t not in src for t in ("rocpd_region", "rocpd_event", "rocpd_string")):
        return pd.DataFrame({c: pd.Series(dtype=object) for c in cols})
    g_col = "" if guid is not None else "guid, "
    r = _columns(conn, p, f"SELECT {g_col}name_id, start_id, end_id, track_id, event_id "
                          f"FROM {src['rocpd_region']}")  # fmt: skip
    strings = _ById(_frame(conn, f"SELECT guid, id, string FROM {src['rocpd_string']}"))
    guids = guid if guid is not None else r["guid"].to_numpy(object)
    start, has_start = times.get_int(guids, r["start_id"], "value")
    end, has_end = times.get_int(guids, r["end_id"], "value")
    out = pd.DataFrame({
        "category": strings.get_text(
            guids, pd.Series(events.get(guids, r["event_id"], "category_id")), "string"),
        "name": strings.get_text(guids, r["name_id"], "string"),
        "start": start, "end": end, "timed": has_start & has_end,
        "pid": tracks.get(guids, r["track_id"], "pid"),
        "tid": tracks.get(guids, r["track_id"], "tid"),
        "correlation": events.get(guids, r["event_id"], "correlation_id"),
    })  # fmt: skip
    keep = out.pop("timed") & out["tid"].notna() & out["pid"].notna() & out["name"].notna()
    out = out[keep].reset_index(drop=True)
    out["category"] = out["category"].fillna("").astype(str)
    return out


_AGENT_KINDS = {(False, True): "HtoD", (True, False): "DtoH", (True, True): "DtoD",
                (False, False): "HtoH"}  # fmt: skip


def _copies(conn: sqlite3.Connection, src: dict[str, str], agents: _Agents, pid: int):
    """Memory copies: the device is the GPU end (the destination when both are GPUs),
    direction from the two agents' types; copies between two GPUs are PtoP."""
    if "rocpd_memory_copy" not in src:
        return empty_table("memcpy")
    m = _frame(
        conn,
        f"""SELECT M.guid AS guid, DS.value AS start, DE.value AS "end", M.size AS bytes,
               M.src_agent_id AS src, M.dst_agent_id AS dst, T.stream_id AS stream,
               T.pid AS pid, E.correlation_id AS correlation
        FROM {src["rocpd_memory_copy"]} M
        JOIN {src["rocpd_timestamp"]} DS ON DS.id = M.start_id AND DS.guid = M.guid
        JOIN {src["rocpd_timestamp"]} DE ON DE.id = M.end_id AND DE.guid = M.guid
        JOIN {src["rocpd_track"]} T ON T.id = M.track_id AND T.guid = M.guid
        {_left_event(src, "M")}""",
    )
    if m.empty:
        return empty_table("memcpy")
    _numbers(m, ("stream", "bytes", "pid", "correlation"))  # (text in them: missing)
    src_key = list(zip(m["guid"], m["src"], strict=True))
    dst_key = list(zip(m["guid"], m["dst"], strict=True))
    src_gpu = np.array([agents.is_gpu.get(a, False) for a in src_key])
    dst_gpu = np.array([agents.is_gpu.get(a, False) for a in dst_key])
    src_dev = np.array([agents.device.get(a, -1) for a in src_key], dtype="int64")
    dst_dev = np.array([agents.device.get(a, -1) for a in dst_key], dtype="int64")
    pair_kind = [_AGENT_KINDS[(s, d)] for s, d in zip(src_gpu, dst_gpu, strict=True)]
    kind = np.where(src_gpu & dst_gpu & (src_dev != dst_dev), "PtoP", pair_kind)
    return pd.DataFrame(
        {
            "device": np.where(dst_gpu, dst_dev, src_dev),
            "stream": m["stream"].fillna(-1).astype("int64").to_numpy(),
            "start": m["start"].to_numpy(),
            "end": m["end"].to_numpy(),
            "bytes": m["bytes"].astype("float64").to_numpy(),
            "kind": kind,
            "correlation": m["correlation"].astype("float64").to_numpy(),
            "pid": m["pid"].fillna(pid).astype("int64").to_numpy(),
        }
    )
