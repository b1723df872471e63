"""Emitted multi-GPU references (configs/dist.py): every comm_overlap, tp_overlap and
pipeline_schedule finding on the repository's multi-GPU traces gets a script; each kind's
script passes its --check on the CPU (gloo, 2 processes it starts itself) and fails it when
the overlapped schedule is made wrong on purpose (--fault). The numbers asserted are worked
out by hand in the comments."""

import ast
import os
import subprocess
import sys
from importlib.util import find_spec
from pathlib import Path

import pytest
from builders import two_device_steps
from conftest import H200_2GPU, PUBLIC, PUBLIC_NSYS, analysis_of
from test_pipeline import gpipe

from advisor.analysis import analyze
from advisor.configs.emit import emit_into
from advisor.findings import find

torch_missing = pytest.mark.skipif(
    find_spec("torch") is None,
    reason="torch is not installed (pip install '.[kernels]')",
)
MULTI_GPU = ("comm_overlap", "tp_overlap", "pipeline_schedule")
# the repository's traces with such findings (found by running advisor analyze on every
# multi-GPU trace; nsysai_h100_2gpu_window has none: its comm overlaps compute)
KINETO = PUBLIC / "kineto"
TRACES = {
    "h200x2_allreduce": (H200_2GPU, "comm_overlap"),
    "hta_nccl_data": (KINETO / "hta_nccl_data.json.gz", "comm_overlap"),
    "tracelens_vllm_eager_b200": (KINETO / "tracelens_vllm_eager_b200.json.gz", "tp_overlap"),
}  # fmt: skip
# traces whose exposed communication is send/receive kernels (HTA's pipeline ranks: NCCL
# SendRecv on their own streams; nsys-ai's 2-GPU exports: an all-to-all of SendRecv
# kernels): exposed-p2p, whose advice is no data-parallel all-reduce script
SENDRECV = {
    "nsysai_2gpu_sendrecv_after": PUBLIC_NSYS / "nsysai_2gpu_sendrecv_after_nsys2026.2.sqlite",
    "nsysai_2gpu_sendrecv_before": PUBLIC_NSYS / "nsysai_2gpu_sendrecv_before_nsys2026.2.sqlite",
    "hta_sampled_rank-0": KINETO / "hta_sampled_rank-0.json.gz",
    "hta_sampled_rank-1": KINETO / "hta_sampled_rank-1.json.gz",
}


def run_script(path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE")}
    return subprocess.run([sys.executable, str(path), *args], capture_output=True, text=True,
                          timeout=300, env=env, cwd=path.parent.parent)  # fmt: skip


def checks(proc: subprocess.CompletedProcess) -> list[str]:
    return [line for line in proc.stdout.splitlines() if line.startswith("check ") and
            line.endswith((" ok", " FAIL"))]  # fmt: skip


def _emit(analysis, out: Path) -> list:
    found = [f for f in find(analysis) if f.strategy in MULTI_GPU]
    return emit_into(found, analysis.trace.gpus, out)


def _script(f) -> Path:
    (py,) = [Path(p) for p in f.config if p.endswith(".py")]
    return py


def _constants(script: Path) -> dict:
    """The script's CONFIG and TRACED dicts (read, not run)."""
    tree = ast.parse(script.read_text())
    return {node.targets[0].id: ast.literal_eval(node.value) for node in tree.body
            if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") in
            ("CONFIG", "TRACED")}  # fmt: skip


def _lint(folder: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ruff", "check", "--select", "E,F,W",
                           "--line-length", "100", str(folder)], capture_output=True,
                          text=True)  # fmt: skip


@pytest.mark.parametrize("name", sorted(TRACES))
def test_every_multi_gpu_finding_gets_a_script_and_its_note(name, tmp_path):
    path, strategy = TRACES[name]
    emitted = _emit(analysis_of(path), tmp_path)
    assert emitted and {f.strategy for f in emitted} == {strategy}
    for f in emitted:
        assert sorted(Path(p).suffix for p in f.config) == [".md", ".py"]
        text = _script(f).read_text()
        assert f"Finding ({f.rule}): " in text and "CONFIG = {'strategy': " in text
        assert "In your code: " in text and "Not in the trace (labelled defaults" in text
    proc = _lint(tmp_path)
    assert proc.returncode == 0, proc.stdout


