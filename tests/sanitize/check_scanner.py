"""The compiled Kineto scanner over real and damaged events, for the sanitizer build
(tests/sanitize/run.sh runs this under AddressSanitizer and UndefinedBehaviorSanitizer):

- every Kineto fixture (sample_traces/**/*.json.gz, tests/data/public/kineto/*): its whole
  events array scanned from a buffer of exactly its size (a read past the end is a report),
  read-only and writable, against msgspec's tables of the same bytes; then read by the
  reader as a plain file (memory-mapped, in small chunks, by two threads) and gzipped
  (streamed), against the reader with msgspec alone;
- the bad-input corpus's Kineto cases (tests/bad_inputs/make_corpus.py), read by the reader:
  a trace or AdvisorInputError, nothing else;
- a mutation fuzz: windows of events from the fixtures with bytes flipped, inserted, deleted,
  truncated, JSON tokens inserted and literals replaced (tests/fuzz/mutate.py), scanned
  from exact buffers, whole and in regions (start and stop valid, or not: a ValueError), and
  compared with msgspec: the scanner declines or agrees, never differs.

    python tests/sanitize/check_scanner.py --so build/sanitize/default/_kscan...so --fuzz 3000

Exit 1 on a disagreement (the input is written under --failures) or an unexpected error.
"""

from __future__ import annotations

import argparse
import ctypes
import gzip
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path[:0] = [str(HERE), str(ROOT / "tests" / "fuzz"), str(ROOT / "tests" / "bad_inputs")]

from kscan_swap import swap  # noqa: E402

FIXTURES = sorted((ROOT / "sample_traces").glob("**/*.json.gz")) + sorted(
    (ROOT / "tests" / "data" / "public" / "kineto").glob("*")
)
BOUNDARY = b",\n  {"


class Check:
    """Counts and failures of one run."""

    def __init__(self, failures: Path) -> None:
        self.failures = failures
        self.problems: list[str] = []
        self.counts: dict[str, int] = {}

    def count(self, what: str, n: int = 1) -> None:
        self.counts[what] = self.counts.get(what, 0) + n

    def fail(self, what: str, data: bytes | None = None) -> None:
        if data is not None:
            self.failures.mkdir(parents=True, exist_ok=True)
            path = self.failures / f"input_{len(self.problems)}.json"
            path.write_bytes(data)
            what += f" (input: {path})"
        self.problems.append(what)
        print(f"FAIL {what}", file=sys.stderr)


def exact(data: bytes, readonly: bool):
    """``data`` in a buffer of exactly its size (ctypes: its own allocation, no terminating
    byte after it): read-only (a memoryview) or writable (the ctypes array)."""
    buf = (ctypes.c_char * max(len(data), 1)).from_buffer_copy(data or b"\0")
    view = memoryview(buf).cast("B")[: len(data)]
    return view.toreadonly() if readonly else view


def _tables(chunk) -> dict:
    from advisor.trace import kineto

    collect = kineto._Collector()
    collect.append(chunk)
    return {k: v for k, v in collect.tables().items() if v is not None}


def _reference(data: bytes):
    """(msgspec's tables of a JSON array of events, the values it counted as malformed: a
    warning per table and field), or None where it rejects the bytes."""
    import msgspec

    from advisor.trace import kineto

    try:
        chunk = kineto._decode_events(kineto._EVENTS.decode(data))
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return None
    return _tables(chunk), dict(chunk.bad)


def _same(a: dict, b: dict) -> str:
    """'' when the two sets of tables are equal, else what differs."""
    import pandas as pd

    if set(a) != set(b):
        return f"tables {sorted(a)} vs {sorted(b)}"
    for name in a:
        try:
            pd.testing.assert_frame_equal(a[name], b[name], check_exact=True)
        except AssertionError as exc:
            return f"{name}: {str(exc)[:300]}"
    return ""


