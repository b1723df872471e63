"""The Trace's tables built from chunks of decoded events (scanner or msgspec), in the
trace's order; names categorical (a trace repeats a few thousand kernel names millions of
times)."""

from __future__ import annotations

import re
from collections import Counter

import numpy as np
import pandas as pd
from pandas.api.types import union_categoricals

from advisor.trace.kineto.decode import Chunk, decode_events
from advisor.trace.kineto.scan import scan_events, scanner_enabled
from advisor.trace.kineto.schema import EVENTS, TABLE_COLUMNS, TABLES, Event

_COPY = re.compile(r"Memcpy\s+(\w+)(?:\s*\((\w+)\s*->\s*(\w+)\))?", re.IGNORECASE)

Tables = dict[str, pd.DataFrame | None]  # table -> its rows (None: no event of it)


def _concat(parts: list[pd.DataFrame]) -> pd.DataFrame | None:
    """Chunks' (or spans') tables as one; categorical columns stay categorical (their
    categories united) instead of becoming a column of strings."""
    if not parts:
        return None
    out = pd.concat(parts, ignore_index=True)
    for col in parts[0].columns:
        if isinstance(parts[0][col].dtype, pd.CategoricalDtype) and len(parts) > 1:
            out[col] = union_categoricals(
                [x[col] for x in parts], ignore_order=True, sort_categories=True
            )  # (sorted: the same categories however the trace was cut into chunks)
    return out


def _categorical(labels: np.ndarray, codes: np.ndarray) -> pd.Categorical:
    """Rows' names from codes into ``labels`` (distinct) as pandas builds a categorical from
    the strings: the categories are the sorted names present."""
    used = np.flatnonzero(np.bincount(codes, minlength=len(labels)))
    names = labels[used]
    order = np.argsort(names, kind="stable")
    rank = np.zeros(len(labels), dtype=np.int64)
    rank[used[order]] = np.arange(len(order))
    return pd.Categorical.from_codes(rank[codes], categories=pd.Index(names[order].tolist()))


def _device(c: dict[str, np.ndarray]) -> np.ndarray:
    """A GPU event's device: ``args.device``, else its pid (Kineto gives GPU events the
    device as their pid)."""
    return np.where(np.isnan(c["device"]), c["pid"], c["device"])


def _kernel_table(c: dict[str, np.ndarray], names: pd.Categorical) -> pd.DataFrame:
    n = len(names)
    nan = np.full(n, np.nan)
    return pd.DataFrame(
        {
            "device": _device(c),
            "stream": c["stream"], "start": c["start"], "end": c["end"],
            "name": names, "demangled": names,
            "grid_x": c["grid_x"], "grid_y": c["grid_y"], "grid_z": c["grid_z"],
            "block_x": c["block_x"], "block_y": c["block_y"], "block_z": c["block_z"],
            "registers": c["registers"],
            "static_smem": c["smem"],  # Kineto: static + dynamic
            "dynamic_smem": np.zeros(n), "smem_executed": nan,
            "cluster_x": nan, "cluster_y": nan, "cluster_z": nan,
            "correlation": c["correlation"],
            "pid": np.zeros(n),  # the launching process, from the calls (finish.host_pids)
            "graph_node": c["graph_node"],
        },
        copy=False,  # (no block consolidation: a second copy of millions of rows)
    )  # fmt: skip


def _api_table(c: dict[str, np.ndarray], names: pd.Categorical) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "start": c["start"],
            "end": c["end"],
            "name": names,
            "tid": c["tid"],
            "pid": c["pid"],
            "correlation": c["correlation"],
        },
        copy=False,
    )


def _set_table(c: dict[str, np.ndarray]) -> pd.DataFrame:
    """Sets (and the columns copies share): device, stream, times, bytes, correlation."""
    return pd.DataFrame(
        {
            "device": _device(c),
            "stream": c["stream"],
            "start": c["start"],
            "end": c["end"],
            "bytes": c["bytes"],
            "correlation": c["correlation"],
            "pid": np.zeros(len(c["start"])),
        },
        copy=False,
    )


