"""Mutation fuzz of every reader and the analysis behind it: no input may end in an error
other than AdvisorInputError (the CLI's exit 3, "internal error").

Seeds are the repository's own samples cut small (their first events or rows): PyTorch
profiler (Kineto) JSON, read through the compiled scanner, through msgspec alone and
gzip-compressed (the streamed read); Nsight Systems SQLite; rocpd SQLite; rocprof CSV with
its sibling files; rocprofv3 JSON. Input ``i`` is a seed (the kinds in turn) changed by one
to three mutations (tests/fuzz/mutate.py: bytes flipped, inserted, deleted, truncated; JSON
tokens and values, CSV cells and headers, SQLite cells, rows, columns and tables), drawn from
``random.Random(f"{seed}:{i}")``: the same index always gives the same input. Each input is
read by ``advisor.trace.load.load_trace`` and analysed as ``advisor analyze`` does it
(``pipeline.run_trace``, the JSON document, the terminal report), in the worker process,
under a time limit. Outcomes: ``ok`` (exit 0), ``input_error`` (AdvisorInputError, exit 2),
``bug`` (anything else, exit 3), ``timeout``, and ``harness_error`` where this driver failed
to make the input (none expected); a bug's input is kept under
``OUT/bugs/<class>/`` with what made it, its class being the exception type and where in
advisor it was raised.

The campaign (docs/fuzzing.md), in batches that can be resumed and added up::

    python tests/fuzz/fuzz_readers.py --count 100000 --workers 2 --batch 5000 --out build/fuzz
    python tests/fuzz/fuzz_readers.py --count 20 --start 31337 --out /tmp/f   # inputs 31337..

Each finished batch is written to ``OUT/batch_<seed>_<from>_<to>.json``; a run skips the
batches already there, and ``OUT/summary.json`` adds them all up. ``--sanitized SO`` loads
that build of the compiled scanner first (tests/sanitize/run.sh builds it; run under its
LD_PRELOAD and options); ``--kinds kineto,kineto_gz`` fuzzes those readers only.
``--stage read`` reads each input only (``load_trace``: the readers, no analysis), about ten
times cheaper; its files are ``batch-read_*``, ``summary-read.json`` and
``records-read.jsonl``, and input ``i`` of a seed is the same input in either stage. A bounded
run is a test (tests/fuzz/test_fuzz_readers.py); docs/fuzzing.md has the campaign's counts.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import io
import json
import multiprocessing
import os
import random
import shutil
import signal
import sqlite3
import sys
import tempfile
import time
import traceback
import warnings
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))

import mutate  # noqa: E402

KINDS = ("kineto", "kineto_msgspec", "kineto_gz", "nsys", "rocpd", "rocprof_csv", "rocprof_json")
TIME_LIMIT_S = 30.0  # CPU seconds per input (the seeds are small: a normal one takes < 1 s)
WALL_LIMIT_S = 300.0  # wall-clock backstop (something that waits without using the CPU)
GPUS = (None, None, None, "none", "H100", "MI300X")  # the --gpu given with an input
EVENTS_PER_CATEGORY = 30  # a Kineto seed keeps the first events of each category
ROWS = 40  # an SQLite seed keeps the GPU work up to its 40th kernel; a CSV its first rows


@dataclass
class Seed:
    """One small sample: its files (name -> bytes), the one to read, what it is."""

    kind: str
    name: str
    files: dict[str, bytes]
    main: str
    doc: object = None  # decoded JSON (Kineto, rocprofv3 JSON), for value mutations


@dataclass
class Record:
    index: int
    kind: str
    seed: str
    mutations: list[str]
    outcome: str  # ok | input_error | bug | timeout
    gpu: str | None = None
    error: str = ""
    where: str = ""  # bug: the innermost advisor frame
    seconds: float = 0.0


def summarize(records: list[Record], seconds: float) -> dict:
    """The counts of a batch (JSON): inputs, outcomes (overall and per kind), bug classes
    (count, the error, example indices), timeouts (indices), seconds."""
    outcomes: Counter = Counter(r.outcome for r in records)
    by_kind: dict[str, Counter] = {}
    bugs: dict[str, dict] = {}
    for r in records:
        by_kind.setdefault(r.kind, Counter())[r.outcome] += 1
        if r.outcome == "bug":
            b = bugs.setdefault(f"{r.error.split(':')[0]} at {r.where}",
                                {"count": 0, "examples": [], "error": r.error})  # fmt: skip
            b["count"] += 1
            b["examples"] = (b["examples"] + [r.index])[:5]
    return {"inputs": len(records), "seconds": round(seconds, 1), "outcomes": dict(outcomes),
            "by_kind": {k: dict(v) for k, v in sorted(by_kind.items())}, "bugs": bugs,
            "timeouts": [r.index for r in records if r.outcome == "timeout"]}  # fmt: skip


# --- seeds ------------------------------------------------------------------------------------


def _kineto_layout(doc: dict) -> bytes:
    """A Kineto document written as Kineto writes it (an event per line, two spaces in: the
    layout the memory-mapped scanner reads); other documents as plain JSON."""
    events = doc.get("traceEvents") if isinstance(doc, dict) else None
    if not isinstance(events, list):
        return json.dumps(doc).encode()
    head = {k: v for k, v in doc.items() if k != "traceEvents"}
    text = json.dumps(head)[:-1] + (", " if head else "") + '"traceEvents": [\n  '
    return (text + ",\n  ".join(json.dumps(e) for e in events) + "\n]}").encode()


def _small_kineto(path: Path) -> dict:
    doc = json.loads(gzip.decompress(path.read_bytes()))
    seen: Counter = Counter()
    kept = []
    for e in doc.get("traceEvents", []):
        key = (e.get("cat"), e.get("ph")) if isinstance(e, dict) else None
        seen[key] += 1
        if seen[key] <= EVENTS_PER_CATEGORY:
            kept.append(e)
    doc["traceEvents"] = kept
    return doc


def _small_nsys(src: Path, dst: Path) -> None:
    """A copy of the export with its GPU work and host calls up to the ROWS-th kernel."""
    shutil.copyfile(src, dst)
    with contextlib.closing(sqlite3.connect(dst, isolation_level=None)) as db:
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        row = db.execute(
            "SELECT start FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY start LIMIT 1 OFFSET ?", [ROWS]
        ).fetchone()
        for t in tables:
            cols = [r[1] for r in db.execute(f'PRAGMA table_info("{t}")')]
            if row and "start" in cols and t != "TARGET_INFO_SESSION_START_TIME":
                db.execute(f'DELETE FROM "{t}" WHERE start > ?', [row[0]])
            n = db.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0]
            if n > 400 and t != "StringIds":
                db.execute(f'DELETE FROM "{t}" WHERE rowid NOT IN (SELECT rowid FROM "{t}" '
                           "ORDER BY rowid LIMIT 400)")  # fmt: skip
        db.execute("VACUUM")


def _small_csv(data: bytes, rows: int = ROWS) -> bytes:
    lines = data.decode("utf-8").splitlines(keepends=True)
    return "".join(lines[: rows + 1]).encode()


def _small_rocprof_json(path: Path) -> dict:
    doc = json.loads(gzip.decompress(path.read_bytes()))
    for tool in doc["rocprofiler-sdk-tool"]:
        records = tool["buffer_records"]
        for k in records:
            records[k] = records[k][:ROWS]
        used = {r.get("dispatch_info", {}).get("kernel_id") for r in records["kernel_dispatch"]}
        tool["kernel_symbols"] = [s for s in tool["kernel_symbols"] if s["kernel_id"] in used]
        tool["strings"]["att_filenames"] = tool["strings"]["att_filenames"][:5]
        tool["code_objects"] = tool["code_objects"][:5]
        tool["host_functions"] = []
    return doc


def build_seeds(work: Path) -> list[Seed]:
    """The seeds, made from the samples in the repository (written under ``work``)."""
    seeds: list[Seed] = []
    kineto = [
        ROOT / "sample_traces/kineto" / f"{n}.pt.trace.json.gz"
        for n in ("h200_gemm_evidence", "h200_wave_tail", "h200_train_steps")
    ]
    kineto += sorted((ROOT / "sample_traces/why").glob("*.pt.trace.json.gz"))[:3]
    public = ROOT / "tests/data/public/kineto"
    kineto += [public / f"{n}.json.gz" for n in (
        "hta_triton_example", "hta_amd_mi250_minitoy_rocm6.2", "hta_nccl_data",
        "kineto_resnet50_dataloader_pytorch1.8", "tracelens_sglang_decode_mi300x",
        "tracelens_vllm_eager_b200", "hta_alexnet_cuda_sync")]  # fmt: skip
    for p in kineto:
        doc = _small_kineto(p)
        name = p.name.removesuffix(".json.gz")
        text = _kineto_layout(doc)
        for kind in ("kineto", "kineto_msgspec"):
            seeds.append(Seed(kind, name, {"t.pt.trace.json": text}, "t.pt.trace.json", doc))
        seeds.append(Seed("kineto_gz", name, {"t.pt.trace.json.gz": text}, "t.pt.trace.json.gz",
                          doc))  # fmt: skip
    for p in [ROOT / "sample_traces/h200x2_allreduce.sqlite",
              ROOT / "sample_traces/h200_gemm_evidence.sqlite",
              ROOT / "sample_traces/h200_tiny_graphlevel.sqlite",
              *[ROOT / "tests/data/public/nsys" / n for n in (
                  "nsysai_mock_rtx3080_nsys2026.1.sqlite",
                  "flameox_cudagraph_rtx3060_nsys2025.5.sqlite",
                  "pipit_saxpy-mpi-cuda_a100_nsys2022.2.sqlite",
                  "testcuda_4streams_rtx4060ti_nsys2026.1_a.sqlite")]]:  # fmt: skip
        small = work / f"seed_{p.name}"
        _small_nsys(p, small)
        seeds.append(Seed("nsys", p.stem, {"t.sqlite": small.read_bytes()}, "t.sqlite"))
    sys.path.insert(0, str(ROOT / "tests" / "trace"))
    from rocpd_db import RocpdWriter, write_hand

    for views in (True, False):
        db_path = work / f"seed_rocpd_{views}.db"
        db_path.unlink(missing_ok=True)
        with contextlib.closing(sqlite3.connect(db_path)) as db:
            write_hand(RocpdWriter(db, "ab12_cd34", views=views))
            db.commit()
        seeds.append(Seed("rocpd", f"hand_views_{views}", {"t.db": db_path.read_bytes()}, "t.db"))
    v3 = ROOT / "tests/data/public/rocprof/v3"
    agents = (v3 / "hpctraining_MI300A_rocm6.2.1__agent_info.excerpt.csv").read_bytes()
    groups = [
        {"r_kernel_trace.csv": (v3 / "sdk_aug2025__kernel_trace.csv").read_bytes(),
         "r_hip_trace.csv": (v3 / "sdk_aug2025__hip_trace.csv").read_bytes(),
         "r_memory_copy_trace.csv": (v3 / "sdk_aug2025__memory_copy_trace.csv").read_bytes(),
         "r_rccl_trace.csv": (v3 / "sdk_aug2025__rccl_trace.csv").read_bytes()},
        {"r_kernel_trace.csv": (v3 / "sdk_oct2024__kernel_trace.csv").read_bytes(),
         "r_memory_copy_trace.csv": (v3 / "sdk_oct2024__memory_copy_trace.csv").read_bytes()},
        {"r_kernel_trace.csv": (v3 / "hpctraining_MI300A_rocm6.2.1__kernel_trace_16col.excerpt"
                                     ".csv").read_bytes(), "r_agent_info.csv": agents},
        {"r_kernel_trace.csv": (v3 / "hpctraining_jacobi_hip__kernel_trace_18col.excerpt.csv"
                                ).read_bytes()},
        {"r_counter_collection.csv": (v3 / "sdk_aug2025__counter_collection.csv").read_bytes()},
        {"r_kernel_trace.csv.gz": _small_csv(gzip.decompress(
            (ROOT / "sample_traces/rocprof/mi350x_rank0/908_kernel_trace.csv.gz").read_bytes())),
         "r_agent_info.csv": (ROOT / "sample_traces/rocprof/mi350x_rank0/908_agent_info.csv"
                              ).read_bytes()},
    ]  # fmt: skip
    for i, files in enumerate(groups):
        main = next(n for n in files if "kernel_trace" in n or "counter" in n)
        files = {n: _small_csv(b) for n, b in files.items()}
        seeds.append(Seed("rocprof_csv", f"group{i}:{main}", files, main))
    for n in ("rocprofcompute_MI200_v1renamed__timestamps.csv",
              "rocprofcompute_MI300X_v2__timestamps.csv"):  # fmt: skip
        folder = "v1" if "v1" in n else "v2"
        data = (ROOT / "tests/data/public/rocprof" / folder / n).read_bytes()
        seeds.append(Seed("rocprof_csv", n, {"results.csv": data}, "results.csv"))
    doc = _small_rocprof_json(ROOT / "tests/data/public/rocprof/v3_json/tracelens__908_results"
                                     ".json.gz")  # fmt: skip
    text = json.dumps(doc).encode()
    seeds.append(Seed("rocprof_json", "tracelens_908", {"r.json": text}, "r.json", doc))
    seeds.append(Seed("rocprof_json", "tracelens_908_gz", {"r.json.gz": text}, "r.json.gz", doc))
    return seeds


# --- one input --------------------------------------------------------------------------------


def make_input(seed: Seed, rng: random.Random, folder: Path) -> list[str]:
    """Write ``seed`` mutated into ``folder``; returns the mutations made."""
    files = dict(seed.files)
    done: list[str] = []
    target = seed.main
    if len(files) > 1 and rng.random() < 0.25:  # a sibling file instead of the main one
        target = rng.choice(sorted(files))
    data = files[target]
    count = rng.choice([1, 1, 1, 2, 3])
    sql = seed.kind in ("nsys", "rocpd")
    if seed.doc is not None and rng.random() < 0.5:  # values of the decoded document
        doc = json.loads(json.dumps(seed.doc))
        events = doc.get("traceEvents") if isinstance(doc, dict) else None
        pool = [e for e in events if isinstance(e, dict)] if isinstance(events, list) else None
        for _ in range(count):
            done.append(mutate.json_value_op(doc, rng, pool if rng.random() < 0.7 else None))
        data = _kineto_layout(doc) if seed.kind.startswith("kineto") else json.dumps(doc).encode()
        count = 1 if rng.random() < 0.3 else 0  # and sometimes the text too
    for _ in range(0 if sql else count):
        if target.endswith((".csv", ".csv.gz")) and rng.random() < 0.6:
            text, what = mutate.csv_op(data.decode("utf-8", "replace"), rng)
            data = text.encode()
        elif target.endswith((".json", ".json.gz")) and rng.random() < 0.6:
            data, what = mutate.json_token_op(data, rng)
        else:
            data, what = mutate.bytes_op(data, rng)
        done.append(what)
    files[target] = data
    for name, content in files.items():
        (folder / name).write_bytes(gzip.compress(content, mtime=0) if name.endswith(".gz")
                                    else content)  # fmt: skip
    raw = folder / target
    if sql:  # rows, columns and tables changed with SQL, sometimes the file's bytes after
        prefer = ("CUPTI", "NVTX", "StringIds", "TARGET_INFO", "META_DATA", "rocpd")
        done += [mutate.sqlite_op(raw, rng, prefer) for _ in range(count)]
        if rng.random() < 0.2:
            data, what = mutate.bytes_op(raw.read_bytes(), rng, lo=100)
            raw.write_bytes(data)
            done.append(what)
    elif target.endswith(".gz") and rng.random() < 0.1:  # the compressed stream damaged
        data, what = mutate.bytes_op(raw.read_bytes(), rng, lo=10)
        raw.write_bytes(data)
        done.append("gz " + what)
    return done


class InputTimeout(BaseException):
    """The input ran past TIME_LIMIT_S of CPU time or WALL_LIMIT_S (a BaseException: no
    `except Exception` swallows it)."""


def _on_alarm(signum, frame) -> None:
    """Both timers disarmed, then InputTimeout: however the exception leaves run_one's
    disarming code, no timer stays armed (a SIGALRM after the handler is restored to the
    default would kill the process)."""
    _disarm()
    raise InputTimeout()


def _disarm() -> None:
    signal.setitimer(signal.ITIMER_PROF, 0)
    signal.setitimer(signal.ITIMER_REAL, 0)


def _where(exc: BaseException) -> str:
    """The innermost frame of the traceback inside advisor (else the innermost)."""
    frames = traceback.extract_tb(exc.__traceback__)
    inside = [f for f in frames if f"{os.sep}advisor{os.sep}" in f.filename]
    f = (inside or frames or [None])[-1]
    if f is None:
        return "?"
    return f"{Path(f.filename).relative_to(ROOT) if f.filename.startswith(str(ROOT)) else f.filename}:{f.lineno} ({f.name})"  # noqa: E501


def analyse(path: Path, gpu: str | None) -> None:
    """Read and analyse ``path`` as `advisor analyze` does: the trace, the analysis and
    findings, the JSON document and the terminal report."""
    from rich.console import Console

    from advisor import api
    from advisor.render import terminal

    result = api.analyze(str(path), gpu=gpu)
    result.to_json()
    terminal.render(result.analysis, result.finding_list, Console(file=io.StringIO(), width=120),
                    top=10)  # fmt: skip


def read(path: Path, gpu: str | None) -> None:
    """Read ``path`` as `advisor analyze` reads it first (``load_trace`` with the --gpu),
    nothing after: the ``read`` stage, at about a tenth of ``analyse``'s cost."""
    from advisor.trace.load import load_trace

    load_trace(path, gpu=gpu)