def scan_against_msgspec(data: bytes, check: Check, what: str, ref="unset") -> bool:
    """Scan ``data`` (a JSON array of events) from exact buffers, read-only and writable;
    where the scanner takes it, msgspec must too, with the same tables. True when taken."""
    from advisor.trace import kineto

    if ref == "unset":
        ref = _reference(data)
    taken = False
    for readonly in (True, False):
        found = kineto._scan_events(exact(data, readonly))
        if found is None or found[1] != len(data):
            continue
        taken = True
        if ref is None:
            check.fail(f"{what}: the scanner takes bytes msgspec rejects", data)
            return taken
        tables, counted = ref
        if counted:  # (the scanner counts nothing: it must decline what msgspec counts)
            check.fail(f"{what}: the scanner takes values msgspec counts as malformed: "
                       f"{counted}", data)  # fmt: skip
            return taken
        differs = _same(_tables(found[0]), tables)
        if differs:
            check.fail(f"{what}: scanner and msgspec differ: {differs}", data)
            return taken
    return taken


def _read_both(path: Path, check: Check, what: str) -> None:
    """The reader with the scanner (small chunks, two threads) and with msgspec alone: the
    same tables, or the same kind of error."""
    from advisor.errors import AdvisorInputError
    from advisor.trace import kineto

    reads = []
    for flag in ("1", "0"):
        os.environ[kineto.SCANNER_ENV] = flag
        try:
            reads.append(kineto.read_kineto(path, processes=2))
        except AdvisorInputError as exc:
            reads.append(type(exc).__name__)
        finally:
            os.environ.pop(kineto.SCANNER_ENV)
    a, b = reads
    if isinstance(a, str) or isinstance(b, str):  # (an error: the same kind both ways)
        if a != b:
            check.fail(f"{what}: read as {a!r} with the scanner, {b!r} without")
        return
    differs = _same(
        {n: getattr(a, n) for n in ("kernels", "api", "memcpy", "memset", "nvtx")},
        {n: getattr(b, n) for n in ("kernels", "api", "memcpy", "memset", "nvtx")},
    )
    if differs:
        check.fail(f"{what}: the reader differs with and without the scanner: {differs}")


def fixtures(check: Check) -> list[bytes]:
    """Every Kineto fixture (see the module docstring); returns their events arrays."""
    import msgspec

    from advisor.trace import kineto

    arrays = []
    with tempfile.TemporaryDirectory(prefix="kscan_fixtures_") as tmp:
        for f in FIXTURES:
            text = gzip.decompress(f.read_bytes()) if f.name.endswith(".gz") else f.read_bytes()
            if not kineto.looks_like_kineto(text[:65536]):
                continue
            check.count("fixtures")
            events = bytes(msgspec.json.decode(text, type=dict[str, msgspec.Raw])["traceEvents"])
            arrays.append(events)
            if not scan_against_msgspec(events, check, f.name):
                check.count("fixtures declined")
            plain = Path(tmp) / f.name.removesuffix(".gz")
            plain.write_bytes(text)
            kineto.SCAN_CHUNK_BYTES = 1 << 20
            _read_both(plain, check, f.name)
            zipped = Path(tmp) / (plain.name + ".gz")
            zipped.write_bytes(gzip.compress(text, compresslevel=1))
            _read_both(zipped, check, f.name + " (gzip)")
            plain.unlink()
            zipped.unlink()
    return arrays


def corpus(check: Check) -> None:
    """The bad-input corpus's Kineto cases, read by the reader (both ways)."""
    from make_corpus import build

    from advisor.errors import AdvisorInputError
    from advisor.trace import kineto
    from advisor.trace.load import load_trace

    with tempfile.TemporaryDirectory(prefix="kscan_corpus_") as tmp:
        for case in build(Path(tmp) / "corpus"):
            p = case.path
            if p is None or not p.is_file() or not p.name.endswith((".json", ".json.gz")):
                continue
            try:
                head = kineto.read_head(p)
            except AdvisorInputError:
                head = b""
            if not kineto.looks_like_kineto(head) and "kineto" not in p.name:
                continue
            check.count("corpus cases")
            for flag in ("1", "0"):
                os.environ[kineto.SCANNER_ENV] = flag
                try:
                    load_trace(p)
                except AdvisorInputError:
                    pass
                except Exception as exc:  # an exit 3
                    check.fail(f"corpus {p.name}: {type(exc).__name__}: {exc}")
                finally:
                    os.environ.pop(kineto.SCANNER_ENV)


