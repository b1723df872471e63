"""The PyTorch profiler (Kineto) JSON reader: a hand-built document with numbers worked out
by hand, the two H200 Kineto captures against the Nsight exports of the same workloads, and
bad input."""

import gzip
import json

import numpy as np
import pytest
from conftest import SAMPLES, analysis_of, sha256

from advisor.analysis import analyze
from advisor.errors import AdvisorInputError
from advisor.findings import find
from advisor.rules.tables import build_tables
from advisor.trace.load import load_trace

KINETO = SAMPLES / "kineto"

# Two kernels launched by cudaLaunchKernel on one thread, a copy, a record_function range
# and an aten::mm op with its input dims. ts are microseconds with fractions.
HAND = {
    "schemaVersion": 1,
    "deviceProperties": [{"id": 0, "name": "NVIDIA H200", "computeMajor": 9, "computeMinor": 0,
                          "numSms": 132, "warpSize": 32, "maxThreadsPerMultiprocessor": 2048,
                          "regsPerMultiprocessor": 65536, "sharedMemPerMultiprocessor": 233472,
                          "sharedMemPerBlockOptin": 232448}],
    "distributedInfo": {"backend": "nccl", "rank": 3, "world_size": 8},
    "traceEvents": [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#7", "pid": 10, "tid": 11,
         "ts": 5267163990000.0, "dur": 100.0},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 10, "tid": 11,
         "ts": 5267163990001.5, "dur": 10.0,
         "args": {"Input Dims": [[896, 8192], [8192, 4864]]}},
        {"ph": "X", "cat": "cpu_op", "name": "aten::relu", "pid": 10, "tid": 11,
         "ts": 5267163990030.0, "dur": 5.0, "args": {"Input Dims": [[896, 4864]]}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 10, "tid": 11,
         "ts": 5267163990002.001, "dur": 4.5, "args": {"correlation": 101}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 10, "tid": 11,
         "ts": 5267163990031.0, "dur": 3.0, "args": {"correlation": 102}},
        {"ph": "X", "cat": "kernel", "name": "gemm_like", "pid": 0, "tid": 7,
         "ts": 5267163990010.123, "dur": 15.877,
         "args": {"device": 0, "stream": 7, "correlation": 101, "grid": [7, 19, 1],
                  "block": [256, 1, 1], "registers per thread": 196,
                  "shared memory": 147456}},
        {"ph": "X", "cat": "kernel", "name": "relu_kernel", "pid": 0, "tid": 7,
         "ts": 5267163990040.0, "dur": 2.0,
         "args": {"device": 0, "stream": 7, "correlation": 102, "grid": [100, 1, 1],
                  "block": [128, 1, 1], "registers per thread": 16, "shared memory": 0}},
        {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "pid": 0,
         "tid": 7, "ts": 5267163990050.0, "dur": 4.0,
         "args": {"device": 0, "stream": 7, "correlation": 103, "bytes": 4096}},
        {"ph": "f", "cat": "ac2g", "name": "ac2g", "pid": 10, "tid": 11, "ts": 1.0, "id": 101},
        {"name": "process_name", "ph": "M", "pid": 10, "tid": 0, "args": {"name": "python"}},
    ],
}  # fmt: skip


@pytest.fixture
def hand(tmp_path):
    p = tmp_path / "hand.pt.trace.json.gz"
    p.write_bytes(gzip.compress(json.dumps(HAND).encode()))
    return p


