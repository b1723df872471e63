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
    assert got["heap_growth"] == []  # (only asked for with --holes)


@pytest.mark.skipif(sys.platform != "linux", reason="glibc's malloc_info")
def test_the_heaps_growth_with_its_free_chunks(tmp_path):
    # the analysis grows the heap (from a few MB after the imports): each growth recorded
    # is one, its free memory inside the heap, the largest free chunk no more than that
    out = tmp_path / "stages.json"
    run = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "stages.py"), "--holes", "--json", str(out),
         "--", "analyze", str(H200_SINGLE), "--format", "json"],
        capture_output=True, text=True, timeout=300)  # fmt: skip
    assert run.returncode == 0, run.stderr
    grew = json.loads(out.read_text())["heap_growth"]
    assert grew and "heap growth (--holes)" in run.stderr
    for g in grew:
        assert g["heap_mb"] > g["before_mb"] and 0 <= g["largest_free_mb"] <= g["free_mb"]


def test_free_chunks_by_hand():
    # the first heap's bins (a bin's "to": its largest chunk) and its fast + rest totals;
    # another arena's heap is not the main one. Free: (1,048,576 + 245,565,724) bytes =
    # 235.19 MB; largest: the unsorted bin's 94,332,161 bytes = 89.96 MB (above the
    # regular bins' largest, 53,601,697)
    info = """<malloc version="1">
<heap nr="0">
<sizes>
  <size from="49" to="49" total="343" count="7"/>
  <size from="551953" to="53601697" total="234122996" count="36"/>
  <unsorted from="257" to="94332161" total="94332418" count="2"/>
</sizes>
<total type="fast" count="3" size="1048576"/>
<total type="rest" count="573" size="245565724"/>
<system type="current" size="2008539136"/>
</heap>
<heap nr="1">
<sizes>
  <size from="1" to="999999999" total="999999999" count="1"/>
</sizes>
<total type="rest" count="1" size="999999999"/>
</heap>
</malloc>"""
    free, largest = stages.free_chunks(info)
    assert round(free, 2) == 235.19 and round(largest, 2) == 89.96
    assert stages.free_chunks("<malloc></malloc>") == (0.0, 0.0)
