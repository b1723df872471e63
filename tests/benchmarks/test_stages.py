"""benchmarks/stages.py: the table of stages from samples and marks (numbers worked out by
hand below), and the tool run on a sample trace."""

import importlib.util
import json
import subprocess
import sys

import pytest
from conftest import H200_SINGLE, ROOT

spec = importlib.util.spec_from_file_location("stages", ROOT / "benchmarks" / "stages.py")
stages = importlib.util.module_from_spec(spec)
sys.modules["stages"] = stages  # (its dataclasses look their module up)
spec.loader.exec_module(stages)
S = stages.Sample


def test_stage_table_by_hand():
    samples = [S(0.0, 0.0, 10, 20, 30), S(1.0, 2.0, 50, 60, 70), S(2.0, 3.0, 40, 90, 100),
               S(3.0, 3.5, None, None, 80)]  # fmt: skip
    t = stages.stage_table(samples, [(2.0, "-x"), (1.0, "+x")], end=3.0)
    assert [(s.begins, s.ends, s.start_s, s.wall_s) for s in t] == [
        ("start", "+x", 0.0, 1.0),
        ("+x", "-x", 1.0, 1.0),
        ("-x", "end", 2.0, 1.0),
    ]
    # cores: CPU seconds over wall from the sample at or before the start to the one at or
    # after the end: (2 - 0) / 1, (3 - 2) / 1, (3.5 - 3) / 1
    assert [s.cores for s in t] == [2.0, 1.0, 0.5]
    # the largest sample within [start, end): t=0 alone; t=1 alone; t=2 (and t=3's unknowns)
    assert [(s.in_use_mb, s.heap_mb, s.rss_mb) for s in t] == [
        (10, 20, 30),
        (50, 60, 70),
        (40, 90, 100),
    ]
    # a span no sample fell in has no memory figures
    empty = stages.stage_table(samples, [(1.2, "+y"), (1.4, "-y")], end=3.0)[1]
    assert (empty.in_use_mb, empty.heap_mb, empty.rss_mb) == (None, None, None)


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc/self/statm")
def test_the_tool_marks_the_stages_of_a_real_command(tmp_path):
    out = tmp_path / "stages.json"
    run = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "stages.py"), "--json", str(out), "--",
         "analyze", str(H200_SINGLE), "--format", "json"],
        capture_output=True, text=True, timeout=300)  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["findings"] is not None  # (the command's own output)
    got = json.loads(out.read_text())
    names = [m[1] for m in got["marks"]]
    for mark in ("+load_trace", "-load_trace", "+attribute_gaps", "-attribute_gaps",
                 "+find_on_device", "-find_on_device"):  # fmt: skip
        assert mark in names
    assert names.index("-load_trace") < names.index("+attribute_gaps")
    assert got["peak_rss_mb"] > 0 and "peak RSS" in run.stderr
