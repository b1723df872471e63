"""The CLI as a user runs it: output content, JSON shape, options, documentation."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import H200_2GPU, H200_SINGLE, ROOT

from advisor.rules import registry

REQUIRED = {
    "trace": {"path", "format", "producer_version", "gpus"},
    "summary": {
        "span_ns",
        "gpu_busy_ns",
        "idle_ns",
        "tail_idle_ns",
        "launch_overhead_ns",
        "exposed_comm_ns",
    },
    "kernels": {
        "name",
        "device",
        "grid_blocks",
        "block_threads",
        "launches",
        "total_ns",
        "ctas_per_sm",
        "waves",
        "tail_fraction",
        "tail_idle_ns",
        "persistent",
    },
    "regions": {
        "name",
        "device",
        "start_ns",
        "end_ns",
        "gpu_busy_ns",
        "idle_ns",
        "tail_idle_ns",
        "launch_overhead_ns",
        "comm_ns",
        "exposed_comm_ns",
        "overlap_ratio",
    },
    "findings": {
        "rule",
        "strategy",
        "severity",
        "kernel",
        "region",
        "device",
        "est_savings_ns",
        "evidence",
    },
}
# the registered strategies, which docs/json.md lists (test_every_rule_strategy_is_documented)
STRATEGIES = set(registry.STRATEGIES)


def test_every_rule_strategy_is_documented():
    from advisor.rules.engine import load_rules

    doc = (Path(__file__).resolve().parents[1] / "docs" / "json.md").read_text()
    used = {r.spec.strategy for r in load_rules()}
    assert used <= STRATEGIES and all(f"`{s}`" in doc for s in STRATEGIES), used - STRATEGIES


def cli(*args):
    env = {**os.environ, "COLUMNS": "200"}  # a wide report: assertions see whole cells
    proc = subprocess.run(
        [sys.executable, "-m", "advisor", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.fixture(scope="module")
def single_json():
    return json.loads(cli("analyze", str(H200_SINGLE), "--format", "json"))


def test_json_has_the_stable_shape(single_json):
    d = single_json
    assert d["schema_version"] == 1
    assert REQUIRED["trace"] <= set(d["trace"])
    assert REQUIRED["summary"] <= set(d["summary"])
    for key in ("kernels", "regions", "findings"):
        assert d[key], key
        for row in d[key]:
            assert REQUIRED[key] <= set(row), (key, set(REQUIRED[key]) - set(row))
    assert {f["strategy"] for f in d["findings"]} <= STRATEGIES
    assert d["trace"]["gpus"][0]["name"] == "NVIDIA H200"
    per_range = {
        (k["region"], k["grid_blocks"])
        for k in d["region_kernels"]
        if k["name"] == "tiled_gemm_kernel"
    }
    assert {("tail_gemm", 133), ("full_wave_gemm", 132), ("underfilled_long_k", 4)} <= per_range
    assert d["trace"]["gpus"][0]["source"] == "trace (TARGET_INFO_GPU)"


def test_json_numbers_are_consistent(single_json):
    d = single_json
    s = d["summary"]
    assert s["gpu_busy_ns"] + s["idle_ns"] == s["span_ns"] * s["devices"] == s["window_ns"]
    assert sum(k["tail_idle_ns"] for k in d["kernels"]) == pytest.approx(s["tail_idle_ns"], abs=50)
    tail = [k for k in d["kernels"] if k["grid_blocks"] == 133 and k["name"] == "tiled_gemm_kernel"]
    assert len(tail) == 1 and round(tail[0]["waves"], 3) == 1.008
    assert round(tail[0]["tail_fraction"], 2) == 0.5


def test_range_option_narrows_everything():
    d = json.loads(cli("analyze", str(H200_SINGLE), "--format", "json", "--range", "tail_gemm"))
    assert {r["name"] for r in d["regions"]} == {"tail_gemm"}
    assert {k["grid_blocks"] for k in d["kernels"]} == {133}
    assert d["selection"] == {"range": "tail_gemm", "device": None}
    r = d["regions"][0]
    # (measured from the gap its first kernel held: the range's lead)
    assert d["summary"]["span_ns"] == r["end_ns"] - r["start_ns"] + r["lead_ns"]
    assert {f["strategy"] for f in d["findings"]} == {"stream_k"}


def test_device_option():
    d = json.loads(cli("analyze", str(H200_2GPU), "--format", "json", "--device", "1"))
    assert {r["device"] for r in d["regions"]} == {1}
    assert {k["device"] for k in d["kernels"]} == {1}
    assert d["summary"]["devices"] == 1


def test_terminal_report_reads_like_a_report():
    out = cli("analyze", str(H200_SINGLE))
    for text in (
        "NVIDIA H200, 132 SMs",
        "Findings, ranked by estimated savings",
        "stream_k",
        "split_k",
        "host_work",
        "tail_gemm",
        "1.008",
        "49.6 %",
        "Device idle gaps by cause",
        "startup",
    ):
        assert text in out, text
    assert re.search(r"\d+(\.\d+)? (ns|us|ms|s)\b", out)


def test_terminal_report_two_gpu():
    out = cli("analyze", str(H200_2GPU), "--top", "3")
    assert "GPU 0, 1: NVIDIA H200" in out
    assert "load_balance" in out and "comm_overlap" in out
    assert "overlap ratio" in out


def test_gpus_and_version():
    out = cli("gpus")
    for name in (
        "V100",
        "A100-SXM4-40GB",
        "A100-SXM4-80GB",
        "H100-SXM",
        "H100-PCIe",
        "H200",
        "B200",
        "L4",
        "RTX-3060",
        "RTX-3080",
        "RTX-4060-Ti",
        "RTX-4090",
        "MI250X",
        "MI300X",
        "MI350X",
    ):
        assert name in out
    assert re.fullmatch(r"\d+\.\d+\.\d+\n", cli("version"))


def test_every_command_is_documented_in_the_readme():
    from advisor.cli import app

    readme = (ROOT / "README.md").read_text()
    commands = [c.name or c.callback.__name__ for c in app.registered_commands]
    for group in app.registered_groups:
        sub = group.typer_instance.registered_commands
        commands += [f"{group.name} {c.name or c.callback.__name__}" for c in sub]
    assert {"analyze", "gpus", "version", "rules list", "rules validate"} <= set(commands)
    for name in commands:
        assert f"advisor {name}" in readme, name


CUSTOM_RULE = """
rules:
  - id: any-tiled-gemm
    title: Every tiled GEMM launch group
    scope: kernels
    when: name == "tiled_gemm_kernel" and launches >= 5
    savings: total_ns * 0.01
    strategy: inspect
    message: "{launches:int} launches of {name}, {total_ns:time}"
    evidence: [launches, total_ns]
    rationale: a user rule
    watch_for: nothing
