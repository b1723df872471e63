"""Build the hostile-input corpus: damaged and hostile traces, configs and output paths.

    python tests/bad_inputs/make_corpus.py OUT_DIR      # writes the files, prints one line per case

Every case is derived from the real samples where it can be (the H200 2-GPU nsys export,
the public rocprofv3 kernel trace); the rest are small hand-made files. ``build(out)``
returns the cases; tests/bad_inputs/test_corpus.py runs each through the CLI and checks the
guarantees (exit 0 or 2, one line naming the file, no traceback, no partial output, inputs
unchanged). Cases that need the running process (a writer holding a lock) set ``hold``.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import os
import random
import shutil
import sqlite3
import sys
import zlib
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NSYS = ROOT / "sample_traces" / "h200x2_allreduce.sqlite"
ROCPROF = ROOT / "tests" / "data" / "public" / "rocprof" / "v3"
ROCPROF_KERNELS = ROCPROF / "sdk_aug2025__kernel_trace.csv"
KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"
COUNTERS = ROOT / "sample_traces" / "counters"  # the issue-29 Nsight Compute captures


@dataclass
class Case:
    """One corpus entry: the command to run (``{f}`` is the case file), the exit codes
    allowed, and the text the one-line error must contain when it exits 2."""

    name: str
    args: list[str]
    codes: tuple[int, ...] = (2,)
    names: str = ""  # the error line must contain this (default: the file's name)
    says: str = ""  # ... and this (what is wrong, in the user's words)
    outputs: list[str] = field(default_factory=list)  # must not exist after a failure
    hold: str = ""  # "lock": another connection holds a write lock while the case runs
    warns: str = ""  # on exit 0, a JSON warning must contain this (damage must be told)
    path: Path | None = None


def _sql(path: Path, *statements: str) -> None:
    with closing(sqlite3.connect(path)) as db:
        for s in statements:
            db.execute(s)
        db.commit()


def _nsys(out: Path, name: str, *statements: str) -> Path:
    """A copy of the sample export with ``statements`` applied."""
    p = out / name
    shutil.copyfile(NSYS, p)
    if statements:
        _sql(p, *statements)
    return p


def _bytes(out: Path, name: str, data: bytes) -> Path:
    p = out / name
    p.write_bytes(data)
    return p


def _raw(out: Path, name: str, data: bytes, args: list[str], says: str = "") -> Case:
    """A case whose file holds ``data`` as given (expected: exit 2, the line saying ``says``)."""
    return Case(name, args, says=says, path=_bytes(out, name, data))


def _gzip_breaking(data: bytes) -> bytes:
    """``data`` gzip-compressed up to a point, then a deflate block of a type that does not
    exist: the stream starts well and breaks (zlib.error while reading)."""
    deflate = zlib.compressobj(6, zlib.DEFLATED, 31)  # (31: with the gzip header)
    return deflate.compress(data) + deflate.flush(zlib.Z_FULL_FLUSH) + b"\x07" + bytes(64)


def _nested(depth: int) -> bytes:
    return b'{"a": ' * depth + b"1" + b"}" * depth


def _flip(data: bytes, count: int, seed: int, lo: int = 0) -> bytes:
    rng = random.Random(seed)
    b = bytearray(data)
    for _ in range(count):
        i = rng.randrange(lo, len(b))
        b[i] ^= 1 << rng.randrange(8)
    return bytes(b)


def _sqlite_cases(out: Path) -> list[Case]:
    raw = NSYS.read_bytes()
    k = KERNEL
    analyze = ["analyze", "{f}", "--format", "json"]
    ok_or_bad = (0, 2)
    cases = [
        _raw(out, "truncated_half.sqlite", raw[: len(raw) // 2], analyze),
        _raw(out, "truncated_100_bytes.sqlite", raw[:100], analyze),
        _raw(out, "first_page_only.sqlite", raw[:4096], analyze),
        Case(
            "bitflip_header.sqlite",
            analyze,
            ok_or_bad,
            path=_bytes(
                out, "bitflip_header.sqlite", raw[:16] + _flip(raw[16:100], 8, 1) + raw[100:]
            ),
        ),
    ]
    for seed in range(1, 7):  # random flips anywhere past the header
        name = f"bitflip_random_{seed}.sqlite"
        cases.append(
            Case(name, analyze, ok_or_bad, path=_bytes(out, name, _flip(raw, 200, seed, 100)))
        )
    cases.append(
        Case(
            "bitflip_dense_tail.sqlite",
            analyze,
            ok_or_bad,
            path=_bytes(out, "bitflip_dense_tail.sqlite", _flip(raw, 5000, 99, len(raw) // 2)),
        )
    )
    # a WAL-mode copy whose changes sit unmerged in the -wal file beside it
    wal = out / "wal_unmerged.sqlite"
    shutil.copyfile(NSYS, wal)
    with closing(sqlite3.connect(wal)) as db:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA wal_autocheckpoint=0")
        db.execute(f"DELETE FROM {k} WHERE rowid % 2 = 0")
        db.commit()
        shutil.copyfile(wal, out / "wal_copy.sqlite")
        shutil.copyfile(str(wal) + "-wal", out / "wal_copy.sqlite-wal")
    os.remove(wal)
    for side in ("-wal", "-shm"):
        if Path(str(wal) + side).exists():
            os.remove(str(wal) + side)
    cases.append(
        Case(
            "wal_copy.sqlite", analyze, (0,), path=out / "wal_copy.sqlite", warns="write-ahead log"
        )
    )
    cases.append(
        Case(
            "locked_by_writer.sqlite",
            analyze,
            (0,),
            hold="lock",
            path=_nsys(out, "locked_by_writer.sqlite"),
        )
    )
    dropped = {
        "no_kernel_table.sqlite": [f"DROP TABLE {k}"],
        "no_stringids.sqlite": ["DROP TABLE StringIds"],
        "no_metadata.sqlite": ["DROP TABLE META_DATA_EXPORT"],
        "kernel_columns_dropped.sqlite": [
            f"ALTER TABLE {k} DROP COLUMN gridX",
            f"ALTER TABLE {k} DROP COLUMN registersPerThread",
        ],
        "empty_kernel_table.sqlite": [f"DELETE FROM {k}"],
        "all_end_before_start.sqlite": [f"UPDATE {k} SET end = start - 100"],
    }
    for name, sql in dropped.items():
        cases.append(Case(name, analyze, path=_nsys(out, name, *sql)))
    loose = [
        f"CREATE TABLE _t AS SELECT * FROM {k}",
        f"DROP TABLE {k}",
        f"ALTER TABLE _t RENAME TO {k}",
    ]
    survivable = {
        "no_runtime_table.sqlite": ["DROP TABLE CUPTI_ACTIVITY_KIND_RUNTIME"],
        "nulls_in_kernels.sqlite": [
            *loose,  # the export declares NOT NULL: drop that first
            f"UPDATE {k} SET start = NULL WHERE rowid % 7 = 0",
            f"UPDATE {k} SET gridX = NULL WHERE rowid % 5 = 0",
            f"UPDATE {k} SET correlationId = NULL WHERE rowid % 3 = 0",
        ],
        "some_end_before_start.sqlite": [f"UPDATE {k} SET end = start - 100 WHERE rowid % 4 = 0"],
        "timestamps_near_2p63.sqlite": [
            f"UPDATE {k} SET start = 9223372036854775000, "
            "end = 9223372036854775800 WHERE rowid % 6 = 0"
        ],
        "negative_timestamps.sqlite": [f"UPDATE {k} SET start = -start WHERE rowid % 9 = 0"],
        "negative_devices.sqlite": [f"UPDATE {k} SET deviceId = -1 WHERE rowid % 5 = 0"],
        "fractional_grids.sqlite": [f"UPDATE {k} SET gridX = gridX + 0.5 WHERE rowid % 3 = 0"],
        "all_kernels_at_one_instant.sqlite": [f"UPDATE {k} SET start = 1000, end = 5000"],
        "duplicated_rows.sqlite": [f"INSERT INTO {k} SELECT * FROM {k}"],
        "huge_grids.sqlite": [
            f"UPDATE {k} SET gridX = 2147483647, gridY = 65535, gridZ = 65535 WHERE rowid % 3 = 0"
        ],
        "zero_grids.sqlite": [f"UPDATE {k} SET gridX = 0, blockX = 0"],
        "absurd_resources.sqlite": [
            f"UPDATE {k} SET registersPerThread = 100000, staticSharedMemory = -5, blockX = 65536"
        ],
        "text_in_number_columns.sqlite": [
            f"UPDATE {k} SET registersPerThread = 'abc', gridY = 'x' WHERE rowid % 2 = 0"
        ],
        "zero_sm_count.sqlite": ["UPDATE TARGET_INFO_GPU SET smCount = 0"],
        "unicode_kernel_names.sqlite": [
            "UPDATE StringIds SET value = value || ' ∑ναμε 名前 🚀 ' || char(8238) || 'rtl' "
            f"WHERE id IN (SELECT shortName FROM {k})"
        ],
        "names_10kB.sqlite": [
            f"UPDATE StringIds SET value = printf('%.10000c', 'k') || value "
            f"WHERE id IN (SELECT shortName FROM {k})"
        ],
    }
    told = {
        "no_runtime_table.sqlite": "no CUDA runtime API",
        "nulls_in_kernels.sqlite": "kernel launches dropped",
        "some_end_before_start.sqlite": "kernel launches dropped",
        "timestamps_near_2p63.sqlite": "kernel launches dropped",
        "negative_timestamps.sqlite": "kernel launches dropped",
        "negative_devices.sqlite": "kernel launches dropped",
        "fractional_grids.sqlite": "impossible launch configurations",
        "all_kernels_at_one_instant.sqlite": "repeat another's device, stream, start and end",
        "duplicated_rows.sqlite": "repeat another's device, stream, start and end",
        "huge_grids.sqlite": "impossible launch configurations",
        "zero_grids.sqlite": "impossible launch configurations",
        "absurd_resources.sqlite": "impossible launch configurations",
        "text_in_number_columns.sqlite": "non-numeric",
        "zero_sm_count.sqlite": "reports no SM count",
    }
    for name, sql in survivable.items():
        cases.append(
            Case(name, analyze, (0,), path=_nsys(out, name, *sql), warns=told.get(name, ""))
        )
    # no usable GPU facts: analysed (exit 0) with a warning naming the --gpu to pass
    for name, sql in (
        ("no_target_info.sqlite", "DROP TABLE TARGET_INFO_GPU"),
        ("zero_sm_count_unknown_gpu.sqlite",
         "UPDATE TARGET_INFO_GPU SET smCount = 0, name = 'Mystery GPU 9'"),
    ):  # fmt: skip
        cases.append(Case(name, analyze, (0,), path=_nsys(out, name, sql), warns="--gpu NAME"))
    other = out / "not_an_nsys_export.sqlite"
    _sql(other, "CREATE TABLE t (a INT)", "INSERT INTO t VALUES (1)")
    empty_db = out / "empty_database.sqlite"
    _sql(empty_db, "PRAGMA user_version = 1")
    cases += [
        Case(other.name, analyze, path=other),
        Case(empty_db.name, analyze, path=empty_db),
        _raw(out, "zero_bytes.sqlite", b"", analyze),
        _raw(out, "random_binary.sqlite", random.Random(5).randbytes(50_000), analyze),
        _raw(
            out,
            "sqlite_magic_then_garbage.sqlite",
            b"SQLite format 3\x00" + random.Random(6).randbytes(20_000),
            analyze,
        ),
    ]
    return cases


def _csv_lines() -> list[str]:
    return ROCPROF_KERNELS.read_text().splitlines()


def _csv(out: Path, name: str, lines: list[str], newline: str = "\n", prefix: bytes = b"") -> Path:
    p = out / name
    p.write_bytes(prefix + (newline.join(lines) + newline).encode("utf-8"))
    return p


def _set_column(lines: list[str], column: str, value: str, every: int = 1) -> list[str]:
    head = lines[0].split(",")
    i = head.index(f'"{column}"')
    out = [lines[0]]
    for n, line in enumerate(lines[1:]):
        cells = _cells(line)  # the kernel name holds commas: split outside quotes
        if n % every == 0:
            cells[i] = value
        out.append(",".join(cells))
    return out


def _cells(line: str) -> list[str]:
    """Split one CSV line into its raw cells (quoted cells keep their quotes)."""
    cells, cur, quoted = [], "", False
    for ch in line:
        if ch == '"':
            quoted = not quoted
        if ch == "," and not quoted:
            cells.append(cur)
            cur = ""
        else:
            cur += ch
    cells.append(cur)
    return cells


def _csv_cases(out: Path) -> list[Case]:
    lines = _csv_lines()
    analyze = ["analyze", "{f}", "--gpu", "MI300X", "--format", "json"]
    head = _cells(lines[0])
    drop_end = head.index('"End_Timestamp"')
    long = '"' + "k" * 10_000 + ' ∑ναμε 名前 🚀"'
    name_col = head.index('"Kernel_Name"')
    cases = [
        _raw(out, "csv_zero_bytes.csv", b"", analyze),
        _raw(out, "csv_random_binary.csv", random.Random(7).randbytes(30_000), analyze),
        Case(
            "csv_bad_quoting.csv",
            analyze,
            (0, 2),
            path=_csv(
                out, "csv_bad_quoting.csv", [lines[0], *[x.replace('"', "", 3) for x in lines[1:]]]
            ),
        ),
        Case(
            "csv_bom.csv",
            analyze,
            (0,),
            path=_csv(out, "csv_bom.csv", lines, prefix=b"\xef\xbb\xbf"),
        ),
        Case("csv_crlf.csv", analyze, (0,), path=_csv(out, "csv_crlf.csv", lines, newline="\r\n")),
        Case(
            "csv_missing_end_column.csv",
            analyze,
            path=_csv(
                out,
                "csv_missing_end_column.csv",
                [",".join(c for i, c in enumerate(_cells(x)) if i != drop_end) for x in lines],
            ),
        ),
        Case(
            "csv_extra_columns.csv",
            analyze,
            (0,),
            path=_csv(
                out,
                "csv_extra_columns.csv",
                [lines[0] + ',"Extra","More"'] + [x + ",1,zz" for x in lines[1:]],
            ),
        ),
        Case(
            "csv_short_rows.csv",
            analyze,
            (0, 2),
            path=_csv(
                out, "csv_short_rows.csv", [lines[0]] + [",".join(_cells(x)[:5]) for x in lines[1:]]
            ),
        ),
        Case("csv_header_only.csv", analyze, path=_csv(out, "csv_header_only.csv", lines[:1])),
        Case(
            "csv_long_unicode_names.csv",
            analyze,
            (0,),
            path=_csv(
                out,
                "csv_long_unicode_names.csv",
                [lines[0]]
                + [
                    ",".join(c if i != name_col else long for i, c in enumerate(_cells(x)))
                    for x in lines[1:]
                ],
            ),
        ),
        _raw(out, "csv_not_gzip.csv.gz", b"plain text, not gzip\n", analyze),
        _raw(out, "rocprof_truncated.json", b'{"rocprofiler-sdk-tool": [{"agents": [', analyze),
        _raw(out, "rocprof_not_json.json", b"\x00\x01 not json", analyze),
        _raw(out, "rocprof_wrong_shape.json", b"[1, 2, 3]", analyze),
        _raw(out, "rocprof_nested_5000.json", b'{"rocprofiler-sdk-tool": ' + _nested(5000) + b"}",
             analyze, says="nests deeper than the JSON decoder follows"),
        _raw(out, "csv_deflate_breaks.csv.gz", _gzip_breaking("\n".join(lines).encode()),
             analyze, says="damaged gzip data"),
    ]  # fmt: skip
    edits = [  # (file, column, new value, every n-th row, exit codes, warning on exit 0)
        ("csv_empty_timestamps.csv", "Start_Timestamp", "", 2, (0,), "kernel launches dropped"),
        ("csv_end_before_start.csv", "End_Timestamp", "5", 3, (0,), "kernel launches dropped"),
        ("csv_text_in_numbers.csv", "Grid_Size_X", "abc", 2, (2,), ""),
        ("csv_huge_grid.csv", "Grid_Size_X", "4294967295", 2, (0,), ""),
        ("csv_zero_workgroup.csv", "Workgroup_Size_X", "0", 2, (0,), "impossible launch"),
        ("csv_timestamps_near_2p63.csv", "End_Timestamp", "9223372036854775807", 2, (0,),
         "kernel launches dropped"),
    ]  # fmt: skip
    for name, column, value, every, codes, warns in edits:
        path = _csv(out, name, _set_column(lines, column, value, every))
        cases.append(Case(name, analyze, codes, warns=warns, path=path))
    return cases


def _config_cases(out: Path) -> list[Case]:
    bomb = ["a: &l0 [x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 9):
        bomb.append(f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]")
    texts = {
        "rules_alias_bomb.yaml": "\n".join(bomb) + "\n",
        "rules_deep_nesting.yaml": "rules: " + "[" * 20000 + "]" * 20000 + "\n",
        "rules_over_1MiB.yaml": "rules: []\n# " + "x" * (1 << 21) + "\n",
        "rules_empty.yaml": "",
        "rules_binary.yaml": None,
        "rules_not_a_mapping.yaml": "- just\n- a list\n",
        "rules_unknown_metric.yaml": "rules:\n  - id: x\n    title: t\n    scope: kernels\n"
        "    strategy: split_k\n    when: no_such_metric > 1\n    savings: 0\n"
        "    message: m\n    rationale: r\n    watch_for: w\n",
    }
    cases = []
    for name, text in texts.items():
        p = out / name
        p.write_bytes(random.Random(8).randbytes(4000) if text is None else text.encode())
        cases.append(Case(name, ["rules", "validate", "{f}"], path=p))
    cases += _emit_rule_cases(out)
    nsys = str(NSYS)
    for name, text in {
        "gate_alias_bomb.yaml": "\n".join(bomb) + "\n",
        "gate_deep_nesting.yaml": "metrics: " + "{a: " * 5000 + "1" + "}" * 5000 + "\n",
        "gate_not_a_mapping.yaml": "- a\n- b\n",
        "gate_bad_field.yaml": "metrics:\n  gpu_busy_ns: {max_regression: lots}\n",
    }.items():
        p = out / name
        p.write_text(text)
        cases.append(
            Case(name, ["gate", "--baseline", nsys, "--candidate", nsys, "--config", "{f}"], path=p)
        )
    return cases


def _emit_rule_cases(out: Path) -> list[Case]:
    """User rules asking the config emitters for what they cannot write (refused at load, by
    `rules validate` and by `analyze --rules`), and a warp-specialization emit for GPUs
    without the capability or room for its tile (a finding without a config, exit 0)."""
    rule = ("rules:\n  - id: {id}\n    scope: {scope}\n    when: {when}\n    savings: {savings}\n"
            "    strategy: {strategy}\n    emit: {{kind: {kind}}}\n")  # fmt: skip
    gemm = dict(scope="kernels", when="gemm and has_shape", savings="total_ns")
    texts = {
        "rules_emit_gemm_unknown_strategy.yaml": rule.format(
            id="my-gemm", strategy="my_own_strategy", kind="gemm", **gemm),
        "rules_emit_grid_stride_on_regions.yaml": rule.format(
            id="my-loop", scope="regions", when="idle_ns > 0", savings="idle_ns",
            strategy="my_loop", kind="grid_stride"),
        "rules_warp_specialization_anywhere.yaml": rule.format(
            id="ws-anywhere", strategy="warp_specialization", kind="gemm", **gemm),
    }  # fmt: skip
    paths = {}
    for name, text in texts.items():
        paths[name] = out / name
        paths[name].write_text(text)
    trace = str(ROOT / "sample_traces" / "h200_scheduling.sqlite")  # a GEMM whose shape is given
    emit_dir = out.parent / f"{out.name}_outputs"

    def analyze(into: str) -> list[str]:
        return ["analyze", trace, "--shape", "tail_gemm=896x4864x8192", "--rules", "{f}",
                "--emit", str(emit_dir / into), "--format", "json"]  # fmt: skip

    cases = []
    for name in list(texts)[:2]:
        says = "field 'emit.kind': kind "
        cases.append(Case(name, ["rules", "validate", "{f}"], says=says, path=paths[name]))
        cases.append(Case(f"analyze_{name}", analyze(name), says=says, names=name,
                          outputs=[str(emit_dir / name)], path=paths[name]))  # fmt: skip
    ws = paths["rules_warp_specialization_anywhere.yaml"]
    for gpu in ("T4", "RTX-5090"):  # no capability; capability 12 but no room for the tile
        cases.append(Case(f"warp_specialization_on_{gpu}", [*analyze(gpu), "--gpu", gpu], (0,),
                          path=ws))  # fmt: skip
    return cases


def _path_cases(out: Path) -> list[Case]:
    """Symlinks, directories, special files, permissions and output paths."""
    analyze = ["analyze", "{f}", "--format", "json"]
    target = _nsys(out, "link_target.sqlite")
    cases = []
    for name, make in {
        "symlink_to_trace.sqlite": lambda p: p.symlink_to(target),
        "dangling_symlink.sqlite": lambda p: p.symlink_to(out / "does_not_exist.sqlite"),
        "symlink_loop.sqlite": lambda p: p.symlink_to(p),
        "directory_named_trace.sqlite": lambda p: p.mkdir(),
        "fifo.sqlite": lambda p: os.mkfifo(p),
    }.items():
        p = out / name
        make(p)
        codes = (0,) if name == "symlink_to_trace.sqlite" else (2,)
        cases.append(Case(name, analyze, codes, path=p))
    unreadable = _nsys(out, "unreadable.sqlite")
    unreadable.chmod(0)
    root = hasattr(os, "geteuid") and os.geteuid() == 0  # root reads anything
    cases.append(Case("unreadable.sqlite", analyze, (0,) if root else (2,), path=unreadable))
    # output paths: never the input, never half-written
    trace = _nsys(out, "output_source.sqlite")
    blocker = out / "a_regular_file"
    blocker.write_text("x")
    exists_dir = out / "existing_dir"
    exists_dir.mkdir()
    hardlink = out / "hardlink_to_input.sqlite"
    os.link(trace, hardlink)
    for name, args, names, outputs in [
        ("report_onto_input", ["report", "{f}", "-o", "{f}"], trace.name, []),
        (
            "report_onto_hardlink_of_input",
            ["report", "{f}", "-o", str(hardlink)],
            hardlink.name,
            [],
        ),
        ("report_onto_directory", ["report", "{f}", "-o", str(exists_dir)], exists_dir.name, []),
        (
            "report_under_a_file",
            ["report", "{f}", "-o", str(blocker / "r.md")],
            blocker.name,
            [str(blocker / "r.md")],
        ),
        ("emit_into_a_file", ["analyze", "{f}", "--emit", str(blocker)], blocker.name, []),
        ("emit_onto_input", ["analyze", "{f}", "--emit", "{f}"], trace.name, []),
        (
            "baseline_store_is_input",
            ["baseline", "save", "b", "{f}", "--store", "{f}"],
            trace.name,
            [],
        ),
        (
            "baseline_store_is_other_trace",
            ["baseline", "save", "b", "{f}", "--store", str(target)],
            target.name,
            [],
        ),
        (
            "gate_store_not_sqlite",
            ["gate", "--baseline-name", "b", "--candidate", "{f}", "--store", str(blocker)],
            blocker.name,
            [],
        ),
    ]:
        cases.append(Case(name, args, (2,), names=names, outputs=outputs, path=trace))
    # an existing report outside the corpus folder is replaced (exit 0), not appended to
    elsewhere = out.parent / f"{out.name}_outputs"
    elsewhere.mkdir(exist_ok=True)
    (elsewhere / "old_report.md").write_text("an older report\n")
    cases.append(Case("report_over_existing_file", ["report", "{f}", "-o",
                                                    str(elsewhere / "old_report.md")],
                      (0,), path=trace))  # fmt: skip
    return cases


def _stored_set_cases(out: Path) -> list[Case]:
    """Baseline stores holding a damaged metric set (valid JSON, wrong shape: it was an
    internal error in the comparison): refused naming the trace the set was made from."""
    times = ("span_ns", "gpu_busy_ns", "tail_idle_ns", "underfill_idle_ns",
             "launch_overhead_ns", "sync_idle_ns", "exposed_comm_ns")  # fmt: skip
    overall = dict.fromkeys(times, 1.0)
    base = {"trace": "damaged_set_trace.sqlite", "gpus": ["NVIDIA H200"],
            "overall": {**overall, "overlap_ratio": None}, "regions": {},
            "startup": {"startup_idle_ns": 0.0, "cold_instances": []}, "findings": [],
            "warnings": []}  # fmt: skip
    sets = {
        # version 3 (kernels keyed by text): a kernel without its samples
        "gate_store_set_without_samples.db": {**base, "version": 3, "kernels": {
            "k grid=1x1x1 block=32": {"name": "k", "launches": 1, "median_ns": 1.0}}},
        # version 4: a count that is text
        "gate_store_set_text_count.db": {**base, "version": 4, "kernels": [
            {"key": {"name": "k", "grid": [1, 1, 1], "block": 32}, "launches": "many",
             "median_ns": 1.0, "samples": [1.0]}]},
    }  # fmt: skip
    cases = []
    for name, doc in sets.items():
        path = out / name
        _sql(path, "CREATE TABLE baselines (name TEXT, seq INTEGER, trace TEXT, saved TEXT, "
                   "metrics TEXT, PRIMARY KEY (name, seq))",
             "INSERT INTO baselines VALUES ('b', 0, 'damaged_set_trace.sqlite', '2026-01-01', "
             f"'{json.dumps(doc)}')")  # fmt: skip
        args = ["gate", "--baseline-name", "b", "--store", "{f}", "--candidate", str(NSYS)]
        cases.append(Case(name, args, names="damaged_set_trace.sqlite",
                          says="damaged baseline metric set", path=path))  # fmt: skip
    return cases


KINETO = ROOT / "sample_traces" / "kineto" / "h200_gemm_evidence.pt.trace.json.gz"


def _kineto_cases(out: Path) -> list[Case]:
    """PyTorch profiler (Kineto) JSON: truncated, garbled, another program's JSON, no GPU."""
    analyze = ["analyze", "{f}", "--format", "json"]
    raw = KINETO.read_bytes()
    text = gzip.decompress(raw)
    no_gpu = b'{"schemaVersion": 1, "traceEvents": [{"ph": "X", "cat": "cpu_op", ' \
             b'"name": "aten::add", "ts": 1.5, "dur": 2.0, "pid": 1, "tid": 1}]}'  # fmt: skip
    # one kernel's args nest 5000 deep: the compiled scanner declines the event, msgspec's
    # decoder reaches its recursion limit
    first_args = text.index(b'"args": {', text.index(b'"cat": "kernel"')) + len(b'"args": {')
    deep = text[:first_args] + b'"deep": ' + _nested(5000) + b", " + text[first_args:]
    deep_says = "nests deeper than the JSON decoder follows"
    steps = gzip.decompress((KINETO.parent / "h200_train_steps.pt.trace.json.gz").read_bytes())
    return [
        _raw(out, "kineto_truncated.pt.trace.json.gz", raw[: len(raw) // 2], analyze),
        _raw(out, "kineto_truncated_text.pt.trace.json", text[: len(text) // 2], analyze),
        _raw(out, "kineto_garbled.json", text.replace(b'"ts"', b'"ts":: ', 50), analyze),
        _raw(out, "other_program.json", b'{"name": "not a trace", "values": [1, 2, 3]}', analyze),
        _raw(out, "kineto_without_gpu.json", no_gpu, analyze),
        _raw(out, "kineto_not_gzip.json.gz", b"\x1f\x8bnot really gzip", analyze),
        _raw(out, "kineto_args_nested_5000.pt.trace.json", deep, analyze, says=deep_says),
        _raw(out, "kineto_args_nested_5000.pt.trace.json.gz", gzip.compress(deep, mtime=0),
             analyze, says=deep_says),
        # past the first 64 KiB (read to tell the format) the deflate stream breaks
        _raw(out, "kineto_deflate_breaks.pt.trace.json.gz", _gzip_breaking(steps[: 1 << 20]),
             analyze, says="damaged gzip data"),
    ]  # fmt: skip


def _kineto_damaged(out: Path, name: str, category: str, damage) -> Path:
    """The Kineto sample with ``damage(event)`` applied to every third event of ``category``,
    written back as Kineto lays a trace out (one event per line: the compiled scanner reads
    it)."""
    doc = json.loads(gzip.decompress(KINETO.read_bytes()))
    events = doc.pop("traceEvents")
    for i, e in enumerate(x for x in events if x.get("cat") == category):
        if i % 3 == 0:
            damage(e, i)
    head = json.dumps(doc)[:-1]
    p = out / name
    p.write_text(head + ', "traceEvents": [\n  ' + ",\n  ".join(map(json.dumps, events)) + "\n]}")
    return p


def _absurd_launch(event: dict, i: int) -> None:
    """Grid and block values no GPU runs: zero, negative, 2^72 blocks, 4096 threads."""
    bad = [("grid", [0, 1, 1]), ("grid", [-5, 1, 1]), ("grid", [2**40, 65535, 65535]),
           ("block", [4096, 1, 1])][i // 3 % 4]  # fmt: skip
    event["args"][bad[0]] = bad[1]


def _kineto_damage_cases(out: Path) -> list[Case]:
    """Damaged Kineto traces that are still traces: the damaged rows are dropped (or their
    launch configurations flagged) and counted, one warning per kind, exit 0."""
    analyze = ["analyze", "{f}", "--format", "json"]

    def negative(e: dict, _: int) -> None:
        e["dur"] = -abs(e["dur"]) - 1.0

    def device(e: dict, _: int) -> None:
        e["args"]["device"] = -1

    cases = [  # (file, category damaged, damage, the warning it must give)
        ("kineto_negative_kernel_durations.pt.trace.json", "kernel", negative,
         "kernel launches dropped"),
        ("kineto_negative_cpu_op_durations.pt.trace.json", "cpu_op", negative, "CPU ops dropped"),
        ("kineto_negative_devices.pt.trace.json", "kernel", device, "kernel launches dropped"),
        ("kineto_absurd_launches.pt.trace.json", "kernel", _absurd_launch,
         "impossible launch configurations"),
    ]  # fmt: skip
    return [Case(name, analyze, (0,), warns=warns, path=_kineto_damaged(out, name, cat, damage))
            for name, cat, damage, warns in cases]  # fmt: skip


def _rocpd(out: Path, name: str, damage: str = "") -> Path:
    """The hand-built rocpd database of tests/trace/rocpd_db.py, then ``damage`` (SQL)."""
    sys.path.insert(0, str(ROOT / "tests" / "trace"))
    from rocpd_db import RocpdWriter, write_hand

    p = out / name
    with closing(sqlite3.connect(p)) as db:
        write_hand(RocpdWriter(db, "ab12_cd34"))
        db.commit()
    if damage:
        _sql(p, damage)
    return p


def _rocpd_cases(out: Path) -> list[Case]:
    """rocpd databases: another tool's, without dispatches, truncated, dangling ids, facts
    that are not JSON."""
    analyze = ["analyze", "{f}", "--format", "json"]
    no_dispatches = "DELETE FROM rocpd_kernel_dispatch_ab12_cd34"
    whole = _rocpd(out, "rocpd_whole.db").read_bytes()
    other = out / "rocpd_metadata_only.db"
    _sql(other, "CREATE TABLE rocpd_metadata_ab (id INTEGER, guid TEXT, tag TEXT, value TEXT)")
    return [
        Case("rocpd_metadata_only", analyze, path=other),
        Case("rocpd_no_dispatches", analyze,
             path=_rocpd(out, "rocpd_no_dispatches.db", no_dispatches)),
        _raw(out, "rocpd_truncated.db", whole[: len(whole) // 2], analyze),
        Case("rocpd_dangling_timestamps", analyze, codes=(0,), warns="their timestamp",
             path=_rocpd(out, "rocpd_dangling.db",
                         "DELETE FROM rocpd_timestamp_ab12_cd34 WHERE value = 1000140000")),
        Case("rocpd_agent_facts_not_json", analyze, codes=(0,), warns="no GPU facts",
             path=_rocpd(out, "rocpd_facts.db",
                         "UPDATE rocpd_info_agent_ab12_cd34 SET extdata = '{not json'")),
    ]  # fmt: skip


def _fuzz_found_cases(out: Path) -> list[Case]:
    """The kinds of damage tests/fuzz/fuzz_readers.py found ending in an internal error
    (issue 32), one file each: values SQLite stores in any column (text, blobs, reals past
    int64, text that is not UTF-8) where the export's schema has numbers or names, duplicate
    ids, empty or missing tables; infinite numbers and missing columns in rocprof CSV; damaged
    GPU facts; rocprofv3 JSON fields of another type. Each is read (exit 0, the damage told)
    or refused with one line (exit 2)."""
    analyze = ["analyze", "{f}", "--format", "json"]
    small = ROOT / "sample_traces" / "h200_gemm_evidence.sqlite"
    strings = "StringIds"

    def nsys(name: str, *sql: str, source: Path = small) -> Path:
        p = out / name
        shutil.copyfile(source, p)
        _sql(p, *sql)
        return p

    uuid = "ab12_cd34"

    def rocpd(name: str, *sql: str, views: bool = True) -> Path:
        sys.path.insert(0, str(ROOT / "tests" / "trace"))
        from rocpd_db import RocpdWriter, write_hand

        p = out / name
        with closing(sqlite3.connect(p)) as db:
            write_hand(RocpdWriter(db, uuid, views=views))
            db.commit()
        _sql(p, *sql)
        return p

    def loose(table: str) -> list[str]:  # the table without its constraints (keys)
        return [f'CREATE TABLE _t AS SELECT * FROM "{table}"', f'DROP TABLE "{table}"',
                f'ALTER TABLE _t RENAME TO "{table}"']  # fmt: skip

    lines = _csv_lines()
    v3 = ROCPROF
    agents = (v3 / "hpctraining_MI300A_rocm6.2.1__agent_info.excerpt.csv").read_text()
    kernels16 = (v3 / "hpctraining_MI300A_rocm6.2.1__kernel_trace_16col.excerpt.csv").read_text()
    _bytes(out, "fuzzagents_kernel_trace.csv", kernels16.encode())
    head = agents.splitlines()[0].split(",")
    cu, gfx = head.index('"Cu_Count"'), head.index('"Gfx_Target_Version"')
    bad_agents = [agents.splitlines()[0]] + [
        ",".join("'x'" if i == cu else "-0.001" if i == gfx else c for i, c in
                 enumerate(_cells(x))) if '"GPU"' in x else x
        for x in agents.splitlines()[1:]]  # fmt: skip
    _bytes(out, "fuzzagents_agent_info.csv", ("\n".join(bad_agents) + "\n").encode())
    _bytes(out, "fuzzapi_kernel_trace.csv", (v3 / "sdk_aug2025__kernel_trace.csv").read_bytes())
    hip = (v3 / "sdk_aug2025__hip_trace.csv").read_text().splitlines()
    hip = [hip[0], *(x.replace(",1055015", ",1550151") for x in hip[1:])]  # (the kernels' run)
    _bytes(out, "fuzzapi_hip_trace.csv", ("\n".join(
        _set_column(hip, "Thread_Id", "", every=2)) + "\n").encode())  # fmt: skip
    counters = (v3 / "sdk_aug2025__counter_collection.csv").read_text()
    json_gz = ROCPROF.parent / "v3_json" / "tracelens__908_results.json.gz"
    doc = json.loads(gzip.decompress(json_gz.read_bytes()))
    tool = doc["rocprofiler-sdk-tool"][0]
    tool["buffer_records"]["kernel_dispatch"] = tool["buffer_records"]["kernel_dispatch"][:20]
    tool["kernel_symbols"] = tool["kernel_symbols"][:50]
    text_field = json.loads(json.dumps(doc))
    text_field["rocprofiler-sdk-tool"][0]["buffer_records"]["kernel_dispatch"][3][
        "dispatch_info"]["grid_size"]["x"] = "x"  # fmt: skip
    agent_key = f'"rocpd_info_agent_{uuid}" (id INTEGER PRIMARY KEY'.encode()
    gpu = next(a for a in tool["agents"] if a.get("type") == 2)
    gpu["cu_count"] = "many"
    tool["agents"] += [5, None, {"id": {"handle": [1, 2]}, "type": 2}]
    return [
        Case("fuzz_nsys_duplicate_string_ids.sqlite", analyze, (0,),
             path=nsys("fuzz_nsys_duplicate_string_ids.sqlite",
                       *loose(strings), f"UPDATE {strings} SET id = id - 1 WHERE id % 2 = 0")),
        Case("fuzz_nsys_blobs_and_bad_utf8_names.sqlite", analyze, (0,),
             path=nsys("fuzz_nsys_blobs_and_bad_utf8_names.sqlite",
                       f"UPDATE {strings} SET value = x'b0ff' WHERE id % 3 = 0",
                       f"UPDATE {strings} SET value = CAST(x'61b062' AS TEXT) WHERE id % 3 = 1")),
        Case("fuzz_nsys_text_in_gpu_facts.sqlite", analyze, (0,), warns="cannot be GPU facts",
             path=nsys("fuzz_nsys_text_in_gpu_facts.sqlite", "UPDATE TARGET_INFO_GPU SET "
                       "maxBlocksPerSm = 'x', clockRate = 'back\\slash', computeMinor = 'y'")),
        Case("fuzz_nsys_copy_device_past_int64.sqlite", analyze, (0,),
             warns="memory copies dropped",
             path=nsys("fuzz_nsys_copy_device_past_int64.sqlite",
                       "UPDATE CUPTI_ACTIVITY_KIND_MEMCPY SET deviceId = 18446744073709551616",
                       source=NSYS)),
        _raw(out, "fuzz_rocpd_no_timestamps.db",
             rocpd("fuzz_rocpd_no_timestamps.db_src",
                   f"DELETE FROM rocpd_timestamp_{uuid}").read_bytes(), analyze,
             says="no kernel dispatches with their timestamps"),
        Case("fuzz_rocpd_text_ids_and_times.db", analyze, (0,), warns="kernel dispatches dropped",
             path=rocpd("fuzz_rocpd_text_ids_and_times.db",
                        f"UPDATE rocpd_timestamp_{uuid} SET value = '0x10' WHERE id IN (3, 9)",
                        f"UPDATE rocpd_kernel_dispatch_{uuid} SET grid_size_y = 'abc'")),
        Case("fuzz_rocpd_duplicate_symbols.db", analyze, (0,),
             path=rocpd("fuzz_rocpd_duplicate_symbols.db",
                        *loose(f"rocpd_info_kernel_symbol_{uuid}"),
                        f"INSERT INTO rocpd_info_kernel_symbol_{uuid} SELECT * FROM "
                        f"rocpd_info_kernel_symbol_{uuid}", views=False)),
        Case("fuzz_rocpd_no_string_table.db", analyze, (0,), warns="no HIP API regions",
             path=rocpd("fuzz_rocpd_no_string_table.db", f"DROP TABLE rocpd_string_{uuid}",
                        views=False)),
        Case("fuzz_rocpd_column_case_and_bad_utf8.db", analyze, (0,),
             path=rocpd("fuzz_rocpd_column_case_and_bad_utf8.db",
                        f"ALTER TABLE rocpd_info_agent_{uuid} RENAME COLUMN logical_index TO "
                        "logical_iNdex", f"UPDATE rocpd_string_{uuid} SET string = "
                        "CAST(x'68b0' AS TEXT) || string")),
        _raw(out, "fuzz_rocpd_schema_not_text.db", rocpd("fuzz_rocpd_schema_not_text.db_src")
             .read_bytes().replace(agent_key, agent_key[:-3] + b"\xccEY", 1), analyze,
             says="its schema is damaged"),  # (SQLite's message quotes the byte)
        Case("fuzz_rocpd_infinite_values.db", analyze, (0,), warns="non-numeric 'grid_x'",
             path=rocpd("fuzz_rocpd_infinite_values.db",
                        f"UPDATE rocpd_kernel_dispatch_{uuid} SET grid_size_x = '-inf'",
                        f"UPDATE rocpd_track_{uuid} SET pid = 9e999")),
        Case("fuzz_rocpd_text_thread_ids.db", analyze, (0,),
             path=rocpd("fuzz_rocpd_text_thread_ids.db",
                        f"UPDATE rocpd_track_{uuid} SET tid = 'cudaMemcpyAsync' WHERE id = 1",
                        f"UPDATE rocpd_info_agent_{uuid} SET logical_index = 'x', extdata = "
                        """'{"cu_count": "lots"}' WHERE type = 'CPU'""")),
        _raw(out, "fuzz_csv_infinite_timestamp.csv",
             ("\n".join(_set_column(lines, "Start_Timestamp", "-1e309", every=3)) + "\n").encode(),
             analyze, says="is not a finite number"),
        _raw(out, "fuzz_counter_collection_no_agent.csv",
             counters.replace("Agent_Id", "Agent").encode(), analyze, says="no Agent_Id"),
        Case("fuzz_agent_info_text_facts", analyze, (0,), warns="no usable id or compute-unit",
             path=out / "fuzzagents_kernel_trace.csv"),
        Case("fuzz_api_rows_without_thread", analyze, (0,), warns="dropped: no pid or tid",
             path=out / "fuzzapi_kernel_trace.csv"),
        _raw(out, "fuzz_rocprof_json_text_field.json", json.dumps(text_field).encode(), analyze,
             says="grid_size_x of record 3 is not a number"),
        Case("fuzz_rocprof_json_damaged_agents.json", analyze, (0,),
             warns="no usable id or compute-unit count",
             path=_bytes(out, "fuzz_rocprof_json_damaged_agents.json", json.dumps(doc).encode())),
        Case("fuzz_kineto_integers_past_float.pt.trace.json", analyze, (0,),
             warns="have a non-numeric 'stream'",
             path=_kineto_damaged(out, "fuzz_kineto_integers_past_float.pt.trace.json",
                                  "kernel", lambda e, i: e["args"].update(
                                      stream=int("9" * 400), grid=[int("9" * 400), 1, 1]))),
        Case("fuzz_nsys_infinite_thread_ids.sqlite", analyze, (0,),
             path=nsys("fuzz_nsys_infinite_thread_ids.sqlite", "UPDATE "
                       "CUPTI_ACTIVITY_KIND_RUNTIME SET globalTid = '-inf' WHERE rowid % 2 = 0")),
        Case("fuzz_nsys_blob_range_end.sqlite", analyze, (0,),
             path=nsys("fuzz_nsys_blob_range_end.sqlite",
                       "UPDATE NVTX_EVENTS SET end = x'9bfea1b2' WHERE rowid % 3 = 0")),
        Case("fuzz_nsys_memory_kind_ids_not_numbers.sqlite", analyze, (0,),
             path=nsys("fuzz_nsys_memory_kind_ids_not_numbers.sqlite",
                       *loose("ENUM_CUDA_MEM_KIND"),
                       "UPDATE ENUM_CUDA_MEM_KIND SET id = 'NaN' WHERE id = 1",
                       "UPDATE ENUM_CUDA_MEM_KIND SET id = x'731de3' WHERE id = 2",
                       source=NSYS)),
        Case("fuzz_rocpd_table_name_a_blob.db", analyze, (0,),
             path=rocpd("fuzz_rocpd_table_name_a_blob.db", "PRAGMA writable_schema = ON",
                        "UPDATE sqlite_master SET name = CAST(name AS BLOB) "
                        f"WHERE name = 'rocpd_info_node_{uuid}'", views=False)),
        _raw(out, "fuzz_timestamps_header_blanked.csv",
             (ROCPROF.parent / "v2" / "rocprofcompute_MI300X_v2__timestamps.csv").read_bytes()
             .replace(b",End_Timestamp,", b",,", 1), analyze,
             says="dispatches without timestamps"),  # (read as a pmc_perf without counters)
        Case("fuzz_kineto_grid_past_int64.pt.trace.json", analyze, (0,),
             warns="impossible launch configurations",
             path=_kineto_damaged(out, "fuzz_kineto_grid_past_int64.pt.trace.json", "kernel",
                                  lambda e, i: e["args"].update(grid=[-1e308, 1, 1]))),
    ]  # fmt: skip


def _wrong_file_cases(out: Path) -> list[Case]:
    """The files users give by mistake (issue 31): JSON that is no trace, gzipped text,
    another tool's JSON, a picture named like an export; each is told what it is."""
    analyze = ["analyze", "{f}", "--format", "json"]
    expected = "not a profiler trace"
    chrome = json.dumps(
        {
            "traceEvents": [
                {"name": "paint", "ph": "X", "ts": 1, "dur": 2, "pid": 1, "tid": 1, "cat": "blink"}
            ]
        }
    ).encode()
    return [
        _raw(out, "empty_list.json", b"[]", analyze, says="an empty JSON list, " + expected),
        _raw(out, "empty_object.json", b"{}", analyze, says="an empty JSON object, " + expected),
        _raw(out, "package.json", b'{"name": "app", "version": "1.0.0", "dependencies": {}}',
             analyze, says="a JSON object with keys 'name', 'version', 'dependencies'"),
        _raw(out, "text.json.gz", gzip.compress(b"hello world\n"), analyze,
             says="the text is not JSON (line 1, column 1)"),
        _raw(out, "notes.json", b"hello world\n", analyze,
             says="the text is not JSON (line 1, column 1)"),
        _raw(out, "chrome_page.json", chrome, analyze, says="without GPU kernels"),
        _raw(out, "events_not_a_list.json", b'{"traceEvents": 5}', analyze,
             says="traceEvents is a number where a list belongs"),
        _raw(out, "picture.sqlite", b"\x89PNG\r\n\x1a\n" + bytes(200), analyze,
             says="not a supported trace"),
    ]  # fmt: skip


def _ncu_lines(name: str) -> list[str]:
    """The lines of one of the captured Nsight Compute CSV pages (gzipped in the samples)."""
    return gzip.decompress((COUNTERS / name).read_bytes()).decode().splitlines(keepends=True)


def _ncu_cases(out: Path) -> list[Case]:
    """Nsight Compute input (issue 29): another page or version, a report without kernels,
    damaged pages, counters from another run (nothing joins), --counters given something
    else, an .ncu-rep without ncu."""
    analyze = ["analyze", "{f}", "--format", "json"]
    timeline = str(COUNTERS / "counters.sqlite")
    joined = ["analyze", timeline, "--counters", "{f}", "--format", "json"]
    raw = _ncu_lines("counters.ncu.raw.csv.gz")
    details = "".join(_ncu_lines("counters.ncu.details.csv.gz")).encode()
    older = "".join(x.replace("gpu__time_duration.sum", "Kernel Time") for x in raw).encode()
    head = raw[0].split('","')
    dur = head.index("gpu__time_duration.sum")

    def with_cell(line: str, at: int, value: str) -> str:
        cells = line.rstrip("\r\n").split('","')
        cells[at] = value
        return '","'.join(cells) + "\n"

    no_duration = [raw[0], raw[1], *(with_cell(x, dur, "n/a") if i % 2 else x
                                     for i, x in enumerate(raw[2:]))]  # fmt: skip
    odd_unit = [raw[0], with_cell(raw[1], dur, "parsec"), *raw[2:]]
    short_rows = [raw[0], raw[1], *(x[: len(x) // 2] + "\n" if i == 3 else x
                                    for i, x in enumerate(raw[2:]))]  # fmt: skip
    pair = out / "pair"  # a raw page with the details page of another report beside it
    pair.mkdir(exist_ok=True)
    (pair / "run.ncu.details.csv.gz").write_bytes((COUNTERS / "counters.ncu.details.csv.gz")
                                                  .read_bytes())  # fmt: skip
    return [
        _raw(out, "ncu_details_page.csv", details, analyze,
             says="the details page of an Nsight Compute report"),
        _raw(out, "ncu_older_version.raw.csv", older, analyze,
             says="without gpu__time_duration.sum: not the raw page"),
        _raw(out, "ncu_no_kernels.raw.csv", "".join(raw[:2]).encode(), analyze,
             says="without kernel launches"),
        _raw(out, "ncu_header_only.raw.csv", raw[0].encode(), analyze,
             says="without kernel launches"),
        _raw(out, "ncu_unknown_unit.raw.csv", "".join(odd_unit).encode(), analyze,
             says="unknown unit 'parsec'"),
        _raw(out, "ncu_broken.raw.csv.gz", _gzip_breaking("".join(raw).encode()), analyze,
             says="cannot read"),
        _raw(out, "ncu_no_ncu.ncu-rep", b"NVIDIA Nsight Compute report" + bytes(64), analyze,
             says="ncu"),
        Case("ncu_durations_missing", analyze, codes=(0,), warns="without a valid duration",
             path=_bytes(out, "ncu_durations_missing.raw.csv", "".join(no_duration).encode())),
        Case("ncu_short_rows", analyze, codes=(0,), warns="another number of cells",
             path=_bytes(out, "ncu_short_rows.raw.csv", "".join(short_rows).encode())),
        Case("ncu_details_of_another_report", analyze, codes=(0,),
             warns="describes other launches",
             path=_bytes(pair, "run.ncu.raw.csv", "".join(
                 _ncu_lines("ws.ncu.raw.csv.gz")).encode())),
        Case("counters_from_another_run", joined, codes=(0,),
             warns="none of its 2 profiled launches matches",
             path=_bytes(out, "other_run.ncu.raw.csv",
                         "".join(_ncu_lines("ws.ncu.raw.csv.gz")).encode())),
        Case("counters_not_ncu", joined, says="--counters: not an Nsight Compute report",
             path=out / "picture.sqlite"),
        Case("counters_details_page", joined, says="the details page",
             path=out / "ncu_details_page.csv"),
        Case("counters_without_kernels", joined, says="without kernel launches",
             path=out / "ncu_no_kernels.raw.csv"),
    ]  # fmt: skip


def _amd_counter_cases(out: Path) -> list[Case]:
    """AMD counters (issue 29): damaged rocprofv3 counter_collection.csv and rocprof-compute
    pmc_perf.csv files, one without timestamps analyzed alone, counters from another run
    (nothing joins), --counters given a kernel trace or a rocpd database without counters."""
    analyze = ["analyze", "{f}", "--format", "json"]
    joined = ["analyze", str(ROCPROF_KERNELS), "--counters", "{f}", "--format", "json"]
    collection = (ROCPROF / "sdk_aug2025__counter_collection.csv").read_text()
    pmc_perf = (ROCPROF.parent / "compute" / "rocprofcompute_MI300X__pmc_perf.csv").read_text()
    table = list(csv.reader(io.StringIO(pmc_perf)))
    table[1][table[0].index("SQ_WAIT_ANY")] = "abc"  # (a counter advisor reads, dispatch 0)
    text_cell = io.StringIO()
    csv.writer(text_cell, lineterminator="\n").writerows(table)
    sys.path.insert(0, str(ROOT / "tests" / "trace"))
    from rocpd_db import RocpdWriter, write_gemm

    no_pmc = out / "amd_gemm_without_counters.db"
    with closing(sqlite3.connect(no_pmc)) as db:
        write_gemm(RocpdWriter(db, "77aa_0bcd"))
        db.commit()
    return [
        _raw(out, "amd_counter_collection_text_value.csv",
             collection.replace("16384.000000", "n/a", 1).encode(), analyze,
             says="'Counter_Value', data row 1: 'n/a' is not a number"),
        _raw(out, "amd_counter_collection_untimed.csv",
             (ROCPROF / "sdk_oct2024__counter_collection.csv").read_bytes(), analyze,
             says="dispatches without timestamps cannot be analyzed in time"),
        _raw(out, "amd_counter_collection_header_only.csv",
             collection.splitlines(keepends=True)[0].encode(), analyze,
             says="no kernel dispatches"),
        _raw(out, "amd_pmc_perf_text_cell.csv", text_cell.getvalue().encode(), analyze,
             says="column 'SQ_WAIT_ANY', data row 1: 'abc' is not a number"),
        Case("amd_counters_from_another_run", joined, codes=(0,),
             warns="none of its 3 profiled launches matches",
             path=_bytes(out, "amd_other_run_pmc_perf.csv", pmc_perf.encode())),
        Case("amd_counters_a_kernel_trace", joined,
             says="--counters: not an Nsight Compute report or AMD counters file",
             path=_bytes(out, "amd_kernel_trace.csv", ROCPROF_KERNELS.read_bytes())),
        Case("amd_counters_rocpd_without_counters", joined,
             says="a rocpd database without hardware counters", path=no_pmc),
    ]  # fmt: skip


def build(out: Path) -> list[Case]:
    """Write every case's file under ``out`` (created) and return the cases."""
    out.mkdir(parents=True, exist_ok=True)
    cases = (_sqlite_cases(out) + _csv_cases(out) + _config_cases(out) + _path_cases(out)
             + _kineto_cases(out) + _kineto_damage_cases(out) + _rocpd_cases(out)
             + _wrong_file_cases(out) + _ncu_cases(out) + _amd_counter_cases(out)
             + _stored_set_cases(out))  # fmt: skip
    cases += _fuzz_found_cases(out)  # (found by tests/fuzz)
    for c in cases:
        if not c.names and c.path is not None:
            c.names = c.path.name
    return cases


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: make_corpus.py OUT_DIR")
    for case in build(Path(sys.argv[1])):
        print(
            f"{case.name:40s} exit {'/'.join(map(str, case.codes))}: advisor {' '.join(case.args)}"
        )