def _copy_table(c: dict[str, np.ndarray], names: pd.Categorical) -> pd.DataFrame:
    """Copies: the memset columns plus the direction and the two sides' memory kinds, read
    from the event name ("Memcpy HtoD (Pageable -> Device)"), once per distinct name."""
    out = _set_table(c)
    parsed = []
    for name in names.categories:
        m = _COPY.search(name)
        parsed.append((
            m.group(1) if m else "Unknown",
            m.group(2).lower() if m and m.group(2) else "unknown",
            m.group(3).lower() if m and m.group(3) else "unknown",
        ))  # fmt: skip
    at = out.columns.get_loc("bytes") + 1
    for i, col in enumerate(("kind", "src_memory", "dst_memory")):
        out.insert(at + i, col, [parsed[code][i] for code in names.codes])
    return out


def _range_table(c: dict[str, np.ndarray], text: list[str]) -> pd.DataFrame:
    """record_function ranges and matrix-multiply ops (with their shapes in the text, in
    emit_nvtx's ``sizes = [...]`` form) as NVTX-like ranges."""
    return pd.DataFrame(
        {
            "start": c["start"],
            "end": c["end"],
            "text": text,
            "tid": c["tid"],
            "pid": c["pid"],
            "domain": [""] * len(text),
        },
        copy=False,
    )


def _op_table(c: dict[str, np.ndarray], names: pd.Categorical) -> pd.DataFrame:
    """CPU ops (start, end, pid, tid, name): what the host threads were doing."""
    return pd.DataFrame({"start": c["start"], "end": c["end"], "pid": c["pid"], "tid": c["tid"],
                         "name": names}, copy=False)  # fmt: skip


_BUILDERS = {"kernels": _kernel_table, "api": _api_table, "memcpy": _copy_table,
             "cpu_ops": _op_table}  # fmt: skip


class Collector:
    """The chunks' columns, in the trace's order, made into the tables once at the end (names
    categorical: a trace repeats a few thousand kernel names millions of times)."""

    def __init__(self) -> None:
        self.pieces: dict[str, list[dict[str, np.ndarray]]] = {t: [] for t in TABLE_COLUMNS}
        self.text: list[str] = []
        self.bad: Counter = Counter()  # (table, field) -> values of the wrong type
        self._code: dict[str, int] = {}  # name -> code, in order of first appearance
        self.scanner = scanner_enabled()

    def add_json(self, buf) -> None:
        """The events of ``buf``, the bytes of one JSON array of events: scanned into columns
        by the compiled scanner where it is built and takes them, else decoded by msgspec
        (the reference: the same columns, or the error)."""
        found = scan_events(buf) if self.scanner else None
        if found is None or found[1] != len(buf):
            self.add(EVENTS.decode(buf))
        else:
            self.append(found[0])

    def add(self, events: list[Event]) -> None:
        """Events decoded by msgspec."""
        self.append(decode_events(events))

    def append(self, chunk: Chunk) -> None:
        code = self._code
        lut = np.fromiter((code.setdefault(x, len(code)) for x in chunk.labels), dtype=np.int64,
                          count=len(chunk.labels))  # fmt: skip
        for table, c in chunk.columns.items():
            self.pieces[table].append({**c, "name": lut[c["name"]]})
        self.text += chunk.text
        self.bad.update(chunk.bad)

    def tables(self) -> Tables:
        labels = np.array(list(self._code), dtype=object)
        out: Tables = {}
        for table, pieces in self.pieces.items():
            if not pieces:
                out[table] = None
                continue
            c = {k: np.concatenate([x[k] for x in pieces]) for k in pieces[0]}
            names = _categorical(labels, c.pop("name"))
            out[table] = (
                _range_table(c, self.text) if table == "nvtx"
                else _set_table(c) if table == "memset"
                else _BUILDERS[table](c, names)
            )  # fmt: skip
            if table == "nvtx" and len(self.text) != len(c["start"]):
                raise RuntimeError("range texts and rows disagree")
        return out


def concat(parts: list[Tables]) -> Tables:
    """The tables of consecutive parts of a trace (spans read by processes) as one."""
    return {name: _concat([t[name] for t in parts if t[name] is not None]) for name in TABLES}