"""


def test_rules_list_and_validate(tmp_path):
    out = cli("rules", "list")
    assert "wave-tail-gemm" in out and "rules/scheduling.yaml" in out and "split_k" in out
    (tmp_path / "mine.yaml").write_text(CUSTOM_RULE)
    assert cli("rules", "validate", str(tmp_path)).startswith("ok: 1 rule(s)")
    assert "any-tiled-gemm" in cli("rules", "list", "--rules", str(tmp_path))


def test_user_rules_fire_in_analyze(tmp_path):
    (tmp_path / "mine.yaml").write_text(CUSTOM_RULE)
    d = json.loads(cli("analyze", str(H200_SINGLE), "--format", "json", "--rules", str(tmp_path)))
    mine = [f for f in d["findings"] if f["rule"] == "any-tiled-gemm"]
    assert {f["region"] for f in mine} == {"tail_gemm", "full_wave_gemm", "underfilled_long_k"}
    assert all(f["strategy"] == "inspect" and f["evidence"]["launches"] == 5 for f in mine)


def test_shape_and_emit_options(tmp_path):
    out_dir = tmp_path / "configs"
    d = json.loads(
        cli(
            "analyze",
            str(H200_SINGLE),
            "--format",
            "json",
            "--shape",
            "tail_gemm=896x4864x8192",
            "--emit",
            str(out_dir),
        )
    )
    tail = next(f for f in d["findings"] if f["region"] == "tail_gemm")
    assert tail["strategy"] == "stream_k" and tail["config"]
    assert all(p.startswith(str(out_dir)) for p in tail["config"])
    assert "evidence" in tail and "_row" not in tail and "_emit" not in tail
    assert tail["evidence"]["m"] == 896 and tail["evidence"]["k"] == 8192
    assert {".json", ".md", ".py"} <= {p.suffix for p in out_dir.iterdir()}


def bad_cli(*args):
    proc = subprocess.run(
        [sys.executable, "-m", "advisor", *args], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    return proc.stderr


def test_bad_rules_shape_and_emit_dir(tmp_path):
    (tmp_path / "bad.yaml").write_text("rules:\n  - id: x\n    title: [oops\n")
    assert "not valid YAML" in bad_cli("rules", "validate", str(tmp_path / "bad.yaml"))
    (tmp_path / "bad.yaml").write_text(CUSTOM_RULE.replace("launches >= 5", "lunches >= 5"))
    err = bad_cli("analyze", str(H200_SINGLE), "--rules", str(tmp_path))
    assert "rule 'any-tiled-gemm': field 'when': unknown metric 'lunches'" in err
    assert "expected PATTERN=MxNxK" in bad_cli("analyze", str(H200_SINGLE), "--shape", "x=1x2")
    blocker = tmp_path / "plain-file"
    blocker.write_text("")
    err = bad_cli(
        "analyze",
        str(H200_SINGLE),
        "--shape",
        "tail_gemm=896x4864x8192",
        "--emit",
        str(blocker / "out"),
    )
    assert "cannot write the emit folder" in err
    assert not (blocker.parent / "out").exists()


@pytest.mark.parametrize(
    "trace, extra",
    [
        (ROOT / "tests/data/public/nsys/pipit_cloverleaf_a100_nsys2024.5.sqlite", []),
        (
            ROOT / "tests/data/public/nsys/nsysai_h100_2gpu_window_nsys2026.2.sqlite",
            ["--gpu", "H100-SXM"],
        ),
        (ROOT / "sample_traces/rocprof/mi350x_rank0", []),
        (ROOT / "tests/data/public/rocprof/v3_json/tracelens__908_results.json.gz", []),
    ],
)
def test_json_and_table_on_traces_without_nvtx_or_from_amd(trace, extra):
    d = json.loads(cli("analyze", str(trace), "--format", "json", *extra))
    assert REQUIRED["summary"] <= set(d["summary"]) and d["kernels"]
    for row in d["kernels"]:
        assert REQUIRED["kernels"] <= set(row)
    assert "Where the GPU time went" in cli("analyze", str(trace), *extra)


@pytest.mark.parametrize(
    ("args", "code"),
    [
        ((str(H200_SINGLE),), 0),  # the terminal report
        ((str(H200_SINGLE), "--format", "json"), 0),
        ((str(H200_2GPU), "missing.sqlite"), 2),  # many traces, one bad: still exit 2
        ((str(H200_2GPU), "missing.sqlite", "--format", "json"), 2),
    ],
)
def test_a_reader_that_stops_early_is_not_an_error(args, code, tmp_path):
    # `advisor analyze ... | head -0`: the reader is gone before the first line is written
    proc = subprocess.Popen([sys.executable, "-m", "advisor", "analyze", *args], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    proc.stdout.close()
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == code, err
    assert b"Traceback" not in err


@pytest.mark.parametrize(
    "args, says",
    [
        (("analyze", "--nope", str(H200_SINGLE)), "advisor analyze: No such option: --nope"),
        (("analyze",), "advisor analyze: Missing argument 'TRACE'"),
        (("analyze", str(H200_SINGLE), "--top", "0"), "Invalid value for '--top'"),
        (("gate", "--baseline", str(H200_SINGLE)), "give --candidate TRACE... (or --calibrate"),
        (("nosuch",), "No such command 'nosuch'"),
    ],
)
def test_usage_errors_are_one_line(args, says):
    # typer's boxed usage errors become the project's own one-line error, exit 2
    err = bad_cli(*args)
    assert err.startswith("advisor: error: ") and says in err and "╭" not in err


def test_help_shows_metavars_not_python_types():
    for command in ("analyze", "gate", "report", "rules list", "baseline save"):
        out = cli(*command.split(), "--help")
        assert "list[str]" not in out and "<str>" not in out and "<bool>" not in out, command
    assert "Analyze traces" in cli("analyze", "--help")
    gate_help = " ".join(cli("gate", "--help").split())
    assert "markdown (for a" in gate_help  # --format has help text


def test_folder_of_only_bad_traces_prints_nothing_on_stdout(tmp_path):
    for name in ("a.sqlite", "b.sqlite"):
        (tmp_path / name).write_bytes(b"not a database at all")
    proc = subprocess.run([sys.executable, "-m", "advisor", "analyze", str(tmp_path)],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert proc.returncode == 2 and proc.stdout == ""
    assert len(proc.stderr.strip().splitlines()) == 2  # one line per bad file


MINIMAL_RULE = """
rules:
  - id: slow-kernels
    scope: kernels
    when: median_ns >= 400000
    savings: total_ns * 0.1
    strategy: inspect