@pytest.mark.parametrize("name", sorted(SENDRECV))
def test_exposed_send_receive_gets_its_own_advice_and_no_all_reduce_script(name, tmp_path):
    a = analysis_of(SENDRECV[name])
    found = find(a)
    assert not [f for f in found if f.strategy in MULTI_GPU]
    p2p = [f for f in found if f.rule == "exposed-p2p"]
    assert p2p and {f.strategy for f in p2p} == {"sendrecv_overlap"}
    assert all("in send/receive kernels" in f.summary for f in p2p)
    for f in emit_into(p2p, a.trace.gpus, tmp_path):
        assert [Path(p).suffix for p in f.config] == [".md"]
        note = Path(f.config[0]).read_text()
        assert "batch_isend_irecv" in note and "all_reduce" not in note


@pytest.fixture(scope="module")
def comm_script(tmp_path_factory):
    out = tmp_path_factory.mktemp("dist") / "emit"
    by = {(f.region, f.device): f for f in _emit(analysis_of(H200_2GPU), out)}
    return _script(by[("allreduce_exposed", 0)])


@pytest.fixture(scope="module")
def tp_script(tmp_path_factory):
    out = tmp_path_factory.mktemp("dist") / "emit"
    (f,) = _emit(analysis_of(KINETO / "tracelens_vllm_eager_b200.json.gz"), out)
    return _script(f)


@pytest.fixture(scope="module")
def pp_script(tmp_path_factory):
    # the hand-built 2-stage GPipe steps of tests/metrics/test_pipeline.py whose transfers
    # (60 us) make a bubble above the ideal: the only pipeline-parallel trace in the
    # repository (pp-bubble on stage 0)
    out = tmp_path_factory.mktemp("dist") / "emit"
    (f,) = _emit(analyze(two_device_steps([gpipe((100, 100), (200, 200), 60)] * 2)), out)
    return _script(f)


def test_scripts_carry_the_traced_sizes(comm_script, tp_script, pp_script):
    # h200x2_allreduce, range allreduce_exposed on device 0: its 4 steps each all-reduce
    # 64 MiB, and the closing dist.barrier() is one more all-reduce: 5 collectives, 978.204
    # us of comm (all of it exposed, on the compute stream), 3.183702 ms of compute; the
    # bytes are not in the trace: the labelled default (DDP's 25 MiB buckets)
    c = _constants(comm_script)
    assert c["CONFIG"] == {"strategy": "comm_overlap", "BUCKETS": 5, "ROWS": 4096,
                           "COLS": 3200, "TOKENS": 4096}  # fmt: skip
    assert c["TRACED"] == {"comm_ns": 978204, "exposed_comm_ns": 978204, "compute_ns": 3183702,
                           "same_stream_comm_ns": 978204, "collectives": 5}  # fmt: skip
    assert "4096 x 3200 bf16 = 25 MiB (DDP's default bucket_cap_mb)" in comm_script.read_text()
    # vLLM TP 8 on a B200: 74 all-reduces per instance, each a layer's: 74 layers of one
    # all-gather and one reduce-scatter each (sequence parallelism)
    assert _constants(tp_script)["CONFIG"]["LAYERS"] == 74
    # the hand-built pipeline: 2 stages, 4 micro-batches; step 1980 us, bubble 780 us
    # (780 / 1980 = 39.4 %), ideal (2 - 1) / (4 + 2 - 1) = 1/5 = 20 %
    c = _constants(pp_script)
    assert (c["CONFIG"]["STAGES"], c["CONFIG"]["MICROBATCHES"]) == (2, 4)
    assert (c["TRACED"]["step_ns"], c["TRACED"]["bubble_ns"]) == (1980_000, 780_000)
    text = " ".join(pp_script.read_text().split())  # (the header is wrapped)
    assert "bubble 39.4% against the ideal (p - 1) / (m + p - 1) = 20.0%" in text


