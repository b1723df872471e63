"""Where one advisor command's time, cores and memory go, stage by stage, in its own process.

    python benchmarks/stages.py [--interval 0.005] [--json OUT.json] \
        -- analyze TRACE --format json > /dev/null

Runs the console entry (advisor.launch.entry: the command line's process settings, the
early scan) in this process with a sampler thread beside it. Every ``--interval`` seconds
the sampler records the process's CPU time (all threads), glibc's heap (``mallinfo2``: the
bytes in use, chunks and mappings, and the heap's size, free chunks included) and the
resident set (``/proc/self/statm``). Stages are marked where the functions in STAGE_MARKS
(and ``--mark``'s) are entered and left; each span between two marks is a row of the table
(stderr):

- ``wall_s``: seconds of the span; ``cores``: CPU seconds of every thread over wall seconds
  (2.0: both cores of this project's VM busy);
- ``in_use_mb``, ``heap_mb``, ``rss_mb``: their largest sample in the span (MB of 2**20
  bytes, as benchmarks/scale.py gives the peak RSS).
  The peak RSS is the heap's size at its largest plus what lies outside the heap: the heap
  grows only where a request finds no free chunk large enough, so heap - in use is
  fragmentation (docs/scaling.md, "Issue 33, twenty-ninth pass").

With ``--holes``, each time the heap has grown since the last sample the sampler also
reads glibc's ``malloc_info`` and lists, after the table, where the heap grew (the span),
from and to what size, and the free memory inside it then: in all, and its largest free
chunk. A heap that grows while hundreds of MB are free grew because no free chunk was as
large as a request (docs/scaling.md, "Issue 33, thirty-fourth pass").

Memory columns are empty where the C library has no ``mallinfo2`` (not glibc >= 2.33).
The command's own output goes to stdout as usual. Sampling costs ~1 % of one core.
"""

from __future__ import annotations

import argparse
import ctypes
import functools
import importlib
import json
import os
import re
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

MIB = 2**20  # (MB in the table, as benchmarks/scale.py reports peak RSS)

# (module, function): entering and leaving each marks a stage boundary
STAGE_MARKS = [
    ("advisor.pipeline", "load_trace"),
    ("advisor.analysis", "device_ops"),
    ("advisor.analysis", "attribute_gaps"),
    ("advisor.analysis", "_launch_table"),
    ("advisor.analysis", "gap_breakdown"),
    ("advisor.analysis", "window_metrics"),
    ("advisor.analysis", "with_outside_ranges"),
    ("advisor.pipeline", "find_on_device"),
]


@dataclass(frozen=True)
class Sample:
    """One sample: seconds since the start, process CPU seconds, MB in use / heap / RSS."""

    t: float
    cpu: float
    in_use: float | None
    heap: float | None
    rss: float


@dataclass(frozen=True)
class Stage:
    """One span between consecutive marks (module doc)."""

    begins: str
    ends: str
    start_s: float
    wall_s: float
    cores: float | None
    in_use_mb: float | None
    heap_mb: float | None
    rss_mb: float | None


def stage_table(samples: list[Sample], marks: list[tuple[float, str]], end: float) -> list[Stage]:
    """The spans between consecutive marks (and from 0 to the first, from the last to
    ``end``): wall seconds, cores busy (CPU seconds over wall seconds from the last sample
    at or before the span's start to the first at or after its end; the first and last
    samples where none is) and the largest memory sample within the span (None where no
    sample fell in it or the value is unknown)."""
    bounds = [(0.0, "start"), *sorted(marks), (end, "end")]
    out = []
    for (t0, a), (t1, b) in zip(bounds, bounds[1:], strict=False):
        inside = [s for s in samples if t0 <= s.t < t1]
        before = [s for s in samples if s.t <= t0] or samples[:1]
        after = [s for s in samples if s.t >= t1] or samples[-1:]
        cores = None
        if before and after and after[0].t > before[-1].t:
            cores = (after[0].cpu - before[-1].cpu) / (after[0].t - before[-1].t)

        def peak(values: list[float | None]) -> float | None:
            known = [v for v in values if v is not None]
            return max(known) if known else None

        memory = [peak([getattr(s, k) for s in inside]) for k in ("in_use", "heap", "rss")]
        out.append(Stage(a, b, t0, t1 - t0, cores, *memory))
    return out


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]  # fmt: skip


