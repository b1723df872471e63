"""Same input, same options: byte-identical JSON, markdown report, charts and emitted files."""

import hashlib
import subprocess
import sys

import pytest
from conftest import H200_2GPU, ROOT


def _run(out):
    subprocess.run([sys.executable, "-m", "advisor", "report", str(H200_2GPU), "-o",
                    str(out / "r.md"), "--emit", str(out / "emit")], check=True,
                   capture_output=True, timeout=300)  # fmt: skip
    json_out = subprocess.run([sys.executable, "-m", "advisor", "analyze", str(H200_2GPU),
                               "--format", "json"], check=True, capture_output=True,
                              timeout=300).stdout  # fmt: skip
    files = {p.relative_to(out).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
             for p in sorted(out.rglob("*")) if p.is_file()}  # fmt: skip
    return json_out, files


def test_two_runs_give_identical_outputs(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    json_a, files_a = _run(a)
    json_b, files_b = _run(b)
    assert json_a == json_b
    assert "r.md" in files_a and any(f.endswith(".png") for f in files_a)
    assert files_a == files_b


@pytest.mark.parametrize("path", [
    H200_2GPU,  # (two GPUs, comm)
    ROOT / "sample_traces" / "h200_train_steps.sqlite",  # (ranges, steps, syncs, copies)
    ROOT / "tests" / "data" / "public" / "kineto" / "hta_alexnet_cuda_sync.json.gz",
    ROOT / "tests" / "data" / "public" / "kineto" / "hta_negative_queue_rank0.json.gz",
])  # fmt: skip
def test_one_thread_and_two_give_identical_documents(path, monkeypatch):
    # the analysis, the rules and the document compute parts on other threads (ahead,
    # beside: metrics/ahead.py); the JSON document is the same bytes without them (the
    # gaps attributed 64 at a time: several blocks, computed ahead on two threads)
    import functools

    import advisor
    from advisor.metrics import ahead, attribution, gaps

    monkeypatch.setattr(gaps, "attribute", functools.partial(attribution.attribute, block=64))
    documents = []
    for threads in (1, 2):
        monkeypatch.setattr(ahead, "ANALYSIS_THREADS", threads)
        documents.append(b"".join(advisor.analyze(path).json_parts()))
    assert documents[0] == documents[1] and len(documents[0]) > 10_000