def test_hand_built_document(hand):
    before = sha256(hand)
    t = load_trace(hand)
    assert sha256(hand) == before and [x.name for x in hand.parent.iterdir()] == [hand.name]
    assert t.format == "kineto-json" and t.rank == 3
    k = t.kernels.set_index("name")
    # 5267163990010.123 us -> 5267163990010123 ns exactly; + 15.877 us
    assert k.loc["gemm_like", "start"] == 5_267_163_990_010_123
    assert k.loc["gemm_like", "end"] == 5_267_163_990_026_000
    assert (k.loc["gemm_like", "grid_x"], k.loc["gemm_like", "grid_y"]) == (7, 19)
    assert k.loc["gemm_like", "registers"] == 196 and k.loc["gemm_like", "static_smem"] == 147456
    assert set(k["pid"]) == {10}  # the launching process, not the device
    assert t.api["correlation"].tolist() == [101, 102] and t.api["start"].iloc[0] == (
        5_267_163_990_002_001
    )  # fmt: skip
    c = t.memcpy.iloc[0]
    assert (c["kind"], c["src_memory"], c["dst_memory"]) == ("HtoD", "pageable", "device")
    assert c["bytes"] == 4096
    # the step and the mm op are ranges (relu is not a GEMM op: left out)
    assert t.nvtx["text"].tolist() == [
        "ProfilerStep#7", "aten::mm, sizes = [[896,8192],[8192,4864]]"
    ]  # fmt: skip
    g = t.gpus[0]
    assert (g.name, g.sm_count, g.max_warps_per_sm, g.max_blocks_per_sm) == ("NVIDIA H200", 132,
                                                                             64, 32)  # fmt: skip
    assert g.source == "trace (deviceProperties)"


def test_hand_built_analysis(hand):
    a = analysis_of(hand)
    k = build_tables(a)["kernels"].set_index("name")
    # the op range gives the shape: 896 x 4864 x 8192; launched inside aten::mm: gemm_by op
    gemm = k.loc["gemm_like"]
    assert (gemm.m, gemm.n, gemm.k, gemm.gemm_by) == (896, 4864, 8192, "op")
    # 147456 + 1024 B per CTA: 1 CTA/SM; 133 CTAs: 1.0076 waves
    assert gemm.ctas_per_sm == 1 and np.isclose(gemm.waves, 133 / 132)
    assert a.regions["name"].tolist() == ["ProfilerStep"]


def test_kineto_and_nsys_of_one_workload_agree():
    # the same workload captured twice (sample_traces/capture_round2.sh): the launch
    # configurations, waves and findings agree; times differ by the run
    kin = analysis_of(KINETO / "h200_gemm_evidence.pt.trace.json.gz")
    nsy = analysis_of(SAMPLES / "h200_gemm_evidence.sqlite")
    cols = ["name", "grid_x", "grid_y", "grid_z", "block_threads", "registers",
            "smem_per_block", "ctas_per_sm", "waves"]  # fmt: skip
    key = ["name", "grid_x", "grid_y"]
    a = kin.kernel_table()[cols].sort_values(key).reset_index(drop=True)
    b = nsy.kernel_table()[cols].sort_values(key).reset_index(drop=True)
    assert a.equals(b)
    # (host work between the workload's sections is the run's own: in the Nsight run the
    # host spent 144 us in Python, outside every operator, between the synchronize before
    # linear_op_shapes and its aten::linear, a host-busy finding on that 0.67 ms range; in
    # the torch.profiler run it sat in that synchronize instead)
    fa = {(f.rule, f.region, f.kernel) for f in find(kin) if f.rule != "host-busy"}
    fb = {(f.rule, f.region, f.kernel) for f in find(nsy) if f.rule != "host-busy"}
    assert fa == fb
    for f in find(kin):  # savings within 10 % of the Nsight run's
        g = next(x for x in find(nsy) if (x.rule, x.region) == (f.rule, f.region))
        assert abs(f.est_savings_ns - g.est_savings_ns) <= 0.1 * g.est_savings_ns


def test_kineto_training_steps():
    a = analysis_of(KINETO / "h200_train_steps.pt.trace.json.gz")
    top = find(a)[0]
    assert (top.rule, top.region, top.severity) == ("host-bound-steps", "ProfilerStep",
                                                             "high")  # fmt: skip
    assert top.evidence["steps"] == 4  # schedule(wait=1, warmup=1, active=4)
    k = build_tables(a)["kernels"]
    # the backward GEMMs' shapes come from the ops' Input Dims (no --shape needed)
    mm = k[(k["gemm_by"] == "op") & k["m"].notna()]
    assert {(2048, 512, 2048), (8192, 512, 2048)} & set(
        zip(mm["m"].astype(int), mm["n"].astype(int), mm["k"].astype(int), strict=True)
    )


