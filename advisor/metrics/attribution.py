"""Why the GPU waited: every idle nanosecond of a device attributed to exactly one cause by
following what held the operation that ended the idle (docs/metrics.md, "Why the GPU
waited").

A device's idle time is the gaps before its operations (metrics/gaps.py). For the gap
[g0, g1) that ends when op X starts, X could start only once (a) the host had enqueued it
(its launch call: ``enqueue`` = min(call end, X's start)), (b) its stream predecessor had
finished (always by g0: the device was idle) and (c) whatever else it waited on (an event
another stream records, a CUDA graph's dependencies). The gap belongs to the dependency
satisfied last:

1. ``startup``: the gap lies before the steady state of its device (the first instance of
   a top-level range that recurs to the end of the trace, else the first run of op names
   that recurs in the device's last quarter): a position, not an API name.
2. ``unattributed``: no launch call is known for X (API not traced).
3. ``queued_wait``: X waited longer after it was enqueued than the device's launch latency
   L (g1 - max(enqueue, g0) > L): something other than the host was satisfied last, and the
   whole gap is its: an event wait (a stream-wait-event call on the launching thread
   between X's stream predecessor's launch and X's), a CUDA graph's dependencies (X ran
   from a graph launch), else a dependency the trace does not record.
4. Otherwise [max(enqueue, g0), g1) is ``launch_latency`` (``graph_internal`` between two
   nodes of one graph launch), and when the launch call returned after g0 the host was late
   for [g0, enqueue), split by what the launching thread did then: ``synchronization``
   (inside a blocking synchronize call), ``blocking_copy`` (inside a synchronous copy or
   set, or an async copy from pageable memory), ``startup`` (inside a module load, or inside
   a kernel's first launch call on its device when that call takes longer than
   host_launch_max_ns: lazy module loading loads the kernel's code then, per kernel
   function, so kernels are told apart by full name; code loads once, wherever it
   happens), ``input_pipeline`` (inside a DataLoader range), and the rest: first,
   when a blocking call was waiting as the device ran dry (it spans g0) and returned before
   the launch, up to the time in [its start, g0) that the device was busy is that call's
   (the time the host lost waiting: without the wait it would have been that much earlier;
   the device's idle then is an earlier gap's, so a call is credited at most its own
   duration); before a kernel's first launch on its device, when its code was loaded in the
   window (a module load call or a slow first launch call), a rest longer than
   host_launch_max_ns is ``startup`` too (the kernel being built and loaded: a Triton JIT
   compile, a library's first use); what remains is ``host_bound`` (launch work: at most
   host_launch_max_ns, or inside X's launch call, or the framework's work for X: an
   operator holding X's launch call covers the window, or a user range or nothing does and
   no stretch of it outside the framework's operators is longer than host_launch_max_ns;
   where no operator launched X, a range holding the launch covers it and no stretch
   outside every API call is longer than host_silent_max_ns) or ``host_busy``
   (longer, in something else: the host code of a step that launches nothing).

Thresholds: data/thresholds.yaml ``attribution``; name patterns: classify.yaml.
The pieces of one gap are laid out in that order from g0 (their lengths are exact; their
order inside one gap is a convention) so that windows can clip them.
"""

from __future__ import annotations

import tempfile
import threading
from concurrent.futures import Future
from dataclasses import dataclass
from functools import cache, partial
from itertools import islice
from typing import Any

import numpy as np
import pandas as pd

from advisor.data import load_yaml, name_matches
from advisor.metrics.ahead import ahead, beside, once
from advisor.metrics.columns import column
from advisor.metrics.grouping import rows_by_value
from advisor.metrics.intervals import (
    CodedCoverage,
    GapCoverage,
    Segments,
    grouped_order,
    run_heads,
    union,
)
from advisor.metrics.keys import (
    BLOCK_ROWS,
    TextColumn,
    distinct,
    int_dtype,
    pack_bounds,
    pack_one,
    packed_rows,
    row_dtype,
    used_codes,
    value_codes,
    vocabulary_categorical,
    vocabulary_codes,
)
from advisor.metrics.regions import range_name

# the causes, in the order a gap's pieces are laid out (the categorical's codes)
CAUSES = ("startup", "unattributed", "queued_wait", "synchronization", "blocking_copy",
          "input_pipeline", "host_busy", "host_bound", "graph_internal",
          "launch_latency")  # fmt: skip
CAUSE_CODE = {name: code for code, name in enumerate(CAUSES)}
# the idle a CUDA graph (or fusion, a persistent kernel) removes
OVERHEAD_CAUSES = ("host_bound", "launch_latency", "graph_internal")
# what the host did while late, in priority order where several overlap (API level first)
_SYNC, _COPY, _LOAD, _INPUT = 1, 2, 3, 4
# the cause of the time the host spent inside each (_HostActivity.split)
_PAINTED_CAUSE = {_SYNC: "synchronization", _COPY: "blocking_copy", _LOAD: "startup",
                  _INPUT: "input_pipeline"}  # fmt: skip

PIECE_COLUMNS = ["device", "start", "end", "cause", "row", "detail"]


@cache
def thresholds() -> dict:
    """data/thresholds.yaml ``attribution``."""
    return dict(load_yaml("thresholds.yaml")["attribution"])


@dataclass
class Attribution:
    """Per op (rows of the ops table): ``cause`` (the gap's dominant cause, codes into
    CAUSES, -1 without a gap), ``detail`` (what held it, '' when nothing is named),
    ``overhead_ns`` (its gap's launch-overhead part), ``sync_call`` (the blocking call
    behind a synchronization or blocking-copy gap, '' otherwise); ``pieces``: the idle
    pieces (PIECE_COLUMNS; cause as codes), sorted by (cause, device, start); ``latency_ns``:
    the launch latency bound per device (ns)."""

    cause: np.ndarray
    detail: pd.Categorical
    overhead_ns: np.ndarray
    sync_call: pd.Categorical
    pieces: pd.DataFrame
    latency_ns: dict[int, int]
    launch_op: pd.Categorical  # per op: the innermost host range open at its launch call ('')
    sync_held: np.ndarray  # per op: a synchronization held part of its gap (bool)


# gaps attributed per block: every per-gap temporary is a block long, not a trace long
# (1M gaps: about 40 arrays of 8 MB each otherwise)
BLOCK_GAPS = 1 << 18
# from this many gaps on, each block's idle pieces go to temporary files as they are made
# and come back when the attribution is done (_PieceColumns): not held beside the host's
# indexes (4M gaps: about 7M pieces, 180 MB)
SPILL_GAPS = 1 << 22
# the innermost-range index holds only the ranges open at a time it is asked for where the
# host's ranges outnumber those times by this factor (_prunes)
PRUNE_RANGES_OVER = 1


# attribute's result before its pieces' table is made (with_pieces makes it)
Unmade = tuple[partial[Attribution], "_PieceColumns", dict[object, int]]


def with_pieces(unmade: Unmade) -> Attribution:
    """The Attribution of ``attribute``'s result, its pieces' table made now: once the
    attribution's host indexes are let go, and whatever its caller lets go of in between
    (the API calls), spilled pieces (from ``spill_gaps`` gaps on) come back into their
    memory."""
    made, pieces, vocab = unmade
    return made(pieces=pieces.table(vocab))


