"""The communication ops of a job of many ranks, kept in a private temporary folder while
the job is merged (parts.merged_job), not in the client's memory (issue 33: the client's
memory flat in the number of ranks).

Each rank's comm ops are written as its part is merged (``CommStore.add``; held in the folder
from the part's arrival on: ``hold``), with its comm kernels' times in (device, name, start)
order and an index of each (name, device)'s run. ``CommStore.match`` then matches the
collectives across the ranks as metrics/comm.collective_skew does over all of them at once
(the n-th launch of a kernel name on every device that runs it is one instance; the last
device to start it, each op's wait for it), a bounded number of ops at a time (MATCH_ROWS:
one name's instances n..n+k on every device), and sums what the analysis reads as it goes:
each comm op's wait per device, per range instance and outside every range (the windows'
``comm_wait_ns``), the range table's sums per (region, device) (metrics/comm_regions.py) and
one row per collective instance (name, skew, last device: views.collectives). The job's
comm ops and matched collectives themselves are read back from the folder only when asked
for (``CommView.ops``, ``CommView.collectives``: the same tables as matching them in
memory). The folder is removed when the store is no longer referenced.
"""

from __future__ import annotations

import shutil
import tempfile
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from advisor.analysis import share_with_duplicates
from advisor.frames import concatenated
from advisor.metrics.comm import OP_CLASSES, SKEW_COLUMNS
from advisor.metrics.comm_regions import RegionCommSums, empty_sums, region_comm_sums
from advisor.regionstore import RegionFiles

MATCH_ROWS = 1 << 18  # comm ops matched at once: a chunk of one name's instances, all devices
OP_CLASS_DTYPE = pd.CategoricalDtype(list(OP_CLASSES))  # (classify_ops' categories)
_TIMES = np.dtype([("start", "<i8"), ("end", "<i8")])  # a comm kernel's
_MATCH = np.dtype([("wait", "<i8"), ("last", "<i8")])  # its wait, the last device (-1: none)
# a matched op: device, start, instance, its wait, its rank and row among the rank's comm ops
_MATCHED = np.dtype([("device", "<i8"), ("start", "<i8"), ("instance", "<i8"), ("wait", "<i8"),
                     ("rank", "<i8"), ("row", "<i8")])  # fmt: skip


@dataclass
class _Rank:
    """One rank's files and the index of its comm kernels' times (small: one row per kernel
    name and device)."""

    folder: Path
    rows: int  # its comm ops
    index: pd.DataFrame  # name, device, first (record), count

    def path(self, what: str) -> Path:
        return self.folder / what


@dataclass
class CommJob:
    """What the matching found: per device, per (range id, device) and outside every range
    the summed waits (ns), the range table's sums, one row per collective instance
    (instance, code, skew_ns, last_device) with the names by code (an instance id is its
    name's code * ``width`` + n), and the store to read the tables back from."""

    store: CommStore
    device_waits: pd.Series
    window_waits: pd.Series  # indexed by (range_id, device)
    outside_waits: pd.Series
    region_sums: RegionCommSums
    instances: pd.DataFrame
    names: np.ndarray
    width: int = 1
    matched: list[Path] = field(default_factory=list)  # files of matched ops (_MATCHED)