@torch_missing
def test_comm_overlap_check_passes_bit_for_bit_and_its_bench_code_runs(comm_script):
    # --cpu-bench: --bench's code with gloo at the check's sizes (its times mean nothing)
    proc = run_script(comm_script, "--check", "--cpu-bench", "--steps", "1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    first = proc.stdout.splitlines()[0]
    assert first.startswith("check comm_overlap on 2 ranks (gloo, CPU, float32): 5 buckets")
    lines = checks(proc)
    assert len(lines) == 3 and all(line.endswith(" ok") for line in lines), proc.stdout
    assert lines[0].startswith("check serialized vs the float64 mean over ranks: 5 tensors")
    assert lines[1].startswith("check overlapped vs serialized: 5 tensors per rank, bit for "
                               "bit; bit for bit required")  # fmt: skip
    assert "exposed communication" in proc.stdout and "(before)" in proc.stdout


@torch_missing
def test_comm_overlap_check_fails_when_a_bucket_is_not_reduced(comm_script):
    proc = run_script(comm_script, "--check", "--fault", "skip-bucket")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = checks(proc)
    assert lines[0].endswith(" ok")  # the serialized schedule is still right
    assert "NOT bit for bit" in lines[1] and lines[1].endswith(" FAIL")


@torch_missing
def test_tp_overlap_check_passes_and_its_bench_code_runs(tp_script):
    proc = run_script(tp_script, "--check", "--cpu-bench", "--steps", "1", "--set", "LAYERS=4")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = checks(proc)
    assert len(lines) == 3 and all(line.endswith(" ok") for line in lines), proc.stdout
    assert lines[0].startswith("check serialized vs float64, 4 layers: 4 tensors per rank")
    # the chunked GEMMs may sum K in another order: within the stated tolerance
    assert lines[1].startswith("check overlapped (4 chunk(s)) vs serialized: 4 tensors")
    assert "tolerance 1e-05 (the chunked GEMMs are row blocks" in lines[1]
    assert "fused (symm_mem): not run (needs CUDA" in proc.stdout


@torch_missing
def test_tp_overlap_check_fails_when_a_chunk_is_not_gathered(tp_script):
    proc = run_script(tp_script, "--check", "--fault", "skip-chunk", "--set", "LAYERS=2")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = checks(proc)
    assert lines[0].endswith(" ok") and lines[1].endswith(" FAIL")


@torch_missing
def test_pipeline_check_passes_and_its_bench_code_runs(pp_script):
    proc = run_script(pp_script, "--check", "--cpu-bench", "--steps", "1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = checks(proc)
    # check: GPipe vs float64, 1F1B and interleaved 1F1B vs GPipe; bench: the two again
    assert len(lines) == 5 and all(line.endswith(" ok") for line in lines), proc.stdout
    assert lines[1].startswith("check 1F1B vs GPipe: 4 tensors per rank, bit for bit;")
    assert lines[2].startswith("check interleaved 1F1B vs GPipe: 4 tensors per rank, bit for")
    # p = 2 ranks, m = 4: (p-1)/(m+p-1) = 1/5 = 20.0 %; interleaved with v = 2 stages per
    # rank: (p-1)/(v*m+p-1) = 1/(8+1) = 1/9 = 11.1 %; the trace's stage 0: 39.4 % of 20.0 %
    assert ("GPipe and 1F1B (p-1)/(m+p-1) = 1/5 = 20.0%, interleaved 1F1B (v = 2) "
            "(p-1)/(v*m+p-1) = 1/9 = 11.1%; traced on stage 0 of 2: 39.4% (ideal 20.0%)"
            in proc.stdout)  # fmt: skip
    # the bench's advice line: twice the micro-batches, (2-1)/(8+2-1) = 1/9
    assert "--set MICROBATCHES=8 (ideal (p-1)/(m+p-1) = 1/9 = 11.1%)" in proc.stdout


@torch_missing
def test_pipeline_check_fails_when_a_schedule_drops_a_micro_batch(pp_script):
    proc = run_script(pp_script, "--check", "--fault", "drop-microbatch")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = {line.split(":")[0]: line for line in checks(proc)}
    assert lines["check 1F1B vs GPipe"].endswith(" FAIL")
    assert lines["check interleaved 1F1B vs GPipe"].endswith(" ok")  # (not the faulty one)