@pytest.mark.parametrize(
    "data, says",
    [
        (b'{"traceEvents": [{"ph": "X", "cat": "kernel", "ts": 1.0', "not a valid Kineto JSON"),
        (gzip.compress(b'{"traceEvents": [')[:-6], "cannot read"),
        (
            b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::add", "ts": 1.0, '
            b'"dur": 2.0, "pid": 1, "tid": 1}]}',
            "without GPU kernels",
        ),
        (b'{"schemaVersion": 1, "deviceProperties": []}', "without 'traceEvents'"),
        (b'{"foo": [1, 2, 3]}', "a JSON object with keys 'foo', not a profiler trace"),
    ],
)
def test_bad_kineto_input(tmp_path, data, says):
    p = tmp_path / "bad.json"
    p.write_bytes(data)
    with pytest.raises(AdvisorInputError) as err:
        load_trace(p)
    assert says in str(err.value) and str(p) in str(err.value)


def test_gate_and_report_across_formats(tmp_path):
    # the Nsight export and the Kineto trace of one workload compare (exit 0 or 1, not 2)
    import subprocess
    import sys

    nsys_trace = SAMPLES / "h200_gemm_evidence.sqlite"
    kineto_trace = KINETO / "h200_gemm_evidence.pt.trace.json.gz"
    proc = subprocess.run([sys.executable, "-m", "advisor", "gate", "--baseline",
                           str(nsys_trace), "--candidate", str(kineto_trace), "--format",
                           "json"], capture_output=True, text=True, timeout=300)  # fmt: skip
    assert proc.returncode in (0, 1), proc.stderr
    doc = json.loads(proc.stdout)
    # the ranges and kernels match across the formats: most metrics compare as unchanged
    assert doc["unchanged"] >= 40 and not [r for r in doc["rows"] if r["status"].startswith("only")]
    out = tmp_path / "diff.md"
    proc = subprocess.run([sys.executable, "-m", "advisor", "report", str(nsys_trace),
                           str(kineto_trace), "-o", str(out)], capture_output=True, text=True,
                          timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert out.read_text().startswith("# advisor comparison: h200_gemm_evidence.sqlite -> ")


@pytest.mark.parametrize("processes", [2, 3, 7])
def test_parallel_read_gives_the_same_analysis(tmp_path, monkeypatch, processes):
    # the training-steps capture, uncompressed, read with msgspec alone (the compiled
    # scanner switched off) in spans cut between events by several processes (thresholds
    # lowered for the test): the same tables, row for row, and the same document
    from advisor.render.json import document
    from advisor.trace import kineto

    src = KINETO / "h200_train_steps.pt.trace.json.gz"
    plain = tmp_path / "steps.pt.trace.json"
    plain.write_bytes(gzip.decompress(src.read_bytes()))
    monkeypatch.setenv(kineto.SCANNER_ENV, "0")
    whole = load_trace(plain)
    monkeypatch.setattr(kineto, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(kineto, "SPAN_MIN_BYTES", plain.stat().st_size // processes)
    monkeypatch.setattr(kineto, "READ_PROCESSES", processes)
    spans = load_trace(plain)
    for name in ("kernels", "api", "memcpy", "memset", "nvtx"):
        a, b = getattr(whole, name), getattr(spans, name)
        assert len(a) and a.equals(b), name
    assert (whole.gpus, whole.rank, whole.warnings) == (spans.gpus, spans.rank, spans.warnings)
    da, db = (document(x, find(x)) for x in (analyze(whole), analyze(spans)))
    assert da == db


def test_read_ahead_returns_the_file_exactly(tmp_path):
    # blocks of 7 bytes read ahead by a thread; reads of other sizes, the rest, and EOF
    import io

    from advisor.trace.kineto import _ReadAhead

    data = bytes(range(256)) * 3
    with _ReadAhead(io.BytesIO(data), block=7) as ahead:
        got = [ahead.read(5), ahead.read(7), ahead.read(20), ahead.read(-1), ahead.read(4)]
    assert got[:3] == [data[:5], data[5:12], data[12:32]]
    assert got[3] == data[32:] and got[4] == b""

    class Broken(io.BytesIO):
        def read(self, n=-1):
            raise EOFError("Compressed file ended before the end-of-stream marker was reached")

    with pytest.raises(EOFError), _ReadAhead(Broken(), block=7) as ahead:
        ahead.read(3)
    # leaving early with blocks still queued does not hang (the producer is drained)
    with _ReadAhead(io.BytesIO(data * 100), block=7, ahead=1) as ahead:
        assert ahead.read(1) == data[:1]


def _damaged_capture(tmp_path):
    """The training-steps capture in Kineto's own layout with four events damaged: the 4th
    kernel's grid is "x", the 6th kernel's ts is "abc", the 3rd runtime call's correlation
    is "zz" and the 1st copy's bytes is [1]. Returns (path, kernels in the capture)."""
    text = gzip.decompress((KINETO / "h200_train_steps.pt.trace.json.gz").read_bytes()).decode()
    open_at = text.index("[", text.index('"traceEvents"')) + 1
    close_at = text.rindex("\n  ]")
    body = text[open_at:close_at].removeprefix("\n  ")
    blocks = [b if b.startswith("{") else "{" + b for b in body.split(",\n  {")]
    seen = {"kernel": 0, "cuda_runtime": 0, "gpu_memcpy": 0}
    damage = {("kernel", 4): ("args", "grid", "x"), ("kernel", 6): (None, "ts", "abc"),
              ("cuda_runtime", 3): ("args", "correlation", "zz"),
              ("gpu_memcpy", 1): ("args", "bytes", [1])}  # fmt: skip
    for i, block in enumerate(blocks):
        event = json.loads(block)
        cat = event.get("cat")
        if cat in seen:
            seen[cat] += 1
            hit = damage.get((cat, seen[cat]))
            if hit:
                where, key, value = hit
                (event[where] if where else event)[key] = value
                blocks[i] = json.dumps(event)
    path = tmp_path / "damaged.pt.trace.json"
    path.write_text(text[:open_at] + "\n  " + ",\n  ".join(blocks) + text[close_at:])
    return path, seen["kernel"]


@pytest.mark.parametrize("mode", ["scanner", "msgspec", "msgspec in spans"])
def test_bad_values_are_missing_and_counted_not_fatal(tmp_path, monkeypatch, mode):
    from advisor.trace import kineto

    path, kernels = _damaged_capture(tmp_path)
    if mode != "scanner":
        monkeypatch.setenv(kineto.SCANNER_ENV, "0")
    if mode == "msgspec in spans":
        monkeypatch.setattr(kineto, "PARALLEL_MIN_BYTES", 0)
        monkeypatch.setattr(kineto, "SPAN_MIN_BYTES", path.stat().st_size // 3)
        monkeypatch.setattr(kineto, "READ_PROCESSES", 3)
    t = load_trace(path)
    assert len(t.kernels) == kernels - 1  # (the one whose ts is not a number)
    for line in ("1 kernel launches have a non-numeric 'grid'",
                 "1 runtime API calls have a non-numeric 'correlation'",
                 "1 memory copies have a non-numeric 'bytes'",
                 f"1 of {kernels:,} kernel launches dropped"):  # fmt: skip
        assert sum(line in w for w in t.warnings) == 1, (line, t.warnings)


@pytest.mark.parametrize("mode", ["scanner", "msgspec"])
def test_times_no_int64_can_hold_are_dropped_quietly(tmp_path, monkeypatch, mode):
    # a kernel whose dur is 1e300 us and one whose ts is -1e300 us (damaged numbers): dropped
    # and counted like a ts that is not a number, without numpy's "invalid value encountered
    # in cast" on stderr (it printed one, with decode.py's path, before)
    import warnings

    from advisor.trace import kineto

    doc = json.loads(gzip.decompress((KINETO / "h200_train_steps.pt.trace.json.gz").read_bytes()))
    kernels = [e for e in doc["traceEvents"] if e.get("cat") == "kernel"]
    kernels[2]["dur"], kernels[5]["ts"] = 1e300, -1e300
    path = tmp_path / "huge.pt.trace.json"
    path.write_text(json.dumps(doc))
    if mode != "scanner":
        monkeypatch.setenv(kineto.SCANNER_ENV, "0")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        t = load_trace(path)
    assert len(t.kernels) == len(kernels) - 2
    assert any(w.startswith(f"2 of {len(kernels):,} kernel launches dropped") for w in t.warnings)