class CommStore:
    """The comm ops of a job's ranks, on disk (module doc)."""

    def __init__(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="advisor-comm-"))
        self._removal = weakref.finalize(self, shutil.rmtree, str(self.folder), True)
        self._ranks: list[_Rank] = []
        self._held = 0  # (parts' comm ops held as they arrived)

    @contextmanager
    def writing(self) -> Iterator[None]:
        """Writes into the folder; an OSError that names no file (a full disk) names it, as
        the command line reports it (exit 2)."""
        try:
            yield
        except OSError as exc:
            if exc.filename is None:
                exc.filename = f"{self.folder} (the job's comm ops, kept while it is merged)"
            raise

    def hold(self, table: pd.DataFrame | dict[str, pd.DataFrame]) -> Path:
        """Write a table of a part as the part arrives (its comm ops, before the job's ids
        are known: ``add`` takes them in rank order once every part is in; its range
        instances; its small tables by key); the file to ``take`` it from."""
        held = self.folder / "arrived"
        held.mkdir(exist_ok=True)
        self._held += 1
        path = held / f"{self._held}.pkl"
        with self.writing():
            pd.to_pickle(table, path)
        return path

    def region_files(self, dtypes: pd.Series) -> RegionFiles:
        """New files for the job's range instances (regionstore.py), in the folder."""
        with self.writing():
            return RegionFiles(self.folder / "regions", dtypes, owner=self)

    @staticmethod
    def take(path: str | Path, remove: bool = True) -> Any:
        """The table (or tables) ``hold`` wrote (the file removed, with ``remove``)."""
        table = pd.read_pickle(path)
        if remove:
            Path(path).unlink()
        return table

    def add(self, comm: pd.DataFrame) -> None:
        """The next rank's comm ops (COMM_COLUMNS with the job's device and range ids)."""
        with self.writing():
            self._add(comm)

    def _add(self, comm: pd.DataFrame) -> None:
        folder = self.folder / f"rank{len(self._ranks)}"
        folder.mkdir()
        comm.to_pickle(folder / "ops.pkl")
        sel = np.flatnonzero((comm["op_class"].eq("comm") & comm["kind"].eq("kernel")).to_numpy())
        code, names = pd.factorize(comm["name"].to_numpy(object)[sel], sort=True)
        device = comm["device"].to_numpy(np.int64)[sel]
        start, end = comm["start"].to_numpy(np.int64)[sel], comm["end"].to_numpy(np.int64)[sel]
        order = np.lexsort((start, code, device))  # (device, name, start); ties as they came
        times = np.empty(len(order), _TIMES)
        times["start"], times["end"] = start[order], end[order]
        times.tofile(folder / "times")
        np.save(folder / "rows.npy", sel[order])
        matches = np.zeros(len(order), _MATCH)
        matches["last"] = -1
        matches.tofile(folder / "matches")
        code, device = code[order], device[order]
        heads = np.flatnonzero(np.r_[True, (code[1:] != code[:-1]) | (device[1:] != device[:-1])]
                               ) if len(order) else np.zeros(0, np.int64)  # fmt: skip
        index = pd.DataFrame({
            "name": np.asarray(names, dtype=object)[code[heads]], "device": device[heads],
            "first": heads, "count": np.diff(np.r_[heads, len(order)]),
        })  # fmt: skip
        self._ranks.append(_Rank(folder, len(comm), index))

    def match(self, steady_start: pd.Series, chunk: int | None = None) -> CommJob:
        """Match the ranks' collectives and sum what the analysis reads (module doc);
        ``steady_start``: per device id, its steady state's first ns; ``chunk``: the ops
        matched at once (default MATCH_ROWS; at least one instance's)."""
        index = pd.concat([r.index.assign(rank=i) for i, r in enumerate(self._ranks)],
                          ignore_index=True)  # fmt: skip
        names = np.sort(index["name"].unique().astype(object)) if len(index) else np.array([])
        matching = index["device"].nunique() > 1
        job = CommJob(self, *_no_waits(), empty_sums(), _no_instances(), names)
        if matching:
            job.width = int(index["count"].max())
            with self.writing():
                job.instances, job.matched = self._match(index, job.width, chunk or MATCH_ROWS)
        device_waits, window_waits, outside_waits, sums = [], [], [], []
        for r in self._ranks:
            comm = pd.read_pickle(r.path("ops.pkl"))
            with self.writing():
                wait, last = self._waits(r, comm, matching)
            comm = comm.assign(op_class=comm["op_class"].astype(OP_CLASS_DTYPE), wait_ns=wait,
                               last_device=last)  # fmt: skip
            sums.append(region_comm_sums(comm, steady_start))
            waits = comm.loc[wait != 0, ["device", "range_id", "wait_ns"]]
            device_waits.append(waits.groupby("device")["wait_ns"].sum())
            inside = waits["range_id"].to_numpy() >= 0
            window_waits.append(waits[inside].groupby(["range_id", "device"])["wait_ns"].sum())
            outside_waits.append(waits[~inside].groupby("device")["wait_ns"].sum())
        job.region_sums = RegionCommSums.added(sums)
        for name, parts in (("device_waits", device_waits), ("window_waits", window_waits),
                            ("outside_waits", outside_waits)):  # fmt: skip
            full = [p for p in parts if len(p)]
            if full:
                setattr(job, name, pd.concat(full))
        return job

    def _match(self, index: pd.DataFrame, width: int, chunk: int):
        """(one row per instance, the matched ops' files): each name's instances a chunk
        at a time, each op's wait and last device written to its rank's ``matches``."""
        instances: list[pd.DataFrame] = []
        matched: list[Path] = []
        for code, (_, g) in enumerate(index.groupby("name", sort=True)):
            g = g.sort_values("device", kind="stable")
            device = g["device"].to_numpy()
            ranks, first = g["rank"].to_numpy(), g["first"].to_numpy()
            kept = int(g["count"].min())  # (instance n counts where every device has it)
            step = max(1, chunk // len(g))
            for a in range(0, kept, step):
                n = min(kept, a + step) - a
                start = np.empty((len(g), n), np.int64)
                end = np.empty((len(g), n), np.int64)
                for j, (rank, at) in enumerate(zip(ranks, first + a, strict=True)):
                    t = np.fromfile(self._ranks[rank].path("times"), _TIMES, n, offset=at * 16)
                    start[j], end[j] = t["start"], t["end"]
                last, lowest = start.max(axis=0), start.min(axis=0)
                last_device = device[start.argmax(axis=0)]  # (the lowest device of the last)
                wait = np.minimum(last - start, end - start)
                out = np.empty(n, _MATCH)
                out["last"] = last_device
                rows = np.empty((len(g), n), np.int64)
                for j, (rank, at) in enumerate(zip(ranks, first + a, strict=True)):
                    out["wait"] = wait[j]
                    r = self._ranks[rank]
                    with open(r.path("matches"), "r+b") as f:
                        f.seek(at * _MATCH.itemsize)
                        f.write(out.tobytes())
                    rows[j] = np.load(r.path("rows.npy"), mmap_mode="r")[at : at + n]
                instance = code * width + np.arange(a, a + n)
                instances.append(pd.DataFrame({"instance": instance, "code": code,
                                               "skew_ns": last - lowest,
                                               "last_device": last_device}))  # fmt: skip
                ops = np.empty(start.size, _MATCHED)
                ops["device"] = np.repeat(device, n)
                ops["start"] = start.ravel()
                ops["instance"] = np.tile(instance, len(g))
                ops["wait"] = wait.ravel()
                ops["rank"] = np.repeat(ranks, n)
                ops["row"] = rows.ravel()
                matched.append(self.folder / f"matched{len(matched)}.npy")
                np.save(matched[-1], ops)
        return pd.concat(instances, ignore_index=True), matched

    def _waits(self, r: _Rank, comm: pd.DataFrame, matching: bool):
        """Per comm op of rank ``r``: its wait for the last device (ns, float64) and that
        device (float32, NaN: none), as analysis._comm_waits gives them."""
        wait = np.zeros(len(comm))
        last = np.full(len(comm), np.nan, dtype=np.float32)
        if not matching:
            return wait, last
        m = np.fromfile(r.path("matches"), _MATCH)
        rows = np.load(r.path("rows.npy"))
        hit = m["last"] >= 0
        wait[rows[hit]] = m["wait"][hit]
        last[rows[hit]] = m["last"][hit].astype(np.float32)
        share_with_duplicates(comm, comm["op_class"], wait, last)
        np.save(r.path("wait.npy"), wait)
        np.save(r.path("last.npy"), last)
        return wait, last

    def ops(self, matched: bool) -> pd.DataFrame:
        """Every rank's comm ops, in rank order, with op_class, wait_ns and last_device as
        parts.merged_job gave them (``matched``: whether the matching ran)."""
        comm = concatenated([pd.read_pickle(r.path("ops.pkl")) for r in self._ranks], True)
        if not len(comm):
            return comm.assign(wait_ns=pd.Series(dtype=float), last_device=pd.Series(dtype=float))
        if matched:
            wait = np.concatenate([np.load(r.path("wait.npy")) for r in self._ranks])
            last = np.concatenate([np.load(r.path("last.npy")) for r in self._ranks])
        else:
            wait, last = np.zeros(len(comm)), np.full(len(comm), np.nan, np.float32)
        comm = comm.assign(op_class=comm["op_class"].astype(OP_CLASS_DTYPE))
        comm["wait_ns"], comm["last_device"] = wait, last
        return comm

    def offsets(self) -> np.ndarray:
        """Per rank: its first comm op's row among the job's."""
        return np.cumsum([0] + [r.rows for r in self._ranks])[:-1]


@dataclass
class CommView:
    """A job's comm ops as a selection sees them: on ``device`` (None: all), in the range
    instances ``range_ids`` (None: all, outside ranges too) whose text contains
    ``range_text``, the matched collectives starting within ``span`` (lo, hi ns)."""

    job: CommJob
    device: int | None = None
    range_text: str | None = None
    range_ids: np.ndarray | None = None
    span: tuple[float, float] | None = None

    def narrowed(self, **selection) -> CommView:
        """The view with more of the selection set."""
        return replace(self, **selection)

    def ops(self) -> pd.DataFrame:
        """The selection's comm ops (read back from the store)."""
        ops = self.job.store.ops(bool(self.job.matched))
        if self.device is not None:
            ops = ops[ops["device"] == self.device]
        if self.range_ids is not None:
            ops = ops[ops["range_id"].isin(self.range_ids)]
        return ops

    def collectives(self) -> pd.DataFrame:
        """The selection's matched collectives (collective_skew's table, read back)."""
        job = self.job
        if not job.matched:
            return pd.DataFrame(columns=SKEW_COLUMNS)
        ops = np.concatenate([np.load(p) for p in job.matched])
        row = job.store.offsets()[ops["rank"]] + ops["row"]
        code = ops["instance"] // job.width
        order = np.lexsort((row, ops["start"], code, ops["device"]))  # (collective_skew's)
        ops, row, code = ops[order], row[order], code[order]
        per = job.instances.set_index("instance").reindex(ops["instance"])
        t = pd.DataFrame({
            "device": ops["device"], "start": ops["start"],
            "name": pd.Categorical.from_codes(code, pd.Index(job.names, dtype=object)),
            "instance": ops["instance"], "skew_ns": per["skew_ns"].to_numpy(),
            "wait_ns": ops["wait"], "last_device": per["last_device"].to_numpy(), "row": row,
        })  # fmt: skip
        if self.device is not None:
            t = t[t["device"] == self.device]
        if self.span is not None:
            t = t[t["start"].between(*self.span)]
        return t

    def instances(self) -> pd.DataFrame:
        """One row per collective instance with an op in the selection: name, skew_ns and
        last (the device last to arrive), streamed from the matched ops' files."""
        job = self.job
        kept = []
        for path in job.matched if self.device is not None or self.span is not None else ():
            ops = np.load(path)
            mask = np.ones(len(ops), dtype=bool)
            if self.device is not None:
                mask &= ops["device"] == self.device
            if self.span is not None:
                lo, hi = self.span
                mask &= (ops["start"] >= lo) & (ops["start"] <= hi)
            kept.append(np.unique(ops["instance"][mask]))
        per = job.instances
        if kept:
            per = per[np.isin(per["instance"].to_numpy(), np.concatenate(kept))]
        return pd.DataFrame({
            "name": pd.Categorical.from_codes(per["code"].to_numpy(),
                                              pd.Index(job.names, dtype=object)),
            "skew_ns": per["skew_ns"].to_numpy(), "last": per["last_device"].to_numpy(),
        })  # fmt: skip

    def comm_by_region(self) -> RegionCommSums:
        """The range table's sums of the selection's comm ops."""
        return self.job.region_sums.narrowed(self.device, self.range_text)


def _no_waits() -> tuple[pd.Series, pd.Series, pd.Series]:
    return (pd.Series(dtype=np.float64), pd.Series(dtype=np.float64),
            pd.Series(dtype=np.float64))  # fmt: skip


def _no_instances() -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=np.int64)
                         for c in ("instance", "code", "skew_ns", "last_device")})  # fmt: skip