def _heap_reader() -> Callable[[], tuple[float, float]] | None:
    """A function giving (MB in use, MB of heap) from glibc's mallinfo2, or None."""
    try:
        libc = ctypes.CDLL(None)
        info = libc.mallinfo2
    except (OSError, AttributeError):
        return None
    info.restype = _MallInfo2

    def read() -> tuple[float, float]:
        m = info()
        return (m.uordblks + m.hblkhd) / MIB, (m.arena + m.hblkhd) / MIB

    return read


@dataclass(frozen=True)
class Growth:
    """The heap grown between two samples (``--holes``): at ``t`` seconds, from ``before_mb``
    to ``heap_mb`` (MB), with ``free_mb`` free inside it, the largest free chunk
    ``largest_free_mb``."""

    t: float
    before_mb: float
    heap_mb: float
    free_mb: float
    largest_free_mb: float


# one free-chunk bin of malloc_info's XML: its smallest and largest chunk, their bytes, count
_BIN = re.compile(r'<(?:size|unsorted) from="(\d+)" to="(\d+)" total="(\d+)" count="(\d+)"/>')
_REST = re.compile(r'<total type="(?:fast|rest)" count="\d+" size="(\d+)"/>')


def free_chunks(info: str) -> tuple[float, float]:
    """(MB free, MB of the largest free chunk) of the main heap from ``malloc_info`` XML: the
    fast and regular free chunks' bytes (its first ``<heap>``'s totals) and the largest
    ``to`` of its bins (glibc gives each bin's smallest and largest chunk); the heap's top
    is no bin's."""
    heap = info.split("</heap>", 1)[0]
    largest = max((int(m[1]) for m in _BIN.findall(heap)), default=0)
    return sum(int(v) for v in _REST.findall(heap)) / MIB, largest / MIB


def _malloc_info_reader() -> Callable[[], str] | None:
    """A function giving glibc's ``malloc_info`` XML (through a temporary file, deleted),
    or None."""
    try:
        libc = ctypes.CDLL(None)
        info, fopen, fclose = libc.malloc_info, libc.fopen, libc.fclose
    except (OSError, AttributeError):
        return None
    fopen.restype, fopen.argtypes = ctypes.c_void_p, [ctypes.c_char_p, ctypes.c_char_p]
    info.argtypes, fclose.argtypes = [ctypes.c_int, ctypes.c_void_p], [ctypes.c_void_p]

    def read() -> str:
        fd, path = tempfile.mkstemp(suffix=".xml")
        os.close(fd)
        try:
            stream = fopen(path.encode(), b"w")
            info(0, stream)
            fclose(stream)
            with open(path) as f:
                return f.read()
        finally:
            os.unlink(path)

    return read


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / MIB


def _mark(marks: list[tuple[float, str]], t0: float, where: list[tuple[str, str]]) -> None:
    """Wrap the functions ``where`` names ((module, name): a function of the module, or
    ``Class.method``) where the module holds them, appending (seconds, '+name' / '-name')
    to ``marks`` on entry and exit (a function another module imported by name is marked
    where that module calls it: name that module)."""
    for module_name, name in where:
        owner: Any = importlib.import_module(module_name)
        *path, attr = name.split(".")
        for part in path:
            owner = getattr(owner, part)
        f = getattr(owner, attr)

        @functools.wraps(f)
        def marked(*args: Any, _f: Callable = f, _name: str = attr, **kwargs: Any) -> Any:
            marks.append((time.perf_counter() - t0, "+" + _name))
            try:
                return _f(*args, **kwargs)
            finally:
                marks.append((time.perf_counter() - t0, "-" + _name))

        setattr(owner, attr, marked)


