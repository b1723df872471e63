"""Nsight Systems SQLite export reader -> Trace.

Opens the file strictly read-only (``mode=ro&immutable=1``: no journal, no lock, nothing
created beside it), introspects which tables and columns this export schema has (2.9 ...
3.25 seen), and reads only the columns the metrics need. Bulk reads go through the ADBC
SQLite driver into Arrow when it is installed (several times faster than sqlite3 fetchall),
with plain sqlite3 as the fallback.
"""

from __future__ import annotations

import functools
import os
import re
import sqlite3
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing, suppress
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from advisor.data import names_in
from advisor.errors import AdvisorInputError
from advisor.memory import release_freed_memory
from advisor.trace import sqlearly
from advisor.trace.gpus import (
    FACT_LIMITS,
    builtin_fact,
    device_index,
    fact,
    match_gpu,
    reserved_shared_mem,
)
from advisor.trace.model import GpuSpec, Trace, empty_table
from advisor.trace.nsys_schema import (
    KERNEL,
    KERNEL_FLOAT32,
    KERNEL_INT32,
    KERNEL_OPTIONAL,
    READ_THREADS,
    kernel_columns,
)
from advisor.trace.slices import SliceColumns
from advisor.trace.sqllayout import present_columns, ro_uri, rowid_bounds
from advisor.trace.sqlscan import fits_int32, read_columns, rowids_fit

SQLITE_MAGIC = b"SQLite format 3\x00"
RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
MEMCPY = "CUPTI_ACTIVITY_KIND_MEMCPY"
MEMSET = "CUPTI_ACTIVITY_KIND_MEMSET"
SYNC = "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"
GRAPH = "CUPTI_ACTIVITY_KIND_GRAPH_TRACE"
NVTX = "NVTX_EVENTS"
META_TABLES = ("META_DATA_EXPORT", "EXPORT_META_DATA")

MEMCPY_KINDS = {
    0: "Unknown",
    1: "HtoD",
    2: "DtoH",
    3: "HtoA",
    4: "AtoH",
    5: "AtoA",
    6: "AtoD",
    7: "DtoA",
    8: "DtoD",
    9: "HtoH",
    10: "PtoP",
    11: "UVM HtoD",
    12: "UVM DtoH",
    13: "UVM DtoD",
}
SYNC_KINDS = {
    0: "unknown",
    1: "event synchronize",
    2: "stream wait event",
    3: "stream synchronize",
    4: "context synchronize",
}
NVTX_RANGE_TYPES = (59, 60)  # NvtxPushPopRange, NvtxStartEndRange
NVTX_DOMAIN_CREATE = 75
_VERSION_SUFFIX = re.compile(r"_v\d+$")
SLICE_MIN_ROWS = 200_000
SLICE_ROWS = 1_000_000
BATCH_ROWS = 65_536  # rows per Arrow batch of a sliced read
_BATCH_OPTION = "adbc.sqlite.query.batch_rows"
# Arrow buffers come from the C allocator, so memory freed after conversion is reused by
# numpy (Arrow's default mimalloc pool keeps it to itself: a higher peak, docs/scaling.md).
_POOL = pa.system_memory_pool()


# What the ADBC driver raises where it cannot run or type a query, besides its own DB-API errors:
# OSError from its Arrow stream (a column whose SQLite values change type), Arrow's conversion
# errors and its "unknown error" (ArrowException itself: a page the driver cannot decode in a
# damaged file). The readers then read with sqlite3 (which names the damage); anything else (a
# bug) is raised, and so is Arrow's MemoryError (driver_failed), not turned into a second read
# of the whole table.
ARROW_ERRORS = (OSError, pa.ArrowException)


def driver_failed(exc: BaseException) -> bool:
    """Whether ``exc``, one of the driver's errors (adbc_sqlite), means "read this with
    sqlite3 instead"; False for running out of memory (raised as it is)."""
    return not isinstance(exc, MemoryError)


@functools.cache
def adbc_sqlite():
    """(the ADBC SQLite driver's DB-API module, the errors it raises where it cannot do a
    query: adbc_driver_manager.Error and ARROW_ERRORS), or (None, ()) when not installed."""
    try:
        import adbc_driver_sqlite.dbapi as adbc
    except ImportError:
        return None, ()
    return adbc, (adbc.Error, *ARROW_ERRORS)


def looks_like_sqlite(path: Path) -> bool:
    """True when the file starts with the SQLite 3 header."""
    with open(path, "rb") as fh:
        return fh.read(16) == SQLITE_MAGIC