STAGES = ("analyze", "read")  # what each input goes through: analyse, or read only


def run_one(index: int, seeds: list[Seed], seed_text: str, work: Path, out: Path,
            stage: str = "analyze") -> Record:  # fmt: skip
    """Make input ``index`` and run it through ``stage`` (STAGES); a bug's input is copied
    under ``out/bugs``."""
    from advisor.errors import AdvisorInputError
    from advisor.trace import kineto

    rng = random.Random(f"{seed_text}:{index}")
    kinds = [k for k in KINDS if any(s.kind == k for s in seeds)]  # (all, unless --kinds)
    kind = kinds[index % len(kinds)]
    seed = rng.choice([s for s in seeds if s.kind == kind])
    folder = work / f"in_{index}"
    folder.mkdir()
    gpu = rng.choice(GPUS)
    rec = Record(index, kind, seed.name, [], "ok", gpu)
    t0 = time.perf_counter()
    scanner = os.environ.get(kineto.SCANNER_ENV)
    os.environ[kineto.SCANNER_ENV] = "0" if kind == "kineto_msgspec" else "1"
    alarm = signal.signal(signal.SIGALRM, _on_alarm)
    prof = signal.signal(signal.SIGPROF, _on_alarm)
    try:
        rec.mutations = make_input(seed, rng, folder)
    except Exception as exc:  # (a fault of this driver, not of advisor: told apart)
        rec.outcome, rec.error = "harness_error", f"{type(exc).__name__}: {exc}"[:300]
        shutil.rmtree(folder, ignore_errors=True)
        return rec
    try:
        try:  # the limit is CPU time (a loaded machine is no timeout), wall time a backstop
            signal.setitimer(signal.ITIMER_PROF, TIME_LIMIT_S)
            signal.setitimer(signal.ITIMER_REAL, WALL_LIMIT_S)
            (read if stage == "read" else analyse)(folder / seed.main, gpu)
        finally:  # (a limit reached just here is a timeout too, caught below)
            _disarm()
    except AdvisorInputError as exc:
        rec.outcome, rec.error = "input_error", str(exc)[:300]
    except InputTimeout:
        rec.outcome = "timeout"
    except Exception as exc:  # an exit 3
        rec.outcome = "bug"
        rec.error = f"{type(exc).__name__}: {str(exc)[:300]}"
        rec.where = _where(exc)
    finally:
        signal.signal(signal.SIGALRM, alarm)
        signal.signal(signal.SIGPROF, prof)
        if scanner is None:
            os.environ.pop(kineto.SCANNER_ENV, None)
        else:
            os.environ[kineto.SCANNER_ENV] = scanner
    rec.seconds = round(time.perf_counter() - t0, 3)
    if rec.outcome in ("bug", "timeout"):
        keep = out / ("bugs" if rec.outcome == "bug" else "timeouts") / _class_dir(rec) / str(index)
        if not keep.parent.exists() or len(list(keep.parent.iterdir())) < 5:
            shutil.copytree(folder, keep, dirs_exist_ok=True)
            (keep / "record.json").write_text(json.dumps(asdict(rec), indent=1))
    shutil.rmtree(folder, ignore_errors=True)
    return rec


