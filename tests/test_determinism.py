"""Same input, same options: byte-identical JSON, markdown report, charts and emitted files."""

import hashlib
import subprocess
import sys

from conftest import H200_2GPU


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