def _fmt(v: float | None, spec: str) -> str:
    return "" if v is None else format(v, spec)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--interval", type=float, default=0.005, help="seconds between samples")
    p.add_argument("--json", help="also write the samples, marks and table here")
    p.add_argument(
        "--mark", action="append", default=[], metavar="MODULE:NAME",
        help="also mark this function (e.g. advisor.metrics.gaps:launch_rows, "
        "advisor.metrics.attribution:_HostActivity.index_threads); repeatable",
    )  # fmt: skip
    p.add_argument(
        "--holes",
        action="store_true",
        help="list where the heap grew and the free chunks inside it then",
    )
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- advisor arguments")
    args = p.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    heap = _heap_reader()
    holes = _malloc_info_reader() if args.holes and heap is not None else None
    samples: list[Sample] = []
    grew: list[Growth] = []
    marks: list[tuple[float, str]] = []
    t0 = time.perf_counter()
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            in_use, size = heap() if heap is not None else (None, None)
            now = time.perf_counter() - t0
            if holes is not None and samples and size is not None and size > samples[-1].heap:
                grew.append(Growth(now, samples[-1].heap, size, *free_chunks(holes())))
            samples.append(Sample(now, time.process_time(), in_use, size, _rss_mb()))
            done.wait(args.interval)

    import advisor.launch
    from advisor.memory import share_one_heap

    # (the console's one heap before the sampler's thread first allocates: glibc would give
    # that thread an arena of its own, which the analysis' threads could then share)
    share_one_heap()
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    extra = [tuple(m.split(":", 1)) for m in args.mark]
    _mark(marks, t0, STAGE_MARKS + extra)  # type: ignore[operator]
    exit_now = os._exit
    os._exit = lambda code: sys.exit(code)  # type: ignore[assignment]  # (entry leaves with it)
    sys.argv = ["advisor", *command]
    code: Any = 0
    try:
        advisor.launch.entry()
    except SystemExit as exc:
        code = exc.code
    finally:
        os._exit = exit_now
    end = time.perf_counter() - t0
    done.set()
    sampler.join()
    table = stage_table(samples, marks, end)
    err = sys.stderr
    err.write(f"{'from':>22} {'to':<22} {'at_s':>6} {'wall_s':>6} {'cores':>5} "
              f"{'in_use_mb':>9} {'heap_mb':>7} {'rss_mb':>6}\n")  # fmt: skip
    for s in table:
        err.write(f"{s.begins:>22} {s.ends:<22} {s.start_s:6.2f} {s.wall_s:6.2f} "
                  f"{_fmt(s.cores, '5.2f'):>5} {_fmt(s.in_use_mb, '9.0f'):>9} "
                  f"{_fmt(s.heap_mb, '7.0f'):>7} {_fmt(s.rss_mb, '6.0f'):>6}\n")  # fmt: skip
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # (Linux: KiB)
    err.write(f"total {end:.2f} s, peak RSS {peak:.0f} MB (ru_maxrss), exit code {code}\n")
    if grew:
        err.write(f"heap growth (--holes): {'at_s':>6} {'stage':<44} {'heap_mb':>15} "
                  f"{'free_mb':>7} {'largest_free_mb':>15}\n")  # fmt: skip
        for g in grew:
            span = next((f"{s.begins} .. {s.ends}" for s in table
                         if s.start_s <= g.t < s.start_s + s.wall_s), "")  # fmt: skip
            grown = f"{g.before_mb:.0f}->{g.heap_mb:.0f}"
            err.write(f"{'':22} {g.t:6.2f} {span:<44} {grown:>15} {g.free_mb:7.0f} "
                      f"{g.largest_free_mb:15.0f}\n")  # fmt: skip
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"samples": [asdict(s) for s in samples], "marks": marks,
                       "stages": [asdict(s) for s in table], "peak_rss_mb": peak,
                       "heap_growth": [asdict(g) for g in grew]}, f)  # fmt: skip
    sys.exit(code if isinstance(code, int) else 1)


if __name__ == "__main__":
    main()