def _class_dir(rec: Record) -> str:
    """A folder name for the bug's class (exception type and place)."""
    text = f"{rec.error.split(':')[0]}_{rec.where.split(' ')[0]}"
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in text)[:120]


# --- workers ----------------------------------------------------------------------------------

_STATE: dict = {}


def _worker_init(seeds: list[Seed], seed_text: str, out: str, sanitized: str | None,
                 stage: str = "analyze") -> None:  # fmt: skip
    if sanitized:
        sys.path.insert(0, str(ROOT / "tests" / "sanitize"))
        from kscan_swap import swap

        swap(sanitized)
    warnings.simplefilter("ignore")
    work = Path(tempfile.mkdtemp(prefix="fuzz_readers_"))
    _STATE.update(seeds=seeds, seed_text=seed_text, work=work, out=Path(out), stage=stage)


def _worker_run(index: int) -> Record:
    s = _STATE
    return run_one(index, s["seeds"], s["seed_text"], s["work"], s["out"], s["stage"])


def run_batch(indices: range, seeds: list[Seed], seed_text: str, out: Path, workers: int,
              sanitized: str | None = None, progress: bool = True,
              stage: str = "analyze") -> list[Record]:  # fmt: skip
    """Run the inputs ``indices`` through ``stage`` in ``workers`` processes (each restarted
    every 300 inputs)."""
    init = (seeds, seed_text, str(out), sanitized, stage)
    if workers <= 1:
        _worker_init(*init)
        return [_worker_run(i) for i in indices]
    ctx = multiprocessing.get_context("fork")  # (the parent runs no threads)
    records = []
    with ctx.Pool(workers, _worker_init, init, maxtasksperchild=300) as pool:
        for n, rec in enumerate(pool.imap_unordered(_worker_run, indices, chunksize=4), 1):
            records.append(rec)
            if progress and n % 500 == 0:
                bad = sum(r.outcome in ("bug", "timeout") for r in records)
                print(f"  {n}/{len(indices)} ({bad} bugs or timeouts)", file=sys.stderr)
    return sorted(records, key=lambda r: r.index)