disable: [wave-tail-gemm]
"""


def test_user_rules_replace_and_disable_builtins(tmp_path):
    # a user copy of the shipped rules replaces them (same ids) instead of failing
    copy = tmp_path / "copy"
    copy.mkdir()
    shipped = (ROOT / "rules" / "scheduling.yaml").read_text()
    (copy / "scheduling.yaml").write_text(
        shipped.replace("tail_fraction >= 0.2", "tail_fraction >= 0.9")
    )
    listed = cli("rules", "list", "--rules", str(copy))
    # every built-in id is in the copy: all ten now come from it, once each
    assert listed.count("wave-tail-gemm") == 1 and "rules/scheduling.yaml" not in listed
    d = json.loads(cli("analyze", str(H200_SINGLE), "--format", "json", "--rules", str(copy)))
    assert not [f for f in d["findings"] if f["strategy"] == "stream_k"]  # 0.50 < 0.9 now
    # a minimal rule (no title, message, rationale) works; disable switches a built-in off
    (tmp_path / "min.yaml").write_text(MINIMAL_RULE)
    d = json.loads(cli("analyze", str(H200_SINGLE), "--format", "json", "--rules",
                       str(tmp_path / "min.yaml")))  # fmt: skip
    mine = [f for f in d["findings"] if f["rule"] == "slow-kernels"]
    assert mine and all(f["title"] == "slow-kernels" and f["summary"] for f in mine)
    assert not [f for f in d["findings"] if f["rule"] == "wave-tail-gemm"]
    (tmp_path / "off.yaml").write_text("disable: [no-such-rule]\n")
    assert "disable: no rule with id 'no-such-rule'" in bad_cli(
        "rules", "validate", str(tmp_path / "off.yaml")
    )


def _documented_keys() -> str:
    return (ROOT / "docs" / "json.md").read_text()


def test_docs_json_lists_every_key(tmp_path):
    # like sqlite-utils' documentation tests: the document's keys are all in docs/json.md
    doc = json.loads(cli("analyze", str(H200_SINGLE), "--format", "json", "--shape",
                         "tail_gemm=896x4864x8192", "--emit", str(tmp_path / "out")))  # fmt: skip
    text = _documented_keys()
    for key in doc:
        assert f'"{key}"' in text, f"top-level key {key!r} missing from docs/json.md"
    fields = {k for f in doc["findings"] for k in f}
    assert {"at_ns", "at_rel_ns", "config", "knobs"} <= fields
    for key in fields:
        assert f'"{key}"' in text, f"finding field {key!r} missing from docs/json.md"
    for table in ("top_kernels", "copies", "sync_stalls", "kernels", "regions"):
        for key in {k for row in doc[table] for k in row}:
            assert f'"{key}"' in text, f"{table} field {key!r} missing from docs/json.md"


@pytest.mark.parametrize("columns", [80, 120])
@pytest.mark.parametrize("trace", [H200_SINGLE, H200_2GPU])
def test_terminal_fits_80_and_120_columns(columns, trace):
    env = {**os.environ, "COLUMNS": str(columns)}
    args = [sys.executable, "-m", "advisor", "analyze", str(trace), "--device", "0"]
    out = subprocess.run(args, capture_output=True, text=True, env=env, timeout=120).stdout
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= columns
    # numbers are never cut: no number cell ends in an ellipsis ("558.…"), no unit follows one
    assert not re.search(r"[\s│]\d[\d.,]*…|…\s?(ns|us|ms|s|%)\b", out)
    # long names are shortened in the middle: start and end both kept
    if columns == 80:
        assert re.search(r"vectoriz\w*…\w*kernel", out)
    # no Python reprs reach the user
    assert "{'" not in out and "['" not in out
    assert "selection: --device 0" in out


def test_gemm_option(tmp_path):
    trace = ROOT / "sample_traces" / "h200_gemm_evidence.sqlite"
    d = json.loads(cli("analyze", str(trace), "--format", "json", "--gemm", "^_kernel$"))
    assert {f["gemm_by"] for f in d["findings"] if f["kernel"] == "_kernel"} == {"user"}
    assert "--gemm '[': bad pattern" in bad_cli("analyze", str(trace), "--gemm", "[")


def test_small_things_a_user_sees(tmp_path):
    """Issue 31's smaller items: each as the user meets it."""
    base = [sys.executable, "-m", "advisor"]

    env = {**os.environ, "COLUMNS": "200"}

    def run(*args):
        return subprocess.run([*base, *map(str, args)], capture_output=True, text=True,
                              timeout=300, cwd=tmp_path, env=env)  # fmt: skip

    # a report into a folder that does not exist: refused, and no folder is created
    missing = tmp_path / "no" / "such" / "dir"
    proc = run("report", H200_SINGLE, "-o", missing / "r.md")
    assert proc.returncode == 2 and "does not exist: create it first" in proc.stderr
    assert not (tmp_path / "no").exists()
    # listing baselines reads: a trace given as the store is not "written into"
    proc = run("baseline", "list", "--store", H200_SINGLE)
    assert proc.returncode == 2 and "it holds no baselines" in proc.stderr
    assert "refusing to write" not in proc.stderr
    # --gpu none: tails are not computed, not "0 ns"
    out = run("analyze", H200_SINGLE, "--gpu", "none").stdout
    tail = next(line for line in out.splitlines() if "wave-quantization tail idle" in line)
    assert "not computed" in tail and "0 ns" not in tail
    # the help names every format analyze reads
    text = " ".join(run("analyze", "--help").stdout.split())
    for fmt in ("Nsight Systems", ".nsys-rep", "Kineto", "rocpd", "rocprof CSV/JSON"):
        assert fmt in text, fmt


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs Linux's /dev/full")
@pytest.mark.parametrize("fmt", ["json", "table"])
def test_an_output_with_no_room_is_one_error_line_not_a_bug(fmt):
    # stdout on a full disk (/dev/full: every write fails with ENOSPC): exit 2 and one line
    # saying so, not the "internal error ... a bug" line (exit 3) it gave before
    with open("/dev/full", "wb") as full:
        proc = subprocess.run(
            [sys.executable, "-m", "advisor", "analyze", str(H200_SINGLE), "--format", fmt],
            stdout=full, stderr=subprocess.PIPE, text=True, timeout=120,
        )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == "advisor: error: the output: cannot write: No space left on device\n"