def expected_kernels(path: Path) -> int:
    """About how many kernels the export holds, without reading them: its kernel table's
    largest rowid (one b-tree descent). 0 where the file has no such table or cannot say."""
    try:
        with closing(sqlite3.connect(ro_uri(path), uri=True)) as conn:
            row = conn.execute(f"SELECT max(rowid) FROM {KERNEL}").fetchone()
    except SQLITE_ERRORS:
        return 0
    return int(row[0]) if row and isinstance(row[0], int) and row[0] > 0 else 0


class _Reader:
    """Schema-aware column selection plus bulk reads for one open export."""

    def __init__(
        self, path: Path, threads: int = READ_THREADS, strings: pd.Series | None = None
    ) -> None:
        """``threads``: connections a table scan may use at once; ``strings``: the export's
        StringIds table when another reader of the same export has loaded it already."""
        self.path = path
        self.threads = threads
        self.conn = sqlite3.connect(ro_uri(path), uri=True)
        self.conn.text_factory = sqlite_text  # (text that is not UTF-8: a damaged export)
        self.columns: dict[str, set[str]] = {}  # table -> its columns, in one query
        for table, column in self.conn.execute(
            "SELECT m.name, p.name FROM sqlite_master m, pragma_table_info(m.name) p "
            "WHERE m.type = 'table'"
        ):
            self.columns.setdefault(table, set()).add(column)
        self._adbc = None
        self._strings = strings
        adbc, self._errors = adbc_sqlite()
        if adbc is not None:
            try:
                self._adbc = adbc.connect(ro_uri(path))
                self._connect = lambda: adbc.connect(ro_uri(path))
            except self._errors as exc:  # the driver cannot open it: sqlite3 throughout
                if not driver_failed(exc):
                    raise
                self._adbc = None

    def close(self) -> None:
        if self._adbc is not None:
            self._adbc.close()
        self.conn.close()

    def has(self, table: str) -> bool:
        return table in self.columns

    def col(self, table: str, column: str, alias: str, prefix: str = "t") -> str:
        """``prefix.column AS alias`` when the column exists, else ``NULL AS alias``."""
        if column in self.columns.get(table, ()):
            return f"{prefix}.{column} AS {alias}"
        return f"NULL AS {alias}"

    def string_table(self) -> pd.Series:
        """The export's StringIds as a Series id -> text (loaded once; an id given twice, in
        a damaged export, names its first text)."""
        if self._strings is None:
            table = self.frame("SELECT id AS id, value AS value FROM StringIds")  # (any case)
            values = table["value"].to_numpy(object)
            if table["value"].dtype == object:  # (read by sqlite3: blobs, numbers among them?)
                values = np.array([sqlite_text(v) if isinstance(v, bytes) else v if v is None
                                   or isinstance(v, str) else str(v) for v in values],
                                  dtype=object)  # fmt: skip
            strings = pd.Series(values, index=table["id"])
            self._strings = strings[~strings.index.duplicated()]
        return self._strings

    def string_ids(self, categories: tuple[str, ...], strip: re.Pattern) -> list[int]:
        """Ids of the StringIds values (``strip`` removed) matching classify.yaml categories."""
        table = self.string_table()
        values = table.astype(str).str.replace(strip, "", regex=True)
        hit = np.logical_or.reduce(names_in(values, *categories))
        ids = pd.to_numeric(pd.Series(table.index[hit]), errors="coerce")
        return [int(i) for i in ids if np.isfinite(i) and i == int(i)]  # (text ids: left out)

    def strings(self, ids: pd.Series, missing, strip: re.Pattern | None = None) -> pd.Series:
        """StringIds values for an id column as a categorical Series (``strip`` removed from
        each value; ``missing`` where the id is NULL or unknown, NaN when ``missing`` is
        None). Each distinct id is looked up once; rows hold small integer codes."""
        strings = self.string_table()
        codes, uniq = pd.factorize(_numeric(ids), use_na_sentinel=True)
        values = strings.reindex(uniq).to_numpy(object)
        if strip is not None:
            values = np.array([strip.sub("", v) if isinstance(v, str) else v for v in values],
                              dtype=object)  # fmt: skip
        values = np.append(values, np.array([missing], dtype=object))  # code -1 -> missing
        values = np.where(pd.isna(values), missing, values)
        # several ids may hold one text (version suffixes stripped): one category per text
        text_codes, texts = pd.factorize(values, use_na_sentinel=True)
        row_codes = text_codes[codes]  # codes == -1 picks the appended ``missing``
        cat = pd.Categorical.from_codes(row_codes, categories=pd.Index(texts, dtype=object))
        return pd.Series(cat, index=ids.index)

    def frame(self, sql: str) -> pd.DataFrame:
        """Run one query into a DataFrame (ADBC/Arrow when possible)."""
        table = self._arrow(sql)
        if table is not None:
            # columns are released as they convert: no second copy of the table
            return table.to_pandas(self_destruct=True, split_blocks=True, memory_pool=_POOL)
        cur = self.conn.execute(sql)
        names = [d[0] for d in cur.description]
        return pd.DataFrame.from_records(cur.fetchall(), columns=names)

    def _arrow(self, sql: str) -> pa.Table | None:
        """One query into an Arrow table; None when the driver cannot type the result, or
        it holds text that is not UTF-8 (a damaged export; pandas would fail on it later), or
        without the driver (sqlite3 reads it)."""
        if self._adbc is None:
            return None
        try:
            with closing(self._adbc.cursor()) as cur:
                cur.execute(sql)
                table = cur.fetch_arrow_table()
            if any(
                pa.types.is_string(t) or pa.types.is_large_string(t) for t in table.schema.types
            ):
                table.validate(full=True)  # (UTF-8 checked, at memory speed)
            return table
        except self._errors as exc:  # type inference over mixed SQLite types: fall back
            if not driver_failed(exc):
                raise
            return None

    def scan(
        self,
        table: str,
        columns: dict[str, str],
        where_in: tuple[str, list[int]] | None = None,
        int32=(),
        float32=(),
        optional=(),
    ) -> pd.DataFrame:
        """``SELECT column AS alias, ... FROM table t [WHERE column IN (ids)]`` in rowid
        order (``columns``: alias -> column; an ``optional`` one the table lacks reads as
        NULL, any other is an error). The table is read from its pages by the compiled
        scanner (trace/sqlscan.py) where its layout allows; else a large one as slices of
        about SLICE_ROWS rows by ``threads`` connections at once (SQLite decodes rows on
        several cores), each slice streamed in BATCH_ROWS-row Arrow batches copied once into
        the numpy columns (trace.slices: preallocated for the whole table, or per slice when
        filtered). ``int32``/``float32`` columns are narrowed where the values fit; the table
        is held once either way. Small tables, no ADBC driver, or a slice the driver cannot
        type: one plain ``frame`` query."""
        present = present_columns(columns, self.columns.get(table, set()), optional)
        select = ", ".join(f"t.{c} AS {a}" if c else f"NULL AS {a}" for a, c in present.items())
        sql = f"SELECT {select} FROM {table} t"
        where = ""
        if where_in is not None:
            ids = where_in[1]
            where = f"t.{where_in[0]} IN ({','.join(map(str, ids))})" if ids else "0"
        rowids = rowid_bounds(self.conn, table)
        threads = min(self.threads, os.cpu_count() or 1)

        def whole() -> pd.DataFrame:
            df = self.frame(f"{sql} WHERE {where}" if where else sql)
            _narrow(df, int32, float32)
            return df

        if rowids is None:
            return whole()
        lo, hi = rowids
        scanned = read_columns(self.path, self.conn, table, present, rowids, where_in,
                               threads, int32, float32)  # fmt: skip
        if scanned is not None:
            return scanned
        if self._adbc is None or threads < 2 or hi - lo < SLICE_MIN_ROWS:
            return whole()
        if not rowids_fit(self.path, lo, hi):  # (slices per rowid span: holes make it vast)
            return whole()
        slices = max(threads, -(-(hi - lo + 1) // SLICE_ROWS))
        edges = np.linspace(lo, hi + 1, slices + 1).astype(np.int64)
        cond = f"({where}) AND " if where else ""
        queries = [f"{sql} WHERE {cond}t.rowid >= {a} AND t.rowid < {b}"
                   for a, b in zip(edges[:-1], edges[1:], strict=True)]  # fmt: skip

        sink = SliceColumns(hi + 1 - lo, int32, float32, filtered=bool(where))

        def read(query: str, offset: int) -> bool:
            """Stream one slice batch by batch into the sink (a thread holds one batch,
            not its whole slice); False where the driver cannot type a batch (mixed SQLite
            types) or a column holds text."""
            try:
                with closing(self._connect()) as conn, closing(conn.cursor()) as cur:
                    with suppress(*self._errors):  # (a driver without the option: its default)
                        cur.adbc_statement.set_options(**{_BATCH_OPTION: str(BATCH_ROWS)})
                    cur.execute(query)
                    for batch in cur.fetch_record_batch():
                        if batch.num_rows == 0:
                            continue
                        if not sink.put(offset, pa.Table.from_batches([batch])):
                            return False
                        offset += batch.num_rows
                return True
            except self._errors as exc:
                if not driver_failed(exc):
                    raise
                return False

        with ThreadPoolExecutor(threads) as pool:
            done = list(pool.map(read, queries, (int(a - lo) for a in edges[:-1])))
        if not all(done) or sink.names is None:  # (untypable, text, or no row at all)
            return whole()
        return sink.frame()


# What SQLite raises on a damaged file: its own errors, and UnicodeDecodeError where sqlite3
# cannot decode the message SQLite wrote (it quotes a damaged schema's bytes)
SQLITE_ERRORS = (sqlite3.Error, UnicodeDecodeError)


def sqlite_problem(exc: Exception) -> str:
    """One of SQLITE_ERRORS in words."""
    if isinstance(exc, UnicodeDecodeError):
        return "its schema is damaged (SQLite's message about it is not even text)"
    return str(exc)


def utf8_checked(table: pa.Table) -> pa.Table:
    """``table`` once its text columns are checked to be UTF-8 (ArrowInvalid where not: a
    damaged database, read with sqlite3 instead; pandas would fail on it later)."""
    if any(pa.types.is_string(t) or pa.types.is_large_string(t) for t in table.schema.types):
        table.validate(full=True)  # (at memory speed)
    return table


def sqlite_text(raw: bytes) -> str:
    """SQLite text as str (sqlite3's text_factory): bytes that are not UTF-8 replaced."""
    return raw.decode("utf-8", "replace")


def _numeric(values: pd.Series) -> pd.Series:
    """``values`` as numbers: numeric columns as they are (no copy), others coerced (text
    and NULL -> NaN)."""
    if pd.api.types.is_numeric_dtype(values):
        return values
    return pd.to_numeric(values, errors="coerce")


def _pid(global_id: pd.Series) -> pd.Series:
    """Process id packed in an nsys globalTid/globalPid: (id >> 24) & 0xFFFFFF."""
    ids = global_id.to_numpy()
    if ids.dtype.kind != "i":  # NULLs, text or infinite reals: missing ids count as 0
        v = _numeric(global_id).to_numpy(np.float64)
        ids = np.where(np.abs(v) < 2**63, v, 0).astype(np.int64)  # (NaN fails the test too)
    return pd.Series(((ids >> 24) & 0xFFFFFF).astype(np.int32), index=global_id.index)


def _producer(r: _Reader) -> tuple[str, str]:
    for table in META_TABLES:
        if r.has(table):
            rows = dict(r.conn.execute(f"SELECT name, value FROM {table}").fetchall())
            return (
                rows.get("EXPORT_PRODUCT_VERSION", "unknown"),
                rows.get("EXPORT_SCHEMA_VERSION", "unknown"),
            )
    return "unknown", "unknown"


_API_COLUMNS = {"start": "start", "end": "end", "name_id": "nameId", "tid": "globalTid",
                "correlation": "correlationId"}  # fmt: skip


def _narrow(df: pd.DataFrame, int32=(), float32=()) -> None:
    """Store the listed columns as int32/float32 in place (values that do not fit stay
    int64/float64, so nothing is truncated)."""
    for col in int32:
        if col in df and df[col].dtype.kind in "iu" and fits_int32(df[col].to_numpy()):
            df[col] = df[col].astype("int32")
    for col in float32:
        if col in df:
            df[col] = _numeric(df[col]).astype("float32")


def _read_kernels(r: _Reader, lean: bool) -> pd.DataFrame:
    k = r.scan(KERNEL, kernel_columns(lean), int32=KERNEL_INT32, float32=KERNEL_FLOAT32,
               optional=KERNEL_OPTIONAL)  # fmt: skip
    sqlearly.release()  # (a scan started early and not taken: not held for nothing)
    k["pid"] = _pid(k.pop("global_pid"))
    k["graph_node"] = _numeric(k["graph_node"]).astype("float64")
    name_id = k.pop("name_id")
    k["name"] = r.strings(name_id, "<unknown>")
    # a kernel without a demangled name is known by its short name
    k["demangled"] = r.strings(k.pop("demangled_id").fillna(name_id), "<unknown>")
    return k


def _read_api(r: _Reader) -> pd.DataFrame:
    if not r.has(RUNTIME):
        return pd.DataFrame(columns=["start", "end", "name", "tid", "pid", "correlation"])
    # only the calls the metrics use: launches, blocking calls, event waits, the set-up calls
    # that name what the host was doing (metrics/attribution.py)
    wanted = r.string_ids(("launch_api", "sync_api", "startup_api", "event_wait_api",
                           "module_load_api"), strip=_VERSION_SUFFIX)  # fmt: skip
    api = r.scan(RUNTIME, _API_COLUMNS, ("nameId", wanted), int32=("name_id",))
    api["name"] = r.strings(api.pop("name_id"), "", strip=_VERSION_SUFFIX)
    api["pid"] = _pid(api["tid"])
    return api


def _read_host_beside(path: Path, strings: pd.Series, threads: int) -> tuple:
    """(_read_api, _read_nvtx, _read_copies_and_syncs) through a reader of its own
    (connections serve one thread), given the export's string table."""
    side = _Reader(path, threads=threads, strings=strings)
    try:
        return _read_api(side), _read_nvtx(side), _read_copies_and_syncs(side)
    finally:
        side.close()


def _read_device_table(r: _Reader, table: str, extra: str) -> pd.DataFrame | None:
    if not r.has(table):
        return None
    df = r.frame(
        f"""SELECT t.deviceId AS device, t.streamId AS stream, t.start AS start, t.end AS end,
                   {r.col(table, "correlationId", "correlation")},
                   {r.col(table, "globalPid", "global_pid")}, {extra}
            FROM {table} t"""
    )
    df["pid"] = _pid(df.pop("global_pid"))
    return df


# CUPTI memory kinds of copy endpoints as nsys numbers them (ENUM_CUDA_MEM_KIND of 2022-2025
# exports); an export's own enum table takes precedence
MEMORY_KINDS = {0: "pageable", 1: "pinned", 2: "device", 3: "array", 4: "managed",
                5: "device static", 6: "managed static", 7: "unknown"}  # fmt: skip


def _memory_kinds(r: _Reader) -> dict[int, str]:
    """Memory-kind id -> lower-case name, from the export's ENUM_CUDA_MEM_KIND if present."""
    if not {"id", "label"} <= r.columns.get("ENUM_CUDA_MEM_KIND", set()):
        return MEMORY_KINDS
    table = r.frame("SELECT id, label FROM ENUM_CUDA_MEM_KIND")
    ids = _numeric(table["id"]).to_numpy(np.float64)  # (a damaged id: text, NULL, a blob)
    ok = np.isfinite(ids) & (ids == np.floor(ids))
    return {
        int(i): str(label).lower()
        for i, label in zip(ids[ok], table["label"].to_numpy(object)[ok], strict=True)
    }


def _read_nvtx(r: _Reader) -> pd.DataFrame | None:
    if not r.has(NVTX):
        return None
    text = "COALESCE(t.text, s.value)" if "textId" in r.columns[NVTX] else "t.text"
    join = "LEFT JOIN StringIds s ON s.id = t.textId" if "textId" in r.columns[NVTX] else ""
    dom = r.col(NVTX, "domainId", "domain_id")
    types = ",".join(str(x) for x in (*NVTX_RANGE_TYPES, NVTX_DOMAIN_CREATE))
    ev = r.frame(
        f"""SELECT t.start AS start, t.end AS end, t.eventType AS type, {text} AS text,
                   t.globalTid AS tid, {dom}
            FROM {NVTX} t {join} WHERE t.eventType IN ({types})"""
    )
    for col in ("start", "end", "type", "tid", "domain_id"):  # (text or blobs: missing)
        ev[col] = _numeric(ev[col])
    ev["pid"] = _pid(ev["tid"])
    # Domain ids are per process: name each (pid, domainId) by its NvtxDomainCreate event.
    domains = (
        ev.loc[ev["type"] == NVTX_DOMAIN_CREATE, ["pid", "domain_id", "text"]]
        .drop_duplicates(["pid", "domain_id"])
        .rename(columns={"text": "domain"})
    )
    ranges = ev[ev["type"].isin(NVTX_RANGE_TYPES) & ev["end"].notna()
                & (ev["end"].abs() < 2**63)]  # fmt: skip
    ranges = ranges.merge(domains, on=["pid", "domain_id"], how="left")
    ranges["end"] = ranges["end"].astype("int64")
    ranges["text"] = ranges["text"].fillna("").astype(str)
    ranges["domain"] = ranges["domain"].fillna("").astype(str)
    return ranges[["start", "end", "text", "tid", "pid", "domain"]].reset_index(drop=True)


# TARGET_INFO_GPU's facts read, with the largest value each can hold (gpus.FACT_LIMITS)
_GPU_FACTS = {"smCount": FACT_LIMITS["sm_count"], "threadsPerWarp": FACT_LIMITS["warp_size"],
              "maxWarpsPerSm": FACT_LIMITS["warps"], "maxBlocksPerSm": FACT_LIMITS["blocks"],
              "maxRegistersPerSm": FACT_LIMITS["registers"],
              "maxShmemPerSm": FACT_LIMITS["shared_mem"],
              "maxShmemPerBlockOptin": FACT_LIMITS["shared_mem"],
              "clockRate": FACT_LIMITS["clock_hz"],
              "memoryBandwidth": FACT_LIMITS["bandwidth_bs"]}  # fmt: skip


def _absent(value) -> bool:
    """A fact the export leaves out: NULL (NaN once read), 0 or empty text."""
    return (
        value is None
        or (isinstance(value, float) and np.isnan(value))
        or (isinstance(value, int | float | str) and value in (0, ""))
    )


def _gpus(r: _Reader) -> tuple[dict[int, GpuSpec], list[str]]:
    """GpuSpec per TARGET_INFO_GPU.id; the built-in table fills facts the export lacks."""
    notes: list[str] = []
    if not r.has("TARGET_INFO_GPU"):
        return {}, notes
    rows = r.frame("SELECT * FROM TARGET_INFO_GPU").to_dict("records")
    specs: dict[int, GpuSpec] = {}
    limit = FACT_LIMITS
    for row in rows:
        name = str(row.get("name") or "unknown GPU")
        gpu_id = device_index(row.get("id"))
        if gpu_id is None:  # (a damaged row: no device it could describe)
            notes.append(f"a TARGET_INFO_GPU row ({name}) has no usable id: its facts are unused")
            continue
        base = match_gpu(name)
        damaged = [k for k in _GPU_FACTS if not _absent(row.get(k))
                   and fact(row.get(k), _GPU_FACTS[k]) is None]  # fmt: skip
        if damaged:
            notes.append(f"GPU {gpu_id} ({name}): TARGET_INFO_GPU {', '.join(damaged)} cannot "
                         "be GPU facts (a damaged export): used as if absent")  # fmt: skip
        sms = int(fact(row.get("smCount"), limit["sm_count"]) or 0)
        if not sms and base:
            sms = base.sm_count
            notes.append(f"GPU {gpu_id} ({name}) reports no SM count: the built-in "
                         f"table's {sms} for {base.name} is used")  # fmt: skip
        if not sms:
            notes.append(f"GPU {gpu_id} ({name}) reports no SM count")
            continue
        major = device_index(row.get("computeMajor"))
        minor = device_index(row.get("computeMinor"))
        cc = f"{major}.{minor}" if major is not None and major < 100 and minor is not None \
            and minor < 100 else None  # fmt: skip
        cc = cc or (base.compute_capability if base else "0.0")

        def pick(key: str, fact_name: str, row=row, base=base) -> int:
            """The row's value, else the built-in entry's, else the fallback (gpus.yaml)."""
            value = fact(row.get(key), _GPU_FACTS[key])
            return int(value) if value else int(builtin_fact(base, fact_name))

        clock = fact(row.get("clockRate"), limit["clock_hz"])
        bandwidth = fact(row.get("memoryBandwidth"), limit["bandwidth_bs"])
        specs[gpu_id] = GpuSpec(
            name=name,
            vendor="nvidia",
            sm_count=sms,
            compute_capability=cc,
            warp_size=pick("threadsPerWarp", "warp_size"),
            max_warps_per_sm=pick("maxWarpsPerSm", "max_warps_per_sm"),
            max_blocks_per_sm=pick("maxBlocksPerSm", "max_blocks_per_sm"),
            registers_per_sm=pick("maxRegistersPerSm", "registers_per_sm"),
            shared_mem_per_sm=pick("maxShmemPerSm", "shared_mem_per_sm"),
            max_shared_mem_per_block=pick("maxShmemPerBlockOptin", "max_shared_mem_per_block"),
            reserved_shared_mem_per_block=reserved_shared_mem("nvidia", cc),
            clock_mhz=clock / 1e6 if clock else None,
            memory_bandwidth_gbs=bandwidth / 1e9 if bandwidth else None,
            dense_fp16_tflops=base.dense_fp16_tflops if base else None,
            source="trace (TARGET_INFO_GPU)",
        )
    return specs, notes


# profiler diagnostics that mean GPU/API/NVTX events are missing from the trace
_LOSS = re.compile(r"drop|lost|discard|overflow|buffer.*full|not all|missing|incomplete", re.I)


def _diagnostics(r: _Reader) -> list[str]:
    """The profiler's own warnings and errors (DIAGNOSTIC_EVENT, severity >= warning) that
    say events were lost: each distinct text once, at most three, plus a count."""
    if not r.has("DIAGNOSTIC_EVENT") or not {"text", "severity"} <= r.columns["DIAGNOSTIC_EVENT"]:
        return []
    rows = r.conn.execute(
        "SELECT DISTINCT text FROM DIAGNOSTIC_EVENT WHERE severity >= 2 AND text IS NOT NULL"
    ).fetchall()
    texts = [" ".join(str(t).split()) for (t,) in rows if _LOSS.search(str(t))]
    out = [f"the profiler reported: {t[:300]!r}: " + (
        "NVTX ranges may be missing, so per-range windows can be incomplete" if "nvtx" in
        t.lower() else "events may be missing, so idle time can be overstated and gaps "
        "misattributed") for t in texts[:3]]  # fmt: skip
    if len(texts) > 3:
        out.append(f"the profiler reported {len(texts) - 3} more such diagnostics")
    return out


def _side_files(path: Path) -> list[str]:
    """Warnings for SQLite files beside the trace that read-only access does not apply: a
    write-ahead log holding changes not merged into the database, or a rollback journal of
    a writer that may still be busy."""
    out = []
    wal = path.with_name(path.name + "-wal")
    if wal.is_file() and wal.stat().st_size > 0:
        out.append(
            f"{wal.name} (a SQLite write-ahead log) lies beside the trace: its changes are not "
            "merged and read-only access ignores them, so data may be missing "
            f"(merge them with: sqlite3 {path.name} 'PRAGMA wal_checkpoint')"
        )
    journal = path.with_name(path.name + "-journal")
    if journal.is_file() and journal.stat().st_size > 0:
        out.append(
            f"{journal.name} lies beside the trace: another program may be writing it; it was "
            "read as it is on disk"
        )
    return out


def _device_map(r: _Reader, specs: dict[int, GpuSpec], devices: list[int]) -> dict[int, GpuSpec]:
    """Map the device ids used by GPU activity to specs (TARGET_INFO_CUDA_DEVICE if needed)."""
    if not specs:
        return {}
    out = {d: specs[d] for d in devices if d in specs}
    missing = [d for d in devices if d not in out]
    if missing and r.has("TARGET_INFO_CUDA_DEVICE"):
        pairs = r.conn.execute("SELECT cudaId, gpuId FROM TARGET_INFO_CUDA_DEVICE").fetchall()
        cuda_to_gpu = {int(c): int(g) for c, g in pairs if g is not None}
        for d in missing:
            if cuda_to_gpu.get(d) in specs:
                out[d] = specs[cuda_to_gpu[d]]
    names = {s.name for s in specs.values()}
    if len(names) == 1:  # one model on the node: every device is that model
        only = next(iter(specs.values()))
        for d in devices:
            out.setdefault(d, only)
    return out


def read_nsys(path: str | Path, threads: int | None = None, lean: bool = False) -> Trace:
    """Read one Nsight Systems SQLite export into a Trace (read-only); ``threads``: the
    connections it may read with at once (default READ_THREADS); ``lean``: for an analysis,
    the kernels without the columns no metric reads (KERNEL_UNREAD_BY_ANALYSIS)."""
    p = Path(path)
    try:
        r = _Reader(p, threads=threads or READ_THREADS)
    except SQLITE_ERRORS as exc:
        raise AdvisorInputError(str(path), f"cannot open as SQLite: {sqlite_problem(exc)}"
                                ) from exc  # fmt: skip
    try:
        trace = _read(r, str(path), lean)
        release_freed_memory()  # the Arrow buffers of the bulk reads
        return trace
    except (sqlite3.DatabaseError, UnicodeDecodeError) as exc:
        raise AdvisorInputError(
            str(path), f"corrupt or unreadable SQLite database: {sqlite_problem(exc)}"
        ) from exc
    finally:
        r.close()


def _read_copies_and_syncs(r: _Reader) -> tuple[pd.DataFrame | None, ...]:
    """(memcpy, memset, sync): the export's copies with their kinds and endpoints' memory,
    its sets, its synchronizations with their kinds (None for a table it lacks)."""
    memcpy = _read_device_table(
        r,
        MEMCPY,
        "t.bytes AS bytes, t.copyKind AS copy_kind, "
        f"{r.col(MEMCPY, 'srcKind', 'src_kind')}, {r.col(MEMCPY, 'dstKind', 'dst_kind')}",
    )
    if memcpy is not None:
        memcpy["kind"] = memcpy.pop("copy_kind").map(MEMCPY_KINDS).fillna("Unknown")
        kinds = _memory_kinds(r)
        for side in ("src", "dst"):
            memcpy[f"{side}_memory"] = memcpy.pop(f"{side}_kind").map(kinds).fillna("unknown")
    memset = _read_device_table(r, MEMSET, "t.bytes AS bytes")
    sync = _read_device_table(r, SYNC, "t.syncType AS sync_type")
    if sync is not None:
        sync["kind"] = sync.pop("sync_type").map(SYNC_KINDS).fillna("unknown")
    return memcpy, memset, sync


def _session_start(r: _Reader) -> int | None:
    """The session's start, UTC ns since the epoch (the export's timestamps count from it):
    TARGET_INFO_SESSION_START_TIME.utcEpochNs, None where the export lacks it."""
    if not r.has("TARGET_INFO_SESSION_START_TIME"):
        return None
    try:
        row = r.conn.execute("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME").fetchone()
    except SQLITE_ERRORS:
        return None
    return int(row[0]) if row and isinstance(row[0], int) else None


def _read(r: _Reader, path: str, lean: bool) -> Trace:
    if "StringIds" not in r.columns or not any(r.has(t) for t in META_TABLES):
        raise AdvisorInputError(
            path, "SQLite database but not an Nsight Systems export (no StringIds/metadata table)"
        )
    graphs = _read_device_table(r, GRAPH, "t.graphId AS graph_id")
    if not r.has(KERNEL) and graphs is None:
        raise AdvisorInputError(
            path, f"export has no {KERNEL} table: profile with CUDA tracing (nsys -t cuda)"
        )
    with ThreadPoolExecutor(1) as beside:
        # the runtime API, the NVTX ranges and the copies, sets and synchronizations are
        # read beside the kernels (their own connection) when reads may use several cores:
        # both sides decode at once, no core idles between them (at 10M kernels the kernels
        # take about as long as the rest)
        strings = r.string_table()  # (loaded here: a connection serves one thread)
        host = (beside.submit(_read_host_beside, r.path, strings, r.threads)
                if r.threads > 1 else None)  # fmt: skip
        kernels = _read_kernels(r, lean) if r.has(KERNEL) else None
        if (kernels is None or kernels.empty) and (graphs is None or graphs.empty):
            raise AdvisorInputError(path, "export holds no kernels: no GPU work to analyze")
        producer, schema = _producer(r)
        trace = Trace(
            path=path,
            format="nsys-sqlite",
            producer_version=f"Nsight Systems {producer} (export schema {schema})",
            kernels=kernels if kernels is not None else empty_table("kernels"),
        )
        trace.api, nvtx, (memcpy, memset, sync) = (
            host.result() if host is not None
            else (_read_api(r), _read_nvtx(r), _read_copies_and_syncs(r))
        )  # fmt: skip
    trace.epoch_offset_ns = _session_start(r)
    if trace.api.empty:
        trace.warnings.append(
            "no CUDA runtime API launch calls in the export (profile with nsys -t cuda): idle "
            "gaps cannot be attributed to host causes (all 'unattributed') and GPU work cannot "
            "be matched to NVTX ranges"
        )
    if memcpy is not None:
        trace.memcpy = memcpy
    if memset is not None:
        trace.memset = memset
    if graphs is not None:
        trace.graphs = graphs
        if len(graphs):
            trace.warnings.append(
                f"{len(graphs)} CUDA graph launches were traced as whole graphs: the kernels "
                "inside them are invisible, so per-kernel waves/tails do not cover them "
                "(capture with nsys --cuda-graph-trace=node to see them)"
            )
    if sync is not None:
        trace.sync = sync
    if nvtx is not None:
        trace.nvtx = nvtx
    specs, notes = _gpus(r)
    trace.warnings.extend(notes)
    trace.warnings.extend(_diagnostics(r))
    trace.warnings.extend(_side_files(Path(path)))
    trace.gpus = _device_map(r, specs, trace.devices)
    return trace