def attribute(
    ops: pd.DataFrame,
    api: pd.DataFrame,
    host_ranges: pd.DataFrame,
    steady_start: dict[int, int],
    api_row: np.ndarray,
    pageable_copy: np.ndarray,
    block: int = BLOCK_GAPS,
    identity: np.ndarray | None = None,
    threads: int = 1,
    spill_gaps: int = SPILL_GAPS,
) -> Unmade:  # (the Attribution: with_pieces)
    """Attribute the idle gaps of ``ops`` (device_ops sorted by device/start with ``gap_ns``,
    ``graph``, ``correlation``, ``stream``) to causes (module doc).

    ``api``: the trace's host API calls (start, end, name, and pid and tid or their
    ``thread`` keys: with_thread_keys); ``api_row``: per op its launch call's row in
    ``api`` (-1: none); ``host_ranges``: the host's ranges (start, end, pid, tid, text: NVTX,
    record_function and CPU ops); ``steady_start``: per device the steady state's first ns;
    ``pageable_copy``: per op, a copy from/to pageable host memory (its async call blocks);
    ``identity``: per op, a code telling its work apart (gaps.op_identities: kernels by full
    name; default their names), by which a slow first launch call loads a kernel's code.
    The gaps are worked through ``block`` at a time, or with ``threads`` > 1 through
    ``block / threads`` at a time, the next blocks' host activity found on that many
    threads meanwhile (metrics/ahead.py; the result depends on neither).
    """
    n = len(ops)
    # the host's activity, and then the indexes of its launching threads that the blocks
    # read, made on another thread while this one finds the latency bounds and first
    # launches, then the late windows (a single-core stretch otherwise: 0.9 s at 10M ops)
    made = beside(partial(_HostActivity, api, host_ranges, ops, api_row, pageable_copy,
                          identity), threads)  # fmt: skip
    gap = ops["gap_ns"].to_numpy(np.int64)
    at_all = np.flatnonzero(gap > 0).astype(row_dtype(n), copy=False)
    api_end = api["end"].to_numpy(np.int64) if len(api) else np.zeros(0, np.int64)
    latency = _latency_bounds(ops, api_row, api_end, thresholds())
    first = np.zeros(n, dtype=bool)
    first[first_launches(ops)] = True
    host = made.result()
    indexed = beside(partial(host.index_threads, api_row), threads)
    if threads > 1:  # (threads + 1 blocks at once, each 1 / threads as long: 1.5 blocks on 2)
        block = max(1, block // threads)
    blocks = [at_all[b : b + block] for b in range(0, len(at_all), block)] or [at_all]
    gaps = _Gaps(ops, gap, api_row, host, latency, steady_start)

    # where the host's ranges are many (_prunes), the times its innermost range is asked
    # for are declared first: the late windows' middles (split) and the launch calls'
    # starts (launching_ops). (Of several blocks, only the middles are found here and each
    # block's windows below: holding every block's windows would undo the blocks' bound on
    # memory; one block's windows are kept)
    kept = gaps.windows(blocks[0]) if len(blocks) == 1 else None
    launch_calls = api_row[api_row >= 0]
    if _prunes(len(host_ranges), len(at_all) + len(launch_calls)):
        found = [_late_middles(kept)] if kept is not None else ahead(gaps.late_middles, blocks,
                                                                      threads)  # fmt: skip
        keys, times = zip(*found, strict=True)
        indexed.result()
        host.expect(np.concatenate(keys), np.concatenate(times), calls=launch_calls)
        del keys, times, found
    else:
        indexed.result()
    del launch_calls

    def host_late(at: np.ndarray) -> tuple[dict, dict]:
        """A block's windows and what the host did while late in them (on any thread)."""
        nonlocal kept
        w, kept = kept if kept is not None else gaps.windows(at), None
        split = host.split(w["keys"], w["g0"], w["g0"] + w["late"], w["launch_start"],
                           first[at], w["device"])  # fmt: skip
        return w, split

    cause = np.full(n, -1, dtype=np.int8)
    overhead = np.zeros(n, dtype=np.int64)
    sync_held = np.zeros(n, dtype=bool)
    # the pieces' labels, shared by the blocks and by the gaps' details (a gap's detail is
    # the label of its dominant cause's piece) and blocking calls: the codes the host's
    # activity writes its labels in (_LabelCodes)
    vocab = host.labels.vocab
    detail, sync_call = TextColumn(n, vocab), TextColumn(n, vocab)
    # (the pieces' devices in the smallest type that holds them: 17M pieces, int8 49 MB less)
    devices = (int(gaps.device.min()), int(gaps.device.max())) if n else (0, 0)
    pieces = _PieceColumns(len(at_all), {
        "device": int_dtype(*devices), "start": np.int64, "end": np.int64, "cause": np.int8,
        "row": at_all.dtype, "text": np.int32}, spill=len(at_all) >= spill_gaps,
        threads=threads)  # fmt: skip
    for at, (w, split) in zip(blocks, ahead(host_late, blocks, threads), strict=True):
        amounts = _amounts(w, split)
        dominant = _dominant(amounts)
        cause[at] = dominant
        overhead[at] = amounts[[CAUSE_CODE[c] for c in OVERHEAD_CAUSES]].sum(axis=0)
        sync_held[at] = amounts[CAUSE_CODE["synchronization"]] > 0
        # what held each piece: the labels of the host's activity, the queued op's dependency
        # (a label kind the block never wrote is '' throughout: nothing to put)
        labels = split["labels"]
        by_cause = {cause: labels[kind] for cause, kind in _LABEL_OF_CAUSE.items()
                    if kind in labels}  # fmt: skip
        queued = w["queued"]
        if queued.any():
            queued_detail = np.zeros(len(at), dtype=np.int32)  # ('')
            queued_detail[queued] = host.labels.of_texts(gaps.queued_detail(at[queued]))
            by_cause["queued_wait"] = queued_detail
        coded = _pieces(w["device"], w["g0"], amounts, at, by_cause, pieces)
        for name, (nz, codes) in coded.items():  # (a gap's dominant cause holds a piece)
            mine = dominant[nz] == CAUSE_CODE[name]
            detail.put_codes(at[nz[mine]], codes[mine])
        for name, label in (("synchronization", "sync_api"), ("blocking_copy", "copy_api")):
            if label in labels:
                mine = dominant == CAUSE_CODE[name]
                sync_call.put_codes(at[mine], labels[label][mine])
        del w, split, amounts, labels, by_cause
    launch_op = host.launching_ops(api_row, block, threads).categorical()
    return (
        partial(
            Attribution,
            cause,
            detail.categorical(),
            overhead,
            sync_call.categorical(),
            latency_ns=latency,
            launch_op=launch_op,
            sync_held=sync_held,
        ),
        pieces,
        vocab,
    )


# the label kind (_HostActivity.split) that names what held each cause's pieces
_LABEL_OF_CAUSE = {"synchronization": "sync", "blocking_copy": "copy", "input_pipeline": "input",
                   "host_busy": "host", "host_bound": "host"}  # fmt: skip


class _Labels(dict):
    """Per label kind, the labels of a block's windows as codes (_LabelCodes): an int32
    array of 0 ('') made on the first write to that kind (``labels[kind][rows] = ...``); a
    kind never written is absent, not filled with ''."""

    def __init__(self, windows: int) -> None:
        super().__init__()
        self._windows = windows

    def __missing__(self, kind: str) -> np.ndarray:
        column = self[kind] = np.zeros(self._windows, dtype=np.int32)
        return column


class _LabelCodes:
    """What held the gaps (the labels of the host's activity, the queued ops' dependencies)
    as int32 codes into one vocabulary that every thread splitting windows shares: ``vocab``
    (text -> code, '' is 0; as keys.TextColumn takes it) and ``words`` (code -> text). Each
    distinct text is coded once, under a lock; labels are written and copied as codes, not
    as a Python string per gap."""

    def __init__(self) -> None:
        self.vocab: dict[object, int] = {"": 0}
        self.words: list[object] = [""]
        self._lock = threading.Lock()

    def of_texts(self, texts: np.ndarray) -> np.ndarray:
        """The codes of ``texts`` (an object array of strings; keys.vocabulary_codes), texts
        new to the vocabulary added."""
        with self._lock:
            codes = vocabulary_codes(texts, self.vocab)
            if len(self.vocab) > len(self.words):  # (the texts added: last in the dict)
                self.words.extend(islice(self.vocab, len(self.words), None))
        return codes

    def of_names(self, names: np.ndarray, at: np.ndarray) -> np.ndarray:
        """The codes of the texts ``names[at]`` (``names``: an object array; ``at``: integer
        positions in it), each distinct position's text coded once."""
        rows, used = pd.factorize(at)
        return self.of_texts(names[used])[rows]


class _Gaps:
    """What each gap's op waited for, per block of gaps (module doc, steps 1-4): the
    columns every block needs, taken from the ops once."""

    def __init__(self, ops, gap, api_row, host: _HostActivity, latency, steady_start) -> None:
        self.ops, self.gap, self.api_row, self.host = ops, gap, api_row, host
        self.start = ops["start"].to_numpy(np.int64)
        self.device = ops["device"].to_numpy()
        self.graph = ops["graph"].to_numpy(bool)
        self.corr = ops["correlation"].to_numpy(np.float64)
        t = thresholds()
        self.latency_default = t["latency_default_ns"]
        self.latency, self.steady_start = latency, steady_start
        # per device: its latency bound (the default where none), its steady start (none
        # before every time where it has no start-up)
        self._latency_of = _PerDevice(latency, self.latency_default)
        self._steady_of = _PerDevice(steady_start, np.iinfo(np.int64).min)
        self._prev_in_stream: np.ndarray | None = None

    def windows(self, at: np.ndarray) -> dict[str, np.ndarray]:
        """Per gap ``at`` (op rows): g0, device, keys (the launching thread), launch_start,
        queued / startup / known, late (the host-late time [g0, enqueue)), latency_part,
        same_graph (a gap between two nodes of one CUDA-graph launch), gap."""
        w = self._late(at)
        host, gap, known, safe = self.host, w["gap"], w["known"], w.pop("safe")
        g1 = self.start[at]
        has_api = len(host.api_start) > 0
        w["launch_start"] = np.where(known, host.api_start[safe] if has_api else 0, g1)
        w["latency_part"] = np.where(w.pop("timed"), gap - w["late"], 0)
        prev = np.maximum(at - 1, 0)
        device = w["device"]
        same_graph = (at > 0) & (self.device[prev] == device) & self.graph[at] & self.graph[prev]
        same_graph &= self.corr[at] == self.corr[prev]
        w["same_graph"] = same_graph
        return w

    def late_middles(self, at: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(keys, times): of the gaps ``at`` whose host was late (``windows``' late > 0, its
        launching thread known), the thread and the late window's middle (ns): the times
        ``split`` asks for the innermost host range (``_HostActivity.expect``)."""
        return _late_middles(self._late(at))

    def _late(self, at: np.ndarray) -> dict[str, np.ndarray]:
        """``windows``' gap, g0, device, keys, known, queued, startup and late, with the
        launch call's row made safe to index (``safe``) and the gaps judged by their
        timing (``timed``)."""
        host = self.host
        gap = self.gap[at]
        g1 = self.start[at]
        g0 = g1 - gap
        device = self.device[at]
        row = self.api_row[at]
        known = row >= 0
        safe = np.maximum(row, 0)
        has_api = len(host.api_start) > 0
        enqueue = np.where(known, np.minimum(host.api_end[safe] if has_api else 0, g1), g1)
        bound = self._latency_of(device)
        waited = g1 - np.maximum(enqueue, g0)  # held after it was enqueued (or after g0)
        steady = self._steady_of(device)
        queued = known & (waited > bound)  # (held by a dependency even before the steady state)
        startup = (g1 <= steady) & ~queued
        timed = known & ~startup & ~queued
        late = np.where(timed, np.clip(enqueue - g0, 0, None), 0)
        keys = np.where(known, host.api_keys[safe] if has_api else -1, -1)
        return {"gap": gap, "g0": g0, "device": device, "keys": keys, "known": known,
                "queued": queued, "startup": startup, "late": late, "safe": safe,
                "timed": timed}  # fmt: skip

    def queued_detail(self, rows: np.ndarray) -> np.ndarray:
        """_queued_detail for op ``rows``, the ops' stream predecessors found once."""
        if self._prev_in_stream is None:
            self._prev_in_stream = _prev_in_stream(self.ops)
        return _queued_detail(self.ops, rows, self.api_row, self.host, self._prev_in_stream)


class _PerDevice:
    """A value per device (int64 ns) looked up for many rows at once: the ``values`` of the
    devices they hold, ``default`` for a device without one."""

    def __init__(self, values: dict[int, int], default: int) -> None:
        devices = np.fromiter(values, dtype=np.int64, count=len(values))
        order = np.argsort(devices)
        self._devices = devices[order]
        self._values = np.fromiter(values.values(), dtype=np.int64, count=len(values))[order]
        self._default = default

    def __call__(self, device: np.ndarray) -> np.ndarray:
        """Per row of ``device``: its device's value (int64)."""
        if len(self._devices) == 0:
            return np.full(len(device), self._default, dtype=np.int64)
        pos = np.minimum(np.searchsorted(self._devices, device), len(self._devices) - 1)
        return np.where(self._devices[pos] == device, self._values[pos], self._default)


def _prunes(ranges: int, asked: int) -> bool:
    """Whether the innermost-range index should hold only the ranges open at a time it is
    asked for (``_HostActivity.expect``): where the host's ranges outnumber those times
    (at most ``asked``: the late windows and the launch calls) by PRUNE_RANGES_OVER. The
    answers are the same either way; finding those times costs a pass over every block's
    windows, which pays where the ranges are many (a Kineto trace's CPU ops, several per
    kernel), not where they are few (NVTX steps and layers: the index holds them all)."""
    return ranges > PRUNE_RANGES_OVER * asked


def _late_middles(w: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """_Gaps.late_middles of windows ``w`` (_Gaps.windows, or its part _Gaps._late)."""
    late_at = (w["late"] > 0) & (w["keys"] >= 0)
    return w["keys"][late_at], (w["g0"] + w["late"] // 2)[late_at]


def _amounts(w: dict[str, np.ndarray], split: dict) -> np.ndarray:
    """ns per (cause, gap) of a block of gaps (``w``: _Gaps.windows): one contiguous row
    per cause; every column sums to its gap."""
    gaps = w["gap"]
    amounts = np.zeros((len(CAUSES), len(gaps)), dtype=np.int64)
    startup, known, queued = w["startup"], w["known"], w["queued"]
    amounts[CAUSE_CODE["startup"]] = np.where(startup, gaps, 0) + split["startup"]
    amounts[CAUSE_CODE["unattributed"]] = np.where(~known & ~startup, gaps, 0)
    amounts[CAUSE_CODE["queued_wait"]] = np.where(queued, gaps, 0)
    for name in ("synchronization", "blocking_copy", "input_pipeline", "host_busy",
                 "host_bound"):  # fmt: skip
        amounts[CAUSE_CODE[name]] = split[name]
    same_graph, latency_part = w["same_graph"], w["latency_part"]
    amounts[CAUSE_CODE["graph_internal"]] = np.where(same_graph, latency_part, 0)
    amounts[CAUSE_CODE["launch_latency"]] = np.where(same_graph, 0, latency_part)
    assert (amounts.sum(axis=0) == gaps).all(), "idle pieces must sum to the gap"
    return amounts


def _dominant(amounts: np.ndarray) -> np.ndarray:
    """Per gap (column of ``amounts``, ns per cause): the code of the cause with the most
    time, the first in CAUSES order on ties (argmax one cause row at a time: rows are
    contiguous)."""
    best = amounts[0].copy()
    out = np.zeros(amounts.shape[1], dtype=np.int8)
    for code in range(1, len(amounts)):
        more = amounts[code] > best
        out[more] = code
        np.maximum(best, amounts[code], out=best)
    return out


def _pieces(device, g0, amounts, at, details: dict[str, np.ndarray], out: _PieceColumns
            ) -> dict[str, tuple[np.ndarray, np.ndarray]]:  # fmt: skip
    """Write the idle pieces of a block of gaps into ``out``'s next rows: laid out from each
    gap's start in CAUSES order, with the label of what held each (``details``: per cause,
    per gap, codes of _LabelCodes; '' (0) for the others). The block's rows come in cause
    order, each cause's by gap (device, start): a cause's pieces are one stretch of rows,
    written in one go over the gaps that hold it (no sort, no copy). Returns per cause of
    ``details`` with pieces: (the block's gaps that hold one, their labels' codes)."""
    c, k = amounts.shape  # (ns per cause, per gap)
    nonzero = amounts != 0
    per_cause = nonzero.sum(axis=1)
    rows = out.claim(int(per_cause.sum()), k)
    start, end, text = rows["start"], rows["end"], rows["text"]  # (text: codes into vocab)
    offset = g0.copy()
    first = 0
    coded: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for code in range(c):
        if per_cause[code] == 0:
            continue
        nz = np.flatnonzero(nonzero[code])
        mine = slice(first, first + len(nz))
        first += len(nz)
        start[mine] = offset[nz]
        offset[nz] += amounts[code, nz]
        end[mine] = offset[nz]
        rows["cause"][mine] = code
        rows["device"][mine] = device[nz]
        rows["row"][mine] = at[nz]
        values = details.get(CAUSES[code])
        if values is None:
            text[mine] = 0  # ('')
            continue
        coded[CAUSES[code]] = (nz, values[nz])
        text[mine] = coded[CAUSES[code]][1]
    return coded


class _PieceColumns:
    """The idle pieces (_pieces) of block after block, written straight into columns
    allocated once for all (``claim`` hands out each block's rows): no per-block arrays
    copied in (at 10M kernels, 17M pieces: ~0.4 CPU seconds) or joined at the end (which
    held the pieces twice). The columns are sized from the first block's pieces per gap
    with room to spare (pages never written take no memory) and grown should a later block
    need more. ``dtypes``: per column (PIECE_COLUMNS but ``detail``, whose codes are
    ``text``), its dtype. A block's rows come in cause order (_pieces). With ``spill``,
    each block's rows are written to a temporary file per column instead, on another thread
    while the next block is made where ``threads`` >= 2 (two blocks held at a time), and
    the table reads them back: nothing of the pieces is held while the host's indexes are.
    The table is the rows in cause order (each cause's by block, then as written)."""

    _GROW = 1.5  # capacity per (estimated) need

    def __init__(self, gaps: int, dtypes: dict[str, Any], spill: bool = False,
                 threads: int = 1) -> None:  # fmt: skip
        self._gaps, self._dtypes = gaps, dtypes  # (every block's gaps together)
        self._columns: dict[str, np.ndarray] = {}
        self._filled = self._gaps_seen = 0
        self._files = _temporary_files(list(dtypes)) if spill else None
        self._pending = 0  # (spilled: the rows of the last block, not yet written)
        self._spilled: list[np.ndarray] = []  # (per spilled block: its pieces per cause)
        self._threads = threads
        self._writing: Future[None] | None = None  # (spilled: the last block's write)

    def claim(self, k: int, gaps: int) -> dict[str, np.ndarray]:
        """The next ``k`` rows of every column, to be written (views, to be filled before
        the next claim: growing the columns leaves earlier views behind); ``gaps``: how
        many gaps the block that fills them had."""
        if self._files is not None:
            self._flush()  # (the last block's buffers now the writer's: new ones)
            self._columns = {name: np.empty(k, dtype=dtype)
                             for name, dtype in self._dtypes.items()}  # fmt: skip
            self._pending = k
            self._filled += k
            return {name: column[:k] for name, column in self._columns.items()}
        self._gaps_seen += gaps
        need = self._filled + k
        if not self._columns or need > len(self._columns["start"]):
            per_gap = need / max(self._gaps_seen, 1)  # (the pieces per gap so far)
            size = int(self._GROW * per_gap * self._gaps) + 1
            self._grow(max(size, int(self._GROW * need) + 1))
        claimed = slice(self._filled, need)
        self._filled = need
        return {name: column[claimed] for name, column in self._columns.items()}

    def _flush(self) -> None:
        """Start writing the last block's rows to the columns' files in cause order, once
        the block before is written (spilled)."""
        assert self._files is not None
        self._written()
        if not self._pending:
            return
        rows = {name: column[: self._pending] for name, column in self._columns.items()}
        self._spilled.append(np.bincount(rows["cause"], minlength=len(CAUSES)))
        self._writing = beside(partial(_write, rows, self._files), self._threads)
        self._pending = 0

    def _written(self) -> None:
        """Wait for the block being written (raising what its write raised)."""
        if self._writing is not None:
            writing, self._writing = self._writing, None
            writing.result()

    def _grow(self, size: int) -> None:
        for name, dtype in self._dtypes.items():
            column = np.empty(size, dtype=dtype)
            if name in self._columns:
                column[: self._filled] = self._columns[name][: self._filled]
            self._columns[name] = column

    def table(self, vocab: dict[object, int]) -> pd.DataFrame:
        """The pieces as one table (PIECE_COLUMNS; detail categorical of ``vocab``: its
        categories '' and the texts of the pieces), in cause order: what every window sums
        per cause is then a slice of the columns (piece_segments), not a copy. Held columns
        are reordered one at a time, each let go then; spilled ones are read back into
        place, a (block, cause) run at a time."""
        n = self._filled  # (``claim`` ran at least once: every attribution has a block)
        if self._files is not None:
            self._flush()
            self._written()
            self._columns = {}  # (the last block's buffers go before the columns come back)
            # (the texts' codes read back as int16 where the vocabulary fits: 17M pieces,
            # 33 MB less of a temporary where the attribution's heap is at its largest)
            c = self._read_back(n, {"text": int_dtype(-1, len(vocab))})
        else:
            cause = self._columns.pop("cause")[:n]
            order = _cause_order(cause)
            c = {"cause": cause if order is None else cause[order]}
            for name in [name for name in self._dtypes if name != "cause"]:
                values = self._columns.pop(name)[:n]
                c[name] = values if order is None else values[order]
                del values
        text = c.pop("text")
        used = np.union1d([0], used_codes(text, len(vocab)))  # ('' a category always)
        detail = vocabulary_categorical(text, vocab, used)
        return pd.DataFrame({name: c[name] for name in PIECE_COLUMNS[:-1]} | {"detail": detail},
                            copy=False)  # fmt: skip

    def _read_back(self, n: int, narrower: dict[str, Any]) -> dict[str, np.ndarray]:
        """The spilled columns in cause order: block b's pieces of cause c lie in the files
        at b's first row plus the block's pieces of the causes before c, and go to cause c's
        first row in the table plus c's pieces in the blocks before b. ``narrower``: per
        column, a dtype that holds its values in fewer bytes than it was written in (read
        through a buffer of BLOCK_ROWS rows)."""
        assert self._files is not None
        counts = np.array(self._spilled, dtype=np.int64).reshape(-1, len(CAUSES))
        in_file = np.cumsum(np.r_[0, counts.ravel()])[:-1].reshape(counts.shape)
        in_table = np.cumsum(np.r_[0, counts.T.ravel()])[:-1].reshape(counts.T.shape).T
        runs = [(int(in_file[b, c]), int(in_table[b, c]), int(counts[b, c]))
                for b, c in zip(*np.nonzero(counts), strict=True)]  # fmt: skip

        files = self._files

        def read(name: str) -> np.ndarray:
            """One column read back (its own file: the columns on up to ``threads``)."""
            f = files[name]
            written = np.dtype(self._dtypes[name])
            values = np.empty(n, dtype=narrower.get(name, written))
            buffer = np.empty(min(n, BLOCK_ROWS) if values.dtype != written else 0, written)
            size = written.itemsize
            for at, to, k in runs:
                f.seek(at * size)
                for part in range(0, k, len(buffer) or k):  # (one read where not narrowed)
                    m = min(k - part, len(buffer) or k)
                    into = values[to + part : to + part + m] if not len(buffer) else buffer[:m]
                    if f.readinto(into.data.cast("B")) != m * size:
                        raise OSError("the idle pieces' temporary file ended before "
                                      f"{at + part + m} rows")  # fmt: skip
                    if len(buffer):
                        values[to + part : to + part + m] = into
            f.close()
            return values

        names = list(files)
        out = dict(zip(names, ahead(read, names, self._threads), strict=True))
        self._files = {}
        return out


def _write(rows: dict[str, np.ndarray], files: dict[str, Any]) -> None:
    """Append a block's ``rows`` (per column) to the columns' ``files`` in cause order (as
    _pieces writes them; others sorted, stable)."""
    order = _cause_order(rows["cause"])
    for name, f in files.items():
        (rows[name] if order is None else rows[name][order]).tofile(f)


def _cause_order(cause: np.ndarray) -> np.ndarray | None:
    """The positions of pieces with causes ``cause`` in cause order (a stable sort: each
    cause's pieces as they were), or None where they are in that order already."""
    if (cause[1:] >= cause[:-1]).all():
        return None
    return np.argsort(cause, kind="stable")


def _temporary_files(names: list[str]) -> dict[str, Any] | None:
    """A temporary file per name (unnamed: each goes when closed or collected), or None
    where the temporary folder takes none (the pieces are then held)."""
    files: dict[str, Any] = {}
    try:
        for name in names:
            files[name] = tempfile.TemporaryFile()  # noqa: SIM115 (closed by the reader)
    except OSError:
        for f in files.values():
            f.close()
        return None
    return files


class _DeviceIdle:
    """Per device, its idle gaps (disjoint intervals, by start), to tell how long a device
    idled in any interval."""

    def __init__(self, device: np.ndarray, start: np.ndarray, gap: np.ndarray) -> None:
        """``device``, ``start``, ``gap``: per op of a device_ops table sorted by device and
        start, its device, start (ns) and the idle before it (ns, gaps.idle_gaps). A
        device's gaps are its ops' [start - gap, start): sorted and disjoint, an op without
        a gap giving an empty one (which covers nothing), so each device's GapCoverage is
        built on first use from its ops' own rows (no selection of the gaps)."""
        self._device, self._start, self._gap = device, start, gap
        self._gaps: dict[Any, GapCoverage | None] = {}
        self._lock = threading.Lock()  # (several threads ask at once: metrics/ahead.py)

    def _of(self, dev) -> GapCoverage | None:
        def make() -> GapCoverage | None:
            a = int(np.searchsorted(self._device, dev, side="left"))  # (ops by device)
            b = int(np.searchsorted(self._device, dev, side="right"))
            return GapCoverage(self._start[a:b], self._gap[a:b]) if b > a else None

        return once(self._gaps, dev, make, self._lock)

    def index_devices(self) -> None:
        """Build every device's idle gaps now (else each on first use)."""
        for dev in distinct(self._device) if len(self._device) else ():
            self._of(dev)

    def between(self, device: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """Per interval [lo, hi) on ``device``: the ns its device was idle (0 where hi <= lo)."""
        out = np.zeros(len(lo), dtype=np.int64)
        for dev in distinct(device) if len(device) else ():
            coverage = self._of(dev)
            if coverage is not None:
                mine = device == dev
                out[mine] = coverage.within(lo[mine], hi[mine])
        return out


def _latency_bounds(ops: pd.DataFrame, api_row, api_end, t: dict) -> dict[int, int]:
    """Per device: the launch latency bound L (ns): the ``latency_quantile`` of
    (start - launch call end) over ops launched while their device was idle (the call ended
    after the gap began), clamped to [latency_min_ns, latency_max_ns]; with too few such
    ops, latency_default_ns."""
    out: dict[int, int] = {}
    if len(api_end) == 0:
        return out
    gap, start = ops["gap_ns"].to_numpy(), ops["start"].to_numpy(np.int64)
    device = ops["device"].to_numpy()
    # (the ops read BLOCK_ROWS at a time: only the waits are held, not five op-long
    # temporaries beside them; 10M ops: ~0.3 GB where the attribution's heap was largest)
    waits: dict[int, list[np.ndarray]] = {}
    for b in range(0, len(ops), BLOCK_ROWS):
        part = slice(b, b + BLOCK_ROWS)
        calls = api_row[part]
        rows = np.flatnonzero((calls >= 0) & (gap[part] > 0))
        end = api_end[calls[rows]]
        began = start[part][rows]
        into_idle = end > began - gap[part][rows]
        wait = np.maximum(began[into_idle] - end[into_idle], 0)
        on = device[part][rows][into_idle]
        for d in distinct(on):
            waits.setdefault(int(d), []).append(wait[on == d])
    for d in sorted(waits):
        w = np.concatenate(waits.pop(d))
        if len(w) < t["latency_min_samples"]:
            continue
        q = float(np.quantile(w, t["latency_quantile"]))
        out[d] = int(np.clip(q, t["latency_min_ns"], t["latency_max_ns"]))
    return out


GRAPH_HELD = (
    "a CUDA graph launch (its own dependencies, or graph nodes the profiler did not record)"
)


def _prev_in_stream(ops: pd.DataFrame) -> np.ndarray:
    """Per op: the row of the op before it on its (device, stream), -1 for the first."""
    order = grouped_order(ops["stream"].to_numpy(), ops["device"].to_numpy())
    prev_in_stream = np.full(len(ops), -1, dtype=np.int64)
    dev, stream = ops["device"].to_numpy()[order], ops["stream"].to_numpy()[order]
    same = np.zeros(len(order), dtype=bool)
    same[1:] = (dev[1:] == dev[:-1]) & (stream[1:] == stream[:-1])
    prev_in_stream[order[1:]] = np.where(same[1:], order[:-1], -1)
    return prev_in_stream


def _queued_detail(ops, rows, api_row, host: _HostActivity, prev_in_stream) -> np.ndarray:
    """What held queued ops ``rows``: an event wait issued by the launching thread between
    the stream predecessor's launch and the op's (``prev_in_stream``: _prev_in_stream), a
    CUDA graph launch (what it waits on inside the graph: its dependencies, or nodes the
    profiler did not record), or a dependency the trace does not record."""
    out = np.full(len(rows), "a dependency not in the trace", dtype=object)
    names = host.api_names[np.maximum(api_row[rows], 0)]
    by_graph = ops["graph"].to_numpy(bool)[rows] | pd.Series(names).str.contains(
        "GraphLaunch", regex=False).to_numpy()  # fmt: skip
    out[by_graph] = GRAPH_HELD
    if host.event_waits is None:
        return out
    pred = prev_in_stream[rows]
    a_start = host.api_start
    mine = api_row[rows]
    lo = np.where(
        (pred >= 0) & (api_row[np.maximum(pred, 0)] >= 0),
        a_start[np.maximum(api_row[np.maximum(pred, 0)], 0)],
        np.iinfo(np.int64).min,
    )
    hi = a_start[np.maximum(mine, 0)]
    keys = np.where(mine >= 0, host.api_keys[np.maximum(mine, 0)], -1)
    waits = host.event_waits_in(keys, lo, hi)
    waited = waits != ""
    out[waited] = "an event wait (" + waits[waited] + ")"
    return out


class _HostActivity:
    """The launching threads' activity: blocking calls (synchronize, copies), input-pipeline
    ranges, event waits, and the innermost host range / API call at a time, per thread
    (process id, thread id). Its indexes are built on first use, once, under a lock:
    ``split`` runs on several threads at once (metrics/ahead.py)."""

    def __init__(self, api, ranges, ops, api_row, pageable_copy, identity=None) -> None:
        cat = np.zeros(len(api), dtype=np.int8)
        if len(api):
            sync = name_matches(api["name"], "sync_api").to_numpy(bool)
            copy = sync & name_matches(api["name"], "copy_sync_calls").to_numpy(bool)
            cat[sync] = _SYNC
            cat[copy] = _COPY
            cat[name_matches(api["name"], "module_load_api").to_numpy(bool)] = _LOAD
            blocking_copy_rows = api_row[(api_row >= 0) & pageable_copy]
            cat[blocking_copy_rows] = _COPY
            cat[_slow_first_launches(ops, api, api_row, identity)] = _LOAD
            waits = name_matches(api["name"], "event_wait_api").to_numpy(bool)
            self.event_waits = np.flatnonzero(waits) if waits.any() else None
            launch = name_matches(api["name"], "launch_api").to_numpy(bool)
        else:
            self.event_waits = None
            launch = np.zeros(0, dtype=bool)
        # (``[rows]``: the calls' names as an object array, from one code per call)
        self.api_names = _Texts(api["name"] if len(api) else pd.Series([], dtype=str),
                                as_range_names=False)  # fmt: skip
        self.api_start = api["start"].to_numpy(np.int64) if len(api) else np.zeros(0, np.int64)
        self.api_end = api["end"].to_numpy(np.int64) if len(api) else np.zeros(0, np.int64)
        self.api_cat = cat
        self.api_launch = launch
        self.ranges = ranges
        self.range_start = (
            ranges["start"].to_numpy(np.int64) if len(ranges) else np.zeros(0, np.int64)
        )
        self.range_end = ranges["end"].to_numpy(np.int64) if len(ranges) else np.zeros(0, np.int64)
        self.range_texts = _Texts(ranges["text"] if len(ranges) else pd.Series([], dtype=str))
        # which ranges are the framework's operators (gaps.host_ranges' ``op``)
        self.range_op = (ranges["op"].to_numpy(bool) if "op" in ranges
                         else np.ones(len(ranges), dtype=bool))  # fmt: skip
        self.input = (name_matches(ranges["text"], "input_pipeline_ranges").to_numpy(bool)
                      if len(ranges) else np.zeros(0, dtype=bool))  # fmt: skip
        self.api_keys = _api_thread_keys(api)
        self._api_threads = _by_thread(self.api_keys, self.api_start) if len(api) else {}
        self._input_threads = self._ranges_by_thread(np.flatnonzero(self.input))
        self._queries: dict[int, np.ndarray] | None = None  # per thread: sorted query times
        self._asked_calls: np.ndarray | None = None  # per API call: its start is asked for
        self._indexed: dict[int, np.ndarray] | None = None  # per thread: the indexed rows
        self._innermost: dict = {}
        self._thread_calls: dict[tuple[int, int], np.ndarray] = {}
        self._thread_call_starts: dict[tuple[int, int], np.ndarray] = {}
        self._thread_painted: dict[int, CodedCoverage | None] = {}
        # per thread: its operator / input ranges and its API calls, each _outermost
        self._cover: dict[int, tuple[Segments, Segments | _RowSegments]] = {}
        self._ops = ops
        self.labels = _LabelCodes()  # (what held the gaps: split's labels, as codes)
        self._lock = threading.RLock()  # (held while an index is built: ahead.once)
        self._built: dict[str, Any] = {}  # (indexes of the whole trace, by name)

    @property
    def _every_range(self) -> dict[int, np.ndarray]:
        """Per thread key: every row of ``ranges`` on it, by start (found once)."""
        return once(self._built, "every_range", self._every_range_by_thread, self._lock)

    def _every_range_by_thread(self) -> dict[int, np.ndarray]:
        return self._ranges_by_thread(np.arange(len(self.range_start)))

    def launched_in_operator(self, key, times: np.ndarray) -> np.ndarray:
        """Per launch call start on the thread: whether one of the framework's operators
        (range_op) is open then (the innermost range or one around it)."""
        index = self._index(key)
        out = np.zeros(len(times), dtype=bool)
        if index is None:
            return out
        pos = index.find(np.asarray(times, dtype=np.int64))
        for _ in range(len(index.levels) + 1):  # (up the parents, one level at a time)
            open_ = pos >= 0
            if not open_.any():
                break
            out[open_] |= self.range_op[index.rows(pos[open_])]
            pos[open_] = index.parent[pos[open_]]
        return out

    def longest_uncovered(self, key, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """Per window [lo, hi) on the thread: its longest stretch (ns) outside every
        operator range, API call and input-pipeline range of the thread (time the host spent
        in code that the framework did not record as one of its operators)."""
        cover = once(self._cover, key, lambda: self._cover_of(key), self._lock)
        out = np.empty(len(lo), dtype=np.int64)
        # the windows in runs of rising starts (a block's windows come by device, then
        # start): each run searched among the segments of its own stretch of time only
        heads = np.flatnonzero(np.r_[True, lo[1:] < lo[:-1]])
        for a, b in zip(heads, np.r_[heads[1:], len(lo)], strict=True):
            out[a:b] = _Uncovered.around(cover, lo[a], hi[a:b].max()).longest(lo[a:b], hi[a:b])
        return out

    def _cover_of(self, key) -> tuple[Segments, Segments | _RowSegments]:
        """The thread's operator and input-pipeline ranges, and its API calls: each set by
        start, less what an earlier segment holds (the union is the same, and a Kineto
        thread's millions of nested CPU ops shrink to the outer ones)."""
        ranges = self._every_range.get(key, np.zeros(0, dtype=np.int64))
        ranges = ranges[self.range_op[ranges] | self.input[ranges]]
        calls = self._api_threads.get(key, np.zeros(0, dtype=np.int64))
        ranges_set = _outermost(self.range_start[ranges], self.range_end[ranges])
        if _every_row(calls, len(self.api_start)):  # (one thread, its calls by start: no copy)
            return ranges_set, _outermost(self.api_start, self.api_end)
        # (the calls through their rows: a launching thread's calls are nearly all of them,
        # and their times gathered by start were two more copies of the API table's times,
        # 146 MB at 10M kernels, held through the attribution)
        return ranges_set, _RowSegments.outermost(self.api_start, self.api_end, calls)

    @property
    def device_idle(self) -> _DeviceIdle:
        """The devices' idle gaps (the ops' ``gap_ns``), indexed on first use."""

        def make() -> _DeviceIdle:
            ops = self._ops
            return _DeviceIdle(ops["device"].to_numpy(), ops["start"].to_numpy(np.int64),
                               ops["gap_ns"].to_numpy(np.int64))  # fmt: skip

        return once(self._built, "device_idle", make, self._lock)

    def index_threads(self, api_row: np.ndarray) -> None:
        """Build what the late windows of the ops launched by the calls ``api_row`` (rows
        of ``api``, -1: none) will read and that does not wait for ``expect``: every range
        by thread, the devices' idle gaps (where the trace has blocking calls), and per
        launching thread its painted blocking / loading / input spans and its calls by kind
        (each built once, under the lock)."""
        _ = self._every_range
        if np.isin(self.api_cat, (_SYNC, _COPY)).any():  # (the idle is asked for their sake)
            self.device_idle.index_devices()
        calls = api_row[api_row >= 0]
        for key in distinct(self.api_keys[calls]) if calls.size else ():
            key = int(key)
            if key < 0:
                continue
            self._painted(key)
            for code in (_SYNC, _COPY, 0):
                self._call_starts(key, code)

    def _ranges_by_thread(self, rows: np.ndarray) -> dict[int, np.ndarray]:
        """Rows of ``ranges`` (a subset, in table order) per thread key, each by start."""
        if rows.size == 0:
            return {}
        pid = self.ranges["pid"].to_numpy()
        tid = self.ranges["tid"].to_numpy()
        every = rows.size == len(pid)
        keys = _thread_keys(pid if every else pid[rows], tid if every else tid[rows])
        threads = _by_thread(keys, self.range_start if every else self.range_start[rows])
        return threads if every else {key: rows[at] for key, at in threads.items()}

    def expect(self, keys: np.ndarray, times: np.ndarray, calls: np.ndarray | None = None
               ) -> None:  # fmt: skip
        """Declare every time the innermost host range will be asked for on threads
        ``keys`` (-1: none), and the API calls (rows of ``api``) whose starts will be asked
        for, besides the starts of the blocking calls (always added). The index then holds
        only the ranges open at one of those times: a range open at a time holds every range
        around it (ranges nest), so the innermost range at each time and its parents are
        those of the whole table, at a fraction of the cost (a Kineto trace holds millions
        of CPU ops that hold no launch). The calls' starts are searched per thread in the
        order the thread's calls already have (no table of every launch time is built)."""
        asked = (self.api_cat == _SYNC) | (self.api_cat == _COPY)
        if calls is not None:
            asked[calls] = True
        self._asked_calls = asked
        keys, times = np.asarray(keys, np.int64), np.asarray(times, np.int64)
        ok = keys >= 0
        codes, uniques = pd.factorize(keys[ok])
        times = times[ok]
        if len(uniques) < 2**15:
            codes = codes.astype(np.int16)  # (a radix sort, and a small gather)
        order = np.argsort(codes, kind="stable")
        by_thread = codes[order]
        heads = np.flatnonzero(np.r_[True, by_thread[1:] != by_thread[:-1]])
        self._queries = {
            int(uniques[by_thread[h]]): np.sort(times[part], kind="stable")
            for h, part in zip(heads, np.split(order, heads[1:]), strict=True)
            if part.size
        }
        self._indexed = None
        self._innermost = {}

    def _index_rows(self) -> dict[int, np.ndarray]:
        """Per thread key: the rows of ``ranges`` the innermost-range index holds (by
        start): every range, or, once ``expect`` was told the query times, those open at
        one of that thread's query times (the declared times are dropped once used)."""
        with self._lock:
            if self._indexed is None:
                self._indexed = self._rows_asked()
                self._queries = self._asked_calls = None
            return self._indexed

    def _rows_asked(self) -> dict[int, np.ndarray]:
        every = self._every_range
        if self._queries is None:
            return every
        s, e = self.range_start, self.range_end
        asked = self._asked_calls
        assert asked is not None  # (set with the queries)
        out = {}
        for key, at in every.items():  # (``at`` by start: sorted searches)
            times = []
            q = self._queries.get(key)
            if q is not None:
                times.append(q)
            calls = self._api_threads.get(key)
            if calls is not None:  # (the thread's calls by start: their starts sorted)
                times.append(self.api_start[calls[asked[calls]]])
            if not times:
                continue
            # both sets at once: two sorted runs, which a stable sort merges
            t = times[0] if len(times) == 1 else np.sort(np.concatenate(times), kind="stable")
            hold = _holds_one(s[at], e[at], t)
            if hold.any():
                out[key] = at[hold]
        return out

    def split(self, keys, lo, hi, launch_start, first_launch, device) -> dict:
        """For host-late windows [lo, hi) on threads ``keys`` (_thread_keys): ns per cause
        (synchronization, blocking_copy, startup, input_pipeline, host_busy, host_bound) and
        the labels of what the thread did (module doc, step 4). ``first_launch``: per window,
        whether its op is its kernel's first launch on the device; ``device``: per window,
        its device."""
        k = len(lo)
        t = thresholds()
        causes = ("synchronization", "blocking_copy", "startup", "input_pipeline", "host_busy",
                  "host_bound")  # fmt: skip
        out: dict[str, Any] = {c: np.zeros(k, dtype=np.int64) for c in causes}  # (and labels)
        out["labels"] = _Labels(k)  # (sync, copy, input, host, sync_api, copy_api)
        length = np.maximum(hi - lo, 0)
        work = np.flatnonzero(length > 0)
        rest = length.copy()
        own_launch = np.zeros(k, dtype=bool)
        if work.size:
            keys = keys[work]
            for key in distinct(keys[keys >= 0]):
                rows = work[keys == key]
                own_launch[rows] = self._split_thread(key, rows, lo, hi, launch_start, device,
                                                      out, rest)  # fmt: skip
        # what nothing named before a kernel's first launch, longer than any launch takes,
        # when its code was loaded in the window (a module load call, or a slow first launch
        # call): the kernel being built and loaded (a JIT compile, a library's first use). A
        # first launch in a trace taken mid-run loads nothing: its time stays as it is
        built = first_launch & (out["startup"] > 0) & (rest > t["host_launch_max_ns"])
        out["startup"] += np.where(built, rest, 0)
        rest = np.where(built, 0, rest)
        # what nothing named: launch work, or the host busy elsewhere
        busy = (rest > t["host_launch_max_ns"]) & ~own_launch
        out["host_busy"] = np.where(busy, rest, 0)
        out["host_bound"] = np.where(busy, 0, rest)
        return out

    def _split_thread(self, key, rows, lo, hi, launch_start, device, out, rest) -> np.ndarray:
        """Fill ``out`` and ``rest`` for the windows ``rows`` of one thread; returns per
        window whether its rest is the op's launch work (module doc, step 4): it is no
        longer than host_launch_max_ns; or its middle lies inside the op's launch call; or
        an operator launched the op and the range covering the window is an operator
        holding that call, or is a user range (or none) in which no stretch outside the
        operators is longer than host_launch_max_ns; or no operator launched it, the range
        covering the window holds that call and no stretch outside every API call is longer
        than host_silent_max_ns."""
        a, b = lo[rows], hi[rows]
        painted = self._painted(key)
        if painted is not None:
            for code, covered in painted.within(a, b).items():
                out[_PAINTED_CAUSE[code]][rows] += covered
                rest[rows] -= covered
        if key in self._api_threads:
            # blocking calls that overlap the window: their names; the one spanning lo
            # (waiting when the device ran dry) gets up to the time in [its start, lo) that
            # the device was busy (the host was that much later than without the wait; the
            # time the device idled then lies in earlier gaps, already attributed there)
            for code, name, label in ((_SYNC, "synchronization", "sync"),
                                      (_COPY, "blocking_copy", "copy")):  # fmt: skip
                mine = self._calls_of(key, code)
                if mine.size == 0:
                    continue
                pos = np.searchsorted(self._call_starts(key, code), b, side="left") - 1
                ok = pos >= 0  # (the last call starting before b)
                p = np.maximum(pos, 0)
                s, e = self.api_start[mine[p]], self.api_end[mine[p]]
                overlaps = ok & (e > a)
                spans = np.flatnonzero(overlaps & (s < a) & (e <= b))
                if spans.size:  # (the device's idle is searched for those only)
                    sa, ss, at = a[spans], s[spans], rows[spans]
                    busy = sa - ss - self.device_idle.between(device[at], ss, sa)
                    credit = np.minimum(busy, rest[at])
                    out[name][at] += credit
                    rest[at] -= credit
                hit = np.flatnonzero(overlaps)  # (the range around the call: only for those)
                call = self.api_names.codes[mine[p[hit]]]
                out["labels"][label + "_api"][rows[hit]] = self.labels.of_names(
                    self.api_names.names, call)  # fmt: skip
                where = self.range_at(key, s[hit])
                out["labels"][label][rows[hit]] = self._call_in(call, where)
        rows_in = self._input_threads.get(key)
        if rows_in is not None and rows_in.size:  # (by start: _ranges_by_thread)
            pos = np.searchsorted(self.range_start[rows_in], b, side="left") - 1
            at = rows_in[np.maximum(pos, 0)]
            hit = (pos >= 0) & (self.range_end[at] > a)
            where = np.where(hit, self.range_texts.codes[at], -1)  # (-1: the names' last, '')
            out["labels"]["input"][rows] = self.labels.of_names(self.range_texts.names, where)
        # the rest's label: the innermost host range (or non-launch API call) around the
        # window's middle that covers at least half of it; whether that range also holds
        # the op's own launch call
        mid = a + (b - a) // 2
        text, holds, operator = self.innermost(key, mid, launch_start[rows], (a, b), True)
        out["labels"]["host"][rows] = text
        t = thresholds()
        # a rest no longer than any launch takes is launch work, and so is one whose middle
        # lies inside the op's own launch call (a slow launch); the others are decided by
        # what the host was in (``decide``: a few percent of the windows, where the host was
        # late longer than a launch takes)
        own = np.ones(len(rows), dtype=bool)
        in_call = mid >= launch_start[rows]
        decide = np.flatnonzero(~in_call & (rest[rows] > t["host_launch_max_ns"]))
        if decide.size == 0:
            return own
        a, b, left = a[decide], b[decide], rest[rows[decide]]
        holds, operator = holds[decide], operator[decide]
        # where an operator launched the op, the framework recorded its operators then: in a
        # user range (a step) or in nothing, the rest is launch work (operators and the code
        # between them) unless the host spent a stretch longer than any launch takes outside
        # every operator. Elsewhere a range holding the launch (a step too) stands for the
        # launching code
        recorded = self.launched_in_operator(key, launch_start[rows[decide]])
        glue = np.ones(len(decide), dtype=bool)
        # (without operators, a range holding the launch is the launching code unless the
        # host spent a stretch outside every API call longer than any launch path takes,
        # a Python one included: host_silent_max_ns)
        longest = np.where(recorded, t["host_launch_max_ns"], t["host_silent_max_ns"])
        decides = np.where(recorded, ~operator, holds)
        ask = np.flatnonzero(decides & (left > longest))
        if ask.size:  # (only where it decides: a rest longer than the stretch allowed)
            glue[ask] = self.longest_uncovered(key, a[ask], b[ask]) <= longest[ask]
        by_operators = (operator & holds) | (~operator & glue)
        own[decide] = np.where(recorded, by_operators, holds & glue)
        return own

    def _calls_of(self, key, code: int) -> np.ndarray:
        """The thread's API calls (rows, by start) of category ``code`` (0: the calls that
        are neither blocking, loading nor launching), found once per thread (the gaps come
        in blocks)."""

        def make() -> np.ndarray:
            calls = self._api_threads.get(key, np.zeros(0, dtype=np.int64))
            mine = self.api_cat[calls] == code
            if code == 0:
                mine &= ~self.api_launch[calls]
            return calls[mine]

        return once(self._thread_calls, (key, code), make, self._lock)

    def _call_starts(self, key, code: int) -> np.ndarray:
        """The starts (ns) of ``_calls_of(key, code)``, gathered once (a thread's calls are
        searched block after block)."""
        return once(self._thread_call_starts, (key, code),
                    lambda: self.api_start[self._calls_of(key, code)], self._lock)  # fmt: skip

    def _painted(self, key) -> CodedCoverage | None:
        """The thread's blocking, loading and input spans as disjoint segments coded by
        category, higher priority (lower code) painted over lower (once per thread; None
        where it has none)."""
        return once(self._thread_painted, key, lambda: self._paint_thread(key), self._lock)

    def _paint_thread(self, key) -> CodedCoverage | None:
        r = self._input_threads.get(key, np.zeros(0, dtype=np.int64))
        parts = []
        for code in (_SYNC, _COPY, _LOAD):
            c = self._calls_of(key, code)
            parts.append((code, self.api_start[c], self.api_end[c]))
        parts.append((_INPUT, self.range_start[r], self.range_end[r]))
        painted = _paint(parts)
        return CodedCoverage(painted) if painted else None

    def range_at(self, key, times: np.ndarray) -> np.ndarray:
        """The innermost host range open on the thread at each time ('' for none), as label
        codes (``labels``)."""
        return self.innermost(key, times, None)[0]

    def innermost(self, key, times, launch_start, window=None, kinds: bool = False):
        """(label, holds_launch) per time: the innermost host range open on the thread then
        (with ``window`` (lo, hi): the innermost that covers at least half of it; a
        non-launch API call there is named too: ``cudaMalloc (in aten::empty)``) as label
        codes (``labels``), and whether that range is also open at ``launch_start`` (the
        op's own launch); with ``kinds``, also whether that range is one of the framework's
        operators (range_op)."""
        times = np.asarray(times, dtype=np.int64)
        where = np.full(len(times), -1, dtype=np.int32)  # (codes of range_texts; -1: none)
        own = np.zeros(len(times), dtype=bool)
        operator = np.zeros(len(times), dtype=bool)
        index = self._index(key)
        if index is not None:
            pos = index.find(times)
            if window is not None:
                pos = index.covering(pos, *window)
            hit = pos >= 0
            where[hit] = index.text_codes(pos[hit])[0]
            p = np.maximum(pos, 0)
            operator = hit & self.range_op[index.rows(p)]
            if launch_start is not None:
                own = hit & (index.start[p] <= launch_start) & (index.end[p] > launch_start)
        label = None
        if key in self._api_threads:
            other = self._calls_of(key, 0)
            if other.size:
                p = np.searchsorted(self._call_starts(key, 0), times, side="right") - 1
                at = other[np.maximum(p, 0)]
                inside = (p >= 0) & (self.api_end[at] > times)
                call = np.where(inside, self.api_names.codes[at], -1)
                label = _coded_context(self.api_names.names, call, self.range_texts.names,
                                       where, keep_context=True, labels=self.labels)  # fmt: skip
                own &= ~inside  # (in another API call: not launching this op)
        if label is None:
            label = self.labels.of_names(self.range_texts.names, where)
        return (label, own, operator) if kinds else (label, own)

    def _call_in(self, call: np.ndarray, where: np.ndarray) -> np.ndarray:
        """The label codes of ``call (in where)`` (_with_context) per API call name code
        ``call`` (api_names; -1: none) and label code ``where`` (the host's label then),
        each distinct pair's text made once."""
        words = np.array(self.labels.words, dtype=object)  # (every code in ``where``)
        return _coded_context(self.api_names.names, call, words, where, labels=self.labels)

    def _index(self, key) -> _Innermost | None:
        def make() -> _Innermost | None:
            rows = self._index_rows().get(key)
            return None if rows is None else _Innermost(self.ranges, rows, self.range_texts)

        return once(self._innermost, key, make, self._lock)

    def launching_ops(self, api_row: np.ndarray, block: int = BLOCK_GAPS, threads: int = 1
                      ) -> TextColumn:  # fmt: skip
        """Per op: the innermost host range (CPU op, record_function, NVTX) open on its
        launching thread when its launch call began ('' where none or no call); ``block``
        ops at a time (temporaries a block long), the next blocks found on up to
        ``threads`` threads (metrics/ahead.py)."""
        out = TextColumn(len(api_row))
        if len(self.ranges) == 0:
            return out

        def found(b: int) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
            """Per launching thread of ops [b, b + block): (op rows, codes, words)."""
            has = b + np.flatnonzero(api_row[b : b + block] >= 0)
            rows = api_row[has]
            keys = self.api_keys[rows]
            start = self.api_start[rows]
            parts = []
            for key in distinct(keys[keys >= 0]):
                index = self._index(key)
                if index is None:
                    continue
                mine = np.flatnonzero(keys == key)
                pos = index.find(start[mine])
                hit = pos >= 0
                parts.append((has[mine[hit]], *index.text_codes(pos[hit])))
            return parts

        for parts in ahead(found, range(0, len(api_row), block), threads):
            for rows, codes, words in parts:
                out.put_coded(rows, codes, words)
        return out

    def event_waits_in(self, keys, lo, hi) -> np.ndarray:
        """Per window on thread ``keys``: the name of the last event-wait call on the
        thread in (lo, hi), ''."""
        out = np.full(len(lo), "", dtype=object)
        if self.event_waits is None:
            return out
        waits = self.event_waits

        def make() -> dict[int, np.ndarray]:  # (once: the gaps come in blocks)
            threads = _by_thread(self.api_keys[waits], self.api_start[waits])
            return {key: waits[at] for key, at in threads.items()}

        by_thread = once(self._built, "waits_by_thread", make, self._lock)
        for key in distinct(keys[keys >= 0]):
            mine = by_thread.get(int(key))
            if mine is None:
                continue
            starts = self.api_start[mine]
            q = np.flatnonzero(keys == key)
            p = np.searchsorted(starts, hi[q], side="left") - 1
            ok = (p >= 0) & (starts[np.maximum(p, 0)] > lo[q])
            out[q[ok]] = self.api_names[mine[p[ok]]]
        return out


def first_launches(ops: pd.DataFrame, identity: np.ndarray | None = None) -> np.ndarray:
    """Row positions of ``ops``: each kernel's (or graph's) first launch on its device, by
    ``identity`` (per op codes, gaps.op_identities; default the names; ops are sorted by
    device and start)."""
    launched = ops["kind"].isin(["kernel", "graph"]).to_numpy()
    # (row positions and keys in 32 bits where they fit, the rows found a block at a time:
    # two of these run at once at the attribution's start, 10M ops: 4 x 76 MB before)
    rows = np.concatenate([
        (b + np.flatnonzero(launched[b : b + BLOCK_ROWS])).astype(row_dtype(len(ops)))
        for b in range(0, len(ops), BLOCK_ROWS)
    ] or [np.zeros(0, dtype=np.int64)])  # fmt: skip
    del launched
    if rows.size == 0:
        return rows
    codes = value_codes(ops["name"]) if identity is None else identity
    columns = [ops["device"].to_numpy()[rows], codes[rows]]
    bounds = pack_bounds(columns)
    key = pack_one(*columns) if bounds is None else packed_rows(columns, *bounds, dtype=np.int32)
    del columns
    return rows[~pd.Series(key, copy=False).duplicated().to_numpy()]


def _slow_first_launches(
    ops: pd.DataFrame, api: pd.DataFrame, api_row, identity: np.ndarray | None
) -> np.ndarray:
    """Rows of ``api``: the launch calls of each kernel's first launch on its device (by
    ``identity``: Nsight's short names give many templates one name, and lazy loading loads
    each template's code on its own) that took longer than host_launch_max_ns: with lazy
    module loading (CUDA's default since 12.2) the kernel's code is loaded inside that
    call."""
    first = first_launches(ops, identity)
    if first.size == 0:
        return first
    call = api_row[first]
    call = call[call >= 0]
    took = api["end"].to_numpy(np.int64)[call] - api["start"].to_numpy(np.int64)[call]
    return call[took > thresholds()["host_launch_max_ns"]]


class _Texts:
    """Range texts as range names (metrics/regions.range_name: PyTorch's emit_nvtx
    decorations and a trailing step number removed, so that ``step_3`` and ``step_4`` name
    one thing), or as they are (``as_range_names=False``: API call names), kept as one code
    per row and converted once per distinct text; ``[rows]`` gives an object array ('' for
    a missing text)."""

    def __init__(self, text: pd.Series, as_range_names: bool = True) -> None:
        cat = text if isinstance(text.dtype, pd.CategoricalDtype) else text.astype("category")
        words = pd.Series(cat.cat.categories.astype(str))
        clean = range_name(words) if as_range_names else words
        self.names = np.append(np.asarray(clean, dtype=object), "")
        self.codes = cat.cat.codes.to_numpy()  # (-1, a missing text: the '' at the end)

    def __getitem__(self, rows) -> np.ndarray:
        return self.names[self.codes[rows]]


def _coded_context(calls: np.ndarray, call: np.ndarray, wheres: np.ndarray, where: np.ndarray,
                   keep_context: bool = False, labels: _LabelCodes | None = None
                   ) -> np.ndarray:  # fmt: skip
    """_with_context(calls[call], wheres[where], keep_context) for codes into the object
    arrays ``calls`` and ``wheres`` (-1: their last text, the '' that _Texts.names ends
    with), the text of each distinct (call, where) pair made once (an object array; with
    ``labels``, their label codes)."""
    width = len(wheres) + 1  # (where + 1 < width)
    key = (call.astype(np.int64) + 1) * width + (where.astype(np.int64) + 1)
    codes, pairs = pd.factorize(key)
    text = _with_context(calls[pairs // width - 1], wheres[pairs % width - 1], keep_context)
    return text[codes] if labels is None else labels.of_texts(text)[codes]


def _with_context(call: np.ndarray, where: np.ndarray, keep_context: bool = False):
    """``call (in where)``, the call alone without a range, the range alone without a call
    when ``keep_context``, else ''."""
    call = np.asarray(call, dtype=object)
    where = np.asarray(where, dtype=object)
    has_call = call != ""
    has_where = where != ""
    both = has_call & has_where
    out = np.where(has_call, call, where if keep_context else "")
    out = out.astype(object)
    out[both] = call[both] + " (in " + where[both] + ")"
    return out


_SMALL_ID = 1 << 26  # ids below this pack exactly into a key below 2**52


def _thread_keys(pid, tid) -> np.ndarray:
    """One int64 key per (process, thread) pair, equal across calls for equal pairs, below
    2**53 (exact as a float): ``pid * 2**26 + tid`` where both ids are below 2**26 (Linux
    process and thread ids are below 2**22), else 2**52 + a 52-bit mix of the two ids (two
    such threads of a trace colliding is a 1 in 2^40 event); -1 where either id is unknown
    (NaN)."""
    pid, tid = np.asarray(pid), np.asarray(tid)
    ok = np.ones(len(pid), dtype=bool)
    for ids in (pid, tid):
        if ids.dtype.kind == "f":
            ok &= ~np.isnan(ids)
    every = bool(ok.all())
    p = (pid if every else np.where(ok, pid, 0)).astype(np.int64, copy=False)
    t = (tid if every else np.where(ok, tid, 0)).astype(np.int64, copy=False)
    small = (p >= 0) & (p < _SMALL_ID) & (t >= 0) & (t < _SMALL_ID)
    out = p * _SMALL_ID
    out += t
    if not small.all():
        pu, tu = p.view(np.uint64), t.view(np.uint64)
        with np.errstate(over="ignore"):
            h = (tu * np.uint64(0x9E3779B97F4A7C15)) ^ (pu * np.uint64(0xC2B2AE3D27D4EB4F))
        h >>= np.uint64(12)
        h |= np.uint64(1 << 52)
        out = np.where(small, out, h.view(np.int64))
    if not every:
        out[~ok] = -1
    return out


def _api_thread_keys(api: pd.DataFrame) -> np.ndarray:
    """Per API call its thread's key (_thread_keys): the ``thread`` column where the calls
    have one (with_thread_keys), else made from ``pid`` and ``tid``."""
    if "thread" in api:
        return api["thread"].to_numpy(np.int64)
    if not len(api):
        return np.zeros(0, dtype=np.int64)
    return _thread_keys(api["pid"].to_numpy(), api["tid"].to_numpy())


def with_thread_keys(api: pd.DataFrame) -> pd.DataFrame:
    """The API calls (a new table sharing their other columns) with their ``pid`` and
    ``tid`` replaced by ``thread``, one key per call (_thread_keys: all ``attribute`` reads
    of them): 10M calls hold 73 MB of keys where their ids took 110 MB."""
    keys = _api_thread_keys(api)
    out = api.drop(columns=["pid", "tid"])
    out["thread"] = column(out, keys)
    return out


def _by_thread(keys: np.ndarray, start: np.ndarray) -> dict[int, np.ndarray]:
    """Row positions per thread key (_thread_keys; -1: none), each sorted by ``start``
    (int32 below 2**31 rows: the API calls' are held through the attribution)."""
    if len(keys) and keys[0] >= 0 and (keys == keys[0]).all():  # (one thread: no hashing)
        order = np.argsort(start, kind="stable")  # (a run already in order: found as one)
        return {int(keys[0]): order.astype(row_dtype(len(order)), copy=False)}
    unknown = bool((keys < 0).any())
    codes, uniques = pd.factorize(np.where(keys >= 0, keys, np.nan) if unknown else keys,
                                  use_na_sentinel=True)  # fmt: skip
    if len(uniques) == 0:
        return {}
    if (start[1:] >= start[:-1]).all():  # by start already: a stable sort by thread keeps it
        small = codes.astype(np.int16) if len(uniques) < 32000 else codes
        order = np.argsort(small, kind="stable")
    else:
        order = np.lexsort((start, codes))
    if unknown:
        order = order[codes[order] >= 0]
    c = codes[order]
    order = order.astype(row_dtype(len(order)), copy=False)
    heads = np.flatnonzero(np.r_[True, c[1:] != c[:-1]])
    return {int(uniques[c[h]]): part for h, part in zip(heads, np.split(order, heads[1:]),
                                                           strict=True)}  # fmt: skip


def _paint(parts: list[tuple[int, np.ndarray, np.ndarray]]) -> dict:
    """Disjoint segments per category code from overlapping intervals, the lowest code
    winning where categories overlap."""
    unions = {code: union(s, e) for code, s, e in parts if len(s)}
    unions = {code: u for code, u in unions.items() if len(u[0])}  # (all zero-length: none)
    if not unions:
        return {}
    if _apart(unions):  # (no category overlaps another: each keeps its own, nothing to paint)
        return unions
    return _painted_over(unions)


def _apart(unions: dict[int, Segments]) -> bool:
    """Whether the disjoint segments of every code are also disjoint from the other codes'
    (touching allowed: half-open)."""
    if len(unions) == 1:
        return True
    start = np.concatenate([s for s, _ in unions.values()])
    end = np.concatenate([e for _, e in unions.values()])
    order = np.argsort(start, kind="stable")
    start, end = start[order], end[order]
    return bool((start[1:] >= end[:-1]).all())


def _painted_over(unions: dict[int, Segments]) -> dict[int, Segments]:
    """_paint of codes whose segments (each code's disjoint) overlap another code's: cut at
    every segment's ends, each piece given to the lowest code covering it."""
    # (each code's starts and ends interleaved rise: runs that a merge sort merges)
    points = np.sort(np.concatenate([np.column_stack(u).ravel() for u in unions.values()]),
                     kind="stable")  # fmt: skip
    points = points[np.r_[True, points[1:] != points[:-1]]]
    if len(points) < 2:
        return {}
    lo, hi = points[:-1], points[1:]
    owner = np.zeros(len(lo), dtype=np.int8)
    for code in sorted(unions, reverse=True):  # (lower codes painted last: they win)
        s, e = unions[code]
        p = np.searchsorted(s, lo, side="right") - 1
        inside = (p >= 0) & (e[np.maximum(p, 0)] > lo)
        owner[inside] = code
    out = {}
    for code in unions:
        mine = owner == code
        if mine.any():
            out[code] = union(lo[mine], hi[mine])
    return out


def _every_row(rows: np.ndarray, n: int) -> bool:
    """Whether ``rows`` (distinct row positions) are 0..n-1 in order."""
    return len(rows) == n and (n == 0 or (rows[0] == 0 and bool((rows[1:] > rows[:-1]).all())))


def _outermost(
    start: np.ndarray, end: np.ndarray, block: int = BLOCK_ROWS
) -> tuple[np.ndarray, np.ndarray]:
    """Of segments sorted by start, those not inside an earlier one (same union); the
    arrays themselves where none is (a thread's API calls: 9.6M at 10M kernels)."""
    kept = _RowSegments.outermost(start, end, None, block).rows
    return (start, end) if kept is None else (start[kept], end[kept])


class _RowSegments:
    """Segments sorted by start whose ends rise (as _outermost keeps them), held as rows of
    ``start`` / ``end`` (``rows``; None: every row, in order) rather than as copies of their
    times. A start is found in every ``MARK_EVERY``-th segment's start, then among the
    segments between two marks."""

    MARK_EVERY = 1024

    def __init__(self, start: np.ndarray, end: np.ndarray, rows: np.ndarray | None = None):
        self.start, self.end, self.rows = start, end, rows
        self._marks = start[rows[:: self.MARK_EVERY]] if rows is not None else None

    @classmethod
    def outermost(cls, start: np.ndarray, end: np.ndarray, rows: np.ndarray | None = None,
                  block: int = BLOCK_ROWS) -> _RowSegments:  # fmt: skip
        """Of the segments (start[rows], end[rows]) sorted by start (``rows`` None: every
        row), those not inside an earlier one, as rows: the same union. ``rows`` itself
        where none is. The latest end before each segment is carried ``block`` segments at a
        time (temporaries of a block: 77 MB at once otherwise, at the attribution's peak)."""
        n = len(start) if rows is None else len(rows)
        keep = np.empty(n, dtype=bool)
        reach = np.iinfo(np.int64).min  # (the latest end of the segments before the block)
        for b in range(0, n, block):
            e = end[b : b + block] if rows is None else end[rows[b : b + block]]
            before = np.empty_like(e)  # (per segment: the latest end of those before it)
            before[0] = reach
            np.maximum(np.maximum.accumulate(e)[:-1], reach, out=before[1:])
            np.greater(e, before, out=keep[b : b + block])
            reach = max(reach, int(e.max()))
        if keep.all():
            return cls(start, end, rows)
        return cls(start, end, np.flatnonzero(keep) if rows is None else rows[keep])

    def searchsorted(self, t: int) -> int:
        """The position of the first segment starting at or after ``t`` (``len`` if none)."""
        if self.rows is None:
            return int(np.searchsorted(self.start, t, side="left"))
        assert self._marks is not None
        n, every = len(self.rows), self.MARK_EVERY
        k = int(np.searchsorted(self._marks, t, side="left"))  # (first mark at or after t)
        if k == 0:
            return 0
        # after mark k - 1 (which starts before t), before mark k (at or after t: the answer
        # where none between is) or the end
        a, b = (k - 1) * every + 1, min(k * every, n)
        return a + int(np.searchsorted(self.start[self.rows[a:b]], t, side="left"))

    def span(self, lo: int, hi: int) -> Segments:
        """The (start, end) of the segments from the last one starting before ``lo`` (whose
        end is the reach of every earlier one) to the last one starting before ``hi``."""
        first = max(self.searchsorted(lo) - 1, 0)
        last = self.searchsorted(hi)
        if self.rows is None:
            return self.start[first:last], self.end[first:last]
        rows = self.rows[first:last]
        return self.start[rows], self.end[rows]


class _Uncovered:
    """Segments (possibly overlapping) ready for "longest uncovered stretch" queries: sorted
    by start once, with the running maximum of their ends and the uncovered stretch that
    ends at each segment's start, padded for the range maximum."""

    def __init__(self, start: np.ndarray, end: np.ndarray) -> None:
        order = np.argsort(start, kind="stable")
        self.start = start[order]
        reach = np.maximum.accumulate(end[order]) if len(end) else end[order]
        # reached[i]: the reach of the segments before i (the smallest int64 before the first)
        self.reached = np.r_[np.int64(np.iinfo(np.int64).min), reach]
        # the uncovered stretch that ends where each segment starts (-1: none before it),
        # and -1 past the last (a bound for np.maximum.reduceat)
        self.before = np.r_[np.int64(-1), self.start[1:] - reach[:-1], np.int64(-1)]

    @classmethod
    def around(cls, sets, lo: int, hi: int) -> _Uncovered:
        """For windows inside [lo, hi): the segments of ``sets`` (each a (start, end) pair
        sorted by start whose ends rise, _outermost, or such segments as _RowSegments) that
        can bear on them: those starting before ``hi``, from each set's last one starting
        before ``lo`` on (whose end is the reach of every earlier one of its set). Their
        answers are those of every segment."""
        starts, ends = [], []
        for segments in sets:
            rows = segments if isinstance(segments, _RowSegments) else _RowSegments(*segments)
            start, end = rows.span(lo, hi)
            starts.append(start)
            ends.append(end)
        return cls(np.concatenate(starts), np.concatenate(ends))

    def longest(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """Per window [lo, hi): the longest stretch (ns) that no segment covers."""
        start, reached = self.start, self.reached
        if len(start) == 0:
            return np.maximum(hi - lo, 0)
        i0 = np.searchsorted(start, lo, side="left")  # first segment starting in the window
        i1 = np.searchsorted(start, hi, side="left")  # first starting at or after its end
        inside = i1 > i0
        # from lo to the first segment starting in it (or to hi), past what covers lo already
        head_end = np.where(inside, start[np.minimum(i0, len(start) - 1)], hi)
        longest = head_end - np.maximum(reached[i0], lo)
        # after the last segment starting in the window, to hi
        tail = np.where(inside, hi - np.maximum(reached[i1], lo), 0)
        # between the segments starting in it: before[i] for i0 < i < i1 (a range maximum)
        between = np.full(len(lo), -1, dtype=np.int64)
        many = np.flatnonzero(i1 > i0 + 1)
        if many.size:
            bounds = np.empty(2 * many.size, dtype=np.int64)
            bounds[0::2], bounds[1::2] = i0[many] + 1, i1[many]
            between[many] = np.maximum.reduceat(self.before, bounds)[0::2]
        return np.maximum(np.maximum(longest, tail), np.maximum(between, 0))


def _holds_one(start: np.ndarray, end: np.ndarray, times: np.ndarray) -> np.ndarray:
    """Per range [start, end): whether one of the sorted ``times`` lies inside."""
    at = np.searchsorted(times, start, side="left")
    inside = at < len(times)
    inside[inside] = times[at[inside]] < end[inside]
    return inside


class _Innermost:
    """The innermost range open at a time on one thread, for properly nested ranges: the
    open ranges at time t are d(t) = #starts <= t - #ends <= t deep, and the innermost is the
    last range to start at or before t among those at depth d(t) - 1 (the depth of a range
    is how many ranges were open when it began). From one range to the next (by start) the
    depth rises by at most one, so that range is also the one reached from the last range
    to start at or before t by climbing parents (a range's parent: the last range one level
    up to start before it) down to depth d(t) - 1: the same answer for any ranges, nested
    or not (tests/metrics/test_attribution.py checks it against the definition)."""

    def __init__(self, ranges: pd.DataFrame, rows: np.ndarray, texts: _Texts) -> None:
        s = ranges["start"].to_numpy(np.int64)[rows]
        e = ranges["end"].to_numpy(np.int64)[rows]
        keep = e > s
        if not keep.all():
            s, e, rows = s[keep], e[keep], rows[keep]
        # parents before children that start with them: (start, -end) order; rows come by
        # start (_by_thread), so the sort is skipped where they are in that order already
        later = s[1:] > s[:-1]
        if not (later | ((s[1:] == s[:-1]) & (e[1:] <= e[:-1]))).all():
            order = np.lexsort((-e, s))
            s, e, rows = s[order], e[order], rows[order]
        self.start, self.end, self._rows, self._texts = s, e, rows, texts
        # (ends by start are runs of rising values, as ranges nest: a merge sort finds them;
        # 10x faster than quicksort on a Kineto thread's ranges)
        self.sorted_ends = np.sort(e, kind="stable")
        depth = np.arange(len(s)) - np.searchsorted(self.sorted_ends, s, side="right")
        small = np.int16 if len(s) == 0 or depth.max() < 2**15 else np.int64  # (radix sort)
        by_depth = np.argsort(depth.astype(small), kind="stable")  # (by start per level)
        d = depth[by_depth]
        heads = np.flatnonzero(np.r_[True, d[1:] != d[:-1]])
        self.levels = ({int(d[h]): at for h, at in zip(heads, np.split(by_depth, heads[1:]),
                                                       strict=True)} if len(d) else {})  # fmt: skip
        self.depth = depth
        level_start = {lvl: s[at] for lvl, at in self.levels.items()}
        # each range's parent: the last range one level up to start at or before it
        self.parent = np.full(len(s), -1, dtype=np.int64)
        for lvl, at in self.levels.items():
            up = self.levels.get(lvl - 1)
            if up is None:
                continue
            p = np.searchsorted(level_start[lvl - 1], s[at], side="right") - 1
            ok = p >= 0
            self.parent[at[ok]] = up[p[ok]]

    def text_codes(self, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(codes, words): the range names at positions ``pos`` (>= 0) are words[codes]."""
        return self._texts.codes[self._rows[pos]], self._texts.names

    def rows(self, pos: np.ndarray) -> np.ndarray:
        """The host-range table rows of positions ``pos`` (>= 0)."""
        return self._rows[pos]

    def covering(self, pos: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """From each range ``pos`` (-1: none) up its parents to the first that covers at
        least half of the window [lo, hi) (-1 when none does)."""
        pos = pos.copy()
        need = (hi - lo) / 2
        for _ in range(len(self.levels) + 1):
            p = np.maximum(pos, 0)
            cover = np.minimum(self.end[p], hi) - np.maximum(self.start[p], lo)
            climb = (pos >= 0) & (cover < need)
            if not climb.any():
                break
            pos[climb] = self.parent[pos[climb]]
        return pos

    def find(self, times: np.ndarray) -> np.ndarray:
        """Position of the innermost range open at each time, -1 where none is."""
        last = np.searchsorted(self.start, times, side="right") - 1  # (the last to start)
        level = last - np.searchsorted(self.sorted_ends, times, side="right")  # d(t) - 1
        out = np.full(len(times), -1, dtype=np.int64)
        q = np.flatnonzero(level >= 0)  # (some range is open: the last to start is one)
        pos = last[q]
        # up its parents to that level: every level up to a range's own occurs before it
        # (the depth rises by at most one a range), so each climb ends at a range
        climb = self.depth[pos] - level[q]
        active = np.flatnonzero(climb > 0)
        while active.size:
            pos[active] = self.parent[pos[active]]
            climb[active] -= 1
            active = active[climb[active] > 0]
        ok = self.end[pos] > times[q]
        out[q[ok]] = pos[ok]
        return out


STEADY_BLOCK = 1 << 20  # ops looked at a time for a device's first recurring family


def steady_starts(
    ops: pd.DataFrame,
    ranges: pd.DataFrame,
    identity: np.ndarray | None = None,
    block: int = STEADY_BLOCK,
) -> dict[int, int]:
    """Per device: where its steady state begins (ns): the first GPU op of the first
    top-level range family that recurs into the device's last ``tail_share`` of ops, else
    the first op of the first ``kgram`` ops that recur there, each op known by
    ``identity`` (per op codes: gaps.op_identities, kernels by their full names; default
    the op names); devices with neither have no start-up (absent). A device's ops are read
    in place where they are contiguous (device_ops' order), and the first op of a recurring
    family is looked for ``block`` ops at a time from the start (the steady state usually
    begins early: not a pass over every op)."""
    t = thresholds()
    out: dict[int, int] = {}
    if ops.empty:
        return out
    device = ops["device"].to_numpy()
    start = ops["start"].to_numpy(np.int64)
    range_id = ops["range_id"].to_numpy() if "range_id" in ops else np.full(len(ops), -1)
    family = None
    if len(ranges):
        counts = ranges.groupby(["pid", "text"])["range_id"].transform("size").to_numpy()
        repeated = np.zeros(int(ranges["range_id"].max()) + 1, dtype=bool)
        repeated[ranges["range_id"].to_numpy()[counts >= 2]] = True
        fam_codes = pd.factorize(ranges["text"])[0]
        # (a range's family where the range recurs, else -1; index -1: an op in no range)
        family = np.full(len(repeated) + 1, -1, dtype=np.int64)
        family[ranges["range_id"].to_numpy()] = np.where(
            repeated[ranges["range_id"].to_numpy()], fam_codes, -1
        )
    codes = value_codes(ops["name"]) if identity is None else identity
    for d, rows in _device_rows(device).items():
        n = len(rows) if isinstance(rows, np.ndarray) else rows.stop - rows.start
        tail_from = int(n * (1 - t["tail_share"]))
        if family is not None:
            # (per op, its recurring family: -1 for none)
            late = distinct(family[range_id[_part(rows, tail_from, n)]])
            late = late[late >= 0]
            first = -1
            for b in range(0, n if late.size else 0, block):
                families = family[range_id[_part(rows, b, min(b + block, n))]]
                hit = np.flatnonzero(np.isin(families, late))
                if hit.size:
                    first = b + int(hit[0])
                    break
            if first >= 0:
                out[int(d)] = int(start[_part(rows, first, first + 1)][0])
                continue
        k = int(t["kgram"])
        if n < 4 * k:
            continue
        grams = _kgram_hashes(codes[_part(rows, 0, n)].astype(np.int64), k)
        late = distinct(grams[tail_from:])
        first_gram = np.flatnonzero(np.isin(grams[:tail_from], late))
        if first_gram.size:
            out[int(d)] = int(start[_part(rows, int(first_gram[0]), int(first_gram[0]) + 1)][0])
    return out


def _device_rows(device: np.ndarray) -> dict[int, slice | np.ndarray]:
    """Per device, in ascending order: its rows (``device``: per row, at least one), a
    slice where they are contiguous (each device one run: device_ops' order), else their
    positions."""
    heads = run_heads(device)
    values = device[heads]
    if len(distinct(values)) == len(values):  # (each device's ops one run)
        ends = np.r_[heads[1:], len(device)]
        spans = {int(v): slice(int(a), int(b)) for v, a, b in zip(values, heads, ends, strict=True)}
        return dict(sorted(spans.items()))
    return {int(d): rows for d, rows in rows_by_value(device).items()}


def _part(rows: slice | np.ndarray, a: int, b: int) -> slice | np.ndarray:
    """Rows a..b-1 of a device's rows (_device_rows)."""
    if isinstance(rows, slice):
        return slice(rows.start + a, rows.start + b)
    return rows[a:b]


def _kgram_hashes(codes: np.ndarray, k: int) -> np.ndarray:
    """A 64-bit hash per run of ``k`` consecutive codes (wrapping arithmetic)."""
    m = len(codes) - k + 1
    h = np.zeros(m, dtype=np.uint64)
    mult = np.uint64(1099511628211)  # FNV prime
    with np.errstate(over="ignore"):
        for j in range(k):
            h = h * mult + (codes[j : j + m].astype(np.uint64) + np.uint64(1))
    return h