def fuzz(check: Check, arrays: list[bytes], count: int, seed: str) -> None:
    """``count`` mutated windows of the fixtures' events (see the module docstring)."""
    import msgspec
    import mutate

    from advisor.trace import _kscan, kineto

    windows = []
    for events in arrays:  # (the events of each fixture, as their JSON text)
        raw = msgspec.json.decode(events, type=list[msgspec.Raw])[:20000]
        windows.append([bytes(r) for r in raw])
    ops = (mutate.json_literal_swap, mutate.json_token_op, mutate.bytes_op)
    for i in range(count):
        rng = random.Random(f"{seed}:{i}")
        raws = rng.choice(windows)
        a = rng.randrange(len(raws))
        data = b"[\n  " + b",\n  ".join(raws[a : a + rng.randrange(1, 40)]) + b"\n]"
        for _ in range(rng.choice([1, 1, 2, 3])):
            data, _what = rng.choice(ops)(data, rng)
        check.count("fuzz inputs")
        if scan_against_msgspec(data, check, f"fuzz input {i}"):
            check.count("fuzz inputs taken by the scanner")
        # regions: from the '[' or a cut's comma to a later cut (or the end), and bad ones
        region_cuts = [0, *_find_all(data, BOUNDARY)]
        buf = exact(data, rng.random() < 0.5)
        for _ in range(3):
            start = rng.choice(region_cuts)
            stop = rng.choice([-1, len(data), *[c for c in region_cuts if c > start]])
            if rng.random() < 0.3:
                start, stop = rng.randrange(-3, len(data) + 4), rng.randrange(-3, len(data) + 4)
            try:
                _kscan.scan(buf, kineto.SCAN_CATEGORIES, kineto.SCAN_MODES, start, stop, None)
            except ValueError:
                ok = (
                    not (0 <= start <= len(data))
                    or stop < -1
                    or stop > len(data)
                    or (stop >= 0 and stop < start)
                )
                if not ok:
                    check.fail(f"fuzz input {i}: ValueError for start {start}, stop {stop}", data)
            else:
                if (
                    not (0 <= start <= len(data))
                    or stop < -1
                    or stop > len(data)
                    or (0 <= stop < start)
                ):
                    check.fail(f"fuzz input {i}: start {start}, stop {stop} taken", data)
            check.count("region scans")


def _find_all(data: bytes, needle: bytes):
    at = data.find(needle)
    while at >= 0:
        yield at
        at = data.find(needle, at + 1)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--so", required=True, help="the sanitizer build of _kscan to load")
    ap.add_argument("--fuzz", type=int, default=3000, help="mutated inputs")
    ap.add_argument("--seed", default="kscan-1")
    ap.add_argument("--failures", type=Path, default=ROOT / "build" / "sanitize" / "failures")
    args = ap.parse_args(argv)
    module = swap(args.so)
    print(f"scanner: {module.__file__}", file=sys.stderr)
    import warnings

    warnings.simplefilter("ignore")
    check = Check(args.failures)
    t0 = time.perf_counter()
    arrays = fixtures(check)
    t1 = time.perf_counter()
    corpus(check)
    t2 = time.perf_counter()
    fuzz(check, arrays, args.fuzz, args.seed)
    t3 = time.perf_counter()
    check.counts["seconds"] = f"fixtures {t1 - t0:.0f}, corpus {t2 - t1:.0f}, fuzz {t3 - t2:.0f}"
    print(json.dumps(check.counts), file=sys.stderr)
    if check.problems:
        print(f"{len(check.problems)} problem(s)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