def _add(total: dict, part: dict) -> dict:
    """Two summaries (as JSON) added up."""
    out = {"inputs": total.get("inputs", 0) + part["inputs"],
           "seconds": round(total.get("seconds", 0) + part["seconds"], 1),
           "outcomes": dict(Counter(total.get("outcomes", {})) + Counter(part["outcomes"])),
           "by_kind": {}, "bugs": dict(total.get("bugs", {})),
           "timeouts": total.get("timeouts", []) + part["timeouts"]}  # fmt: skip
    for k in set(total.get("by_kind", {})) | set(part["by_kind"]):
        out["by_kind"][k] = dict(Counter(total.get("by_kind", {}).get(k, {}))
                                 + Counter(part["by_kind"].get(k, {})))  # fmt: skip
    for key, b in part["bugs"].items():
        have = out["bugs"].get(key)
        out["bugs"][key] = b if not have else {
            "count": have["count"] + b["count"], "error": have["error"],
            "examples": (have["examples"] + b["examples"])[:5]}  # fmt: skip
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--count", type=int, default=1000, help="inputs to run")
    ap.add_argument("--start", type=int, default=0, help="index of the first input")
    ap.add_argument("--seed", default="advisor-fuzz-1", help="the campaign's random seed")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=5000, help="inputs per batch file")
    ap.add_argument("--out", type=Path, default=ROOT / "build" / "fuzz")
    ap.add_argument("--sanitized", help="a sanitizer build of the scanner to load first")
    ap.add_argument("--stage", choices=STAGES, default="analyze",
                    help="analyze: read and analyse each input as `advisor analyze` does; "
                    "read: read it only (load_trace), about 10x cheaper")  # fmt: skip
    ap.add_argument(
        "--kinds",
        default=",".join(KINDS),
        help="the reader kinds to fuzz, comma-separated (default: all)",
    )
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="fuzz_seeds_") as tmp:
        seeds = [s for s in build_seeds(Path(tmp)) if s.kind in args.kinds.split(",")]
    print(f"{len(seeds)} seeds: " + ", ".join(
        f"{k} {sum(s.kind == k for s in seeds)}" for k in KINDS), file=sys.stderr)  # fmt: skip
    end = args.start + args.count
    prefix = "batch" if args.stage == "analyze" else f"batch-{args.stage}"  # (kept apart)
    for lo in range(args.start, end, args.batch):
        hi = min(lo + args.batch, end)
        done = args.out / f"{prefix}_{args.seed}_{lo}_{hi}.json"
        if done.exists():
            continue
        t0 = time.perf_counter()
        print(f"inputs {lo}..{hi - 1}", file=sys.stderr)
        records = run_batch(range(lo, hi), seeds, args.seed, args.out, args.workers,
                            args.sanitized, stage=args.stage)  # fmt: skip
        done.write_text(json.dumps(summarize(records, time.perf_counter() - t0), indent=1))
        with (args.out / f"records{prefix[5:]}.jsonl").open("a") as fh:
            for r in records:
                if r.outcome != "ok" or r.index % 50 == 0:
                    fh.write(json.dumps(asdict(r)) + "\n")
    total: dict = {}
    for f in sorted(args.out.glob(f"{prefix}_{args.seed}_*.json")):
        total = _add(total, json.loads(f.read_text()))
    (args.out / f"summary{prefix[5:]}.json").write_text(json.dumps(total, indent=1))
    print(json.dumps({k: total[k] for k in ("inputs", "outcomes", "seconds")}), file=sys.stderr)
    for key, b in sorted(total["bugs"].items(), key=lambda kv: -kv[1]["count"]):
        print(f"BUG x{b['count']}: {key}: {b['error'][:200]} (e.g. input {b['examples'][0]})",
              file=sys.stderr)  # fmt: skip
    failed = total["bugs"] or total["timeouts"] or total["outcomes"].get("harness_error")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
