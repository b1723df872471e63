"""The range instances of a job of many ranks, kept in files while the job is merged and
read (parts.merged_job; issue 33: the client's memory flat in the number of ranks), not in
the client's memory: a job of 128 ranks has ~380K of them, 0.75 MB a rank as a DataFrame.

Each rank's instances (with the job's device and range ids) are written as fixed-size
records (``RegionFiles.add``: numeric columns as they are, other columns as int32 codes into
the job's values of that column), in (start_ns, device) order. The job's table is the
ranks' rows merged in that order (``parts._ORDERS``; two ranks share no device, so a rank's
rows are one run of consecutive rows in every stretch of the job's): what is held in memory
is the rank each of the job's rows comes from (``order``, 2 bytes a row) and per rank and
device a count and the first start and last end. ``RegionView`` reads the table (or some
columns, some names, one device) back a stretch of rows at a time, in the job's order, each
rank's run read from its file. The files are in the CommStore's folder (removed with it).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

JOB_ORDER = ["start_ns", "device"]  # the order of a job's range instances (parts._ORDERS)
CHUNK_ROWS = 1 << 13  # range instances read back at a time (8K: 2 MB of records)
_NONE = -1  # the code of a missing value in a coded column


class RegionFiles:
    """The files of a job's range instances and what is held of them (module doc), in
    ``folder`` (made here; ``owner`` removes it). ``dtypes``: the job table's column dtypes
    (the ranks' tables concatenated)."""

    def __init__(self, folder: Path, dtypes: pd.Series, owner: object = None) -> None:
        self.folder = folder
        self.owner = owner  # (what removes the folder: kept alive while the files are read)
        folder.mkdir()
        if "comm_wait_ns" not in dtypes:  # (filled by fill_waits, as parts._fill_waits did)
            dtypes = pd.concat([dtypes, pd.Series({"comm_wait_ns": np.dtype(np.float64)})])
        self.dtypes = dtypes
        # a coded column's values, each with its code
        self.coded: dict[str, dict] = {c: {} for c, d in dtypes.items()
                                       if not isinstance(d, np.dtype) or d.kind == "O"}  # fmt: skip
        self.record = np.dtype([(c, np.int32 if c in self.coded else d)
                                for c, d in dtypes.items()])  # fmt: skip
        self.sizes: list[int] = []
        # per rank, then (close) per device of the job: rows, first start_ns, last end_ns
        self.per_device: list[pd.DataFrame] = []
        self.stats = pd.DataFrame(columns=["rows", "start_ns", "end_ns"])
        self._keys: list[tuple[np.ndarray, np.ndarray]] = []
        self.order = np.zeros(0, np.int16)  # (set by close: the rank of each job row)
        self._known: dict[str, np.ndarray] = {}  # (values' cache: a coded column's, as array)

    def path(self, rank: int) -> Path:
        return self.folder / f"rank{rank}.rec"

    def add(self, t: pd.DataFrame) -> None:
        """The next rank's range instances (the job's columns, device and range ids)."""
        t = t.sort_values(JOB_ORDER, ignore_index=True, kind="stable")
        rec = np.zeros(len(t), self.record)
        for c in self.dtypes.index:
            if c not in t:
                continue
            rec[c] = self._codes(c, t[c]) if c in self.coded else t[c].to_numpy(self.record[c])
        rec.tofile(self.path(len(self.sizes)))
        self.sizes.append(len(t))
        self._keys.append((rec["start_ns"].copy(), rec["device"].copy()))
        self.per_device.append(
            pd.DataFrame({"device": rec["device"], "start_ns": rec["start_ns"],
                          "end_ns": rec["end_ns"]})
            .groupby("device").agg(rows=("start_ns", "size"), start_ns=("start_ns", "min"),
                                   end_ns=("end_ns", "max"))
        )  # fmt: skip

    def _codes(self, column: str, values: pd.Series) -> np.ndarray:
        """int32 codes of ``values`` into the job's values of ``column`` (missing: -1)."""
        codes, uniques = pd.factorize(values.to_numpy(object), use_na_sentinel=True)
        known = self.coded[column]
        mapped = np.array([known.setdefault(v, len(known)) for v in uniques], dtype=np.int32)
        return np.where(codes >= 0, mapped[np.maximum(codes, 0)] if len(mapped) else 0, _NONE)

    def close(self) -> None:
        """Every rank added: the job's row order (which rank each row comes from)."""
        starts = np.concatenate([k[0] for k in self._keys]) if self._keys else np.zeros(0)
        devices = np.concatenate([k[1] for k in self._keys]) if self._keys else np.zeros(0)
        ranks = np.repeat(np.arange(len(self.sizes), dtype=np.int32), self.sizes)
        self._keys = []
        dtype = np.int16 if len(self.sizes) < (1 << 15) else np.int32
        self.order = ranks[np.lexsort((devices, starts))].astype(dtype)
        full = [p for p in self.per_device if len(p)]
        if full:
            self.stats = pd.concat(full)
        self.per_device = []

    def __len__(self) -> int:
        return len(self.order)

    def fill_waits(self, window_waits: pd.Series) -> pd.Series:
        """Every instance's comm_wait_ns from ``window_waits`` (summed waits, ns, indexed by
        (range_id, device); 0 where none), written to the files; the sums per (name,
        device) (the range totals' comm_wait_ns)."""
        sums = []
        for rank in range(len(self.sizes)):
            rec = np.fromfile(self.path(rank), self.record)
            rec["comm_wait_ns"] = waits_of_windows(window_waits, rec["range_id"], rec["device"])
            rec.tofile(self.path(rank))
            sums.append(pd.Series(rec["comm_wait_ns"]).groupby(
                [self.values("name", rec["name"]), rec["device"]]).sum())  # fmt: skip
        full = [s for s in sums if len(s)]
        return pd.concat(full) if full else pd.Series(dtype=np.float64)

    def values(self, column: str, codes: np.ndarray) -> np.ndarray:
        """A coded column's values (object; None where missing) for ``codes``."""
        known = self._known.get(column)
        if known is None or len(known) != len(self.coded[column]) + 1:  # (made once a size)
            known = np.empty(len(self.coded[column]) + 1, dtype=object)
            known[: len(known) - 1] = list(self.coded[column])
            self._known[column] = known
        return known[codes]  # (code -1: the None at the end)

    def chunks(self, rows: int = CHUNK_ROWS) -> Iterator[np.ndarray]:
        """The job's rows as records, ``rows`` at a time, in its order."""
        done = np.zeros(len(self.sizes), np.int64)  # each rank's rows read so far
        for lo in range(0, len(self.order), rows):
            ranks = self.order[lo : lo + rows]
            out = np.empty(len(ranks), self.record)
            by_rank = np.argsort(ranks, kind="stable")
            counts = np.bincount(ranks, minlength=len(self.sizes))
            at = 0
            for rank in np.flatnonzero(counts):
                n = int(counts[rank])
                offset = int(done[rank]) * self.record.itemsize
                out[by_rank[at : at + n]] = np.fromfile(self.path(int(rank)), self.record, n,
                                                        offset=offset)  # fmt: skip
                done[rank] += n
                at += n
            yield out

    def frame(self, rec: np.ndarray, columns: list[str] | None = None) -> pd.DataFrame:
        """Records as the job's table (``columns``: these only), each column in its dtype."""
        out = {}
        for c in self.dtypes.index if columns is None else columns:
            if c in self.coded:
                out[c] = pd.Series(self.values(c, rec[c]), dtype=self.dtypes[c])
            else:
                out[c] = pd.Series(np.ascontiguousarray(rec[c]), dtype=self.dtypes[c], copy=False)
        return pd.DataFrame(out, copy=False)


def waits_of_windows(
    window_waits: pd.Series, range_id: np.ndarray, device: np.ndarray
) -> np.ndarray:
    """Per window (its range id and device): its summed waits from ``window_waits`` (ns,
    indexed by (range_id, device)), 0 where none."""
    ids, dev = (
        (window_waits.index.get_level_values(i).to_numpy(np.int64) for i in (0, 1))
        if len(window_waits) else (np.zeros(0, np.int64), np.zeros(0, np.int64))
    )  # fmt: skip
    # ((range id, device) packed into one int64: a device id below width)
    width = max(int(dev.max()) + 1 if len(dev) else 0,
                int(device.max()) + 1 if len(device) else 0)  # fmt: skip
    waits = pd.Series(window_waits.to_numpy(np.float64), index=ids * width + dev)
    key = np.asarray(range_id, np.int64) * width + np.asarray(device, np.int64)
    return waits.reindex(key).fillna(0.0).to_numpy(np.float64)


@dataclass
class RegionView:
    """A job's range instances as a selection sees them (on ``device``; None: all), read
    back from ``files`` (analysis.RegionSource)."""

    files: RegionFiles
    device: int | None = None

    def narrowed(self, device: int | None) -> RegionView:
        """The view on one device (None: as it is)."""
        return self if device is None else replace(self, device=device)

    def _stats(self) -> pd.DataFrame:
        t = self.files.stats
        return t if self.device is None else t[t.index == self.device]

    def __len__(self) -> int:
        return int(self._stats()["rows"].sum())

    def span(self) -> tuple[int, int]:
        """The first instance's start and the last one's end (ns)."""
        t = self._stats()
        return int(t["start_ns"].min()), int(t["end_ns"].max())

    def chunks(
        self, columns: list[str] | None = None, names: list[str] | None = None,
        rows: int = CHUNK_ROWS,
    ) -> Iterator[pd.DataFrame]:  # fmt: skip
        """The selection's instances (``columns`` of them; ``names``: of these names only)
        in the job's order, about ``rows`` at a time (none empty)."""
        files = self.files
        wanted = None
        if names is not None:
            known = files.coded["name"]
            wanted = np.array([known[n] for n in names if n in known], dtype=np.int32)
        for rec in files.chunks(rows):
            keep = None
            if self.device is not None:
                keep = rec["device"] == self.device
            if wanted is not None:
                hit = np.isin(rec["name"], wanted)
                keep = hit if keep is None else keep & hit
            if keep is not None:
                rec = rec[keep]
            if len(rec):
                yield files.frame(rec, columns)

    def frame(self, columns: list[str] | None = None, names: list[str] | None = None):
        """The selection's instances as one table (``columns``, ``names``: as chunks)."""
        parts = list(self.chunks(columns, names))
        if not parts:
            return self.files.frame(np.zeros(0, self.files.record), columns)
        return pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]
