"""The report's shared names for what it is of (render.sections.trace_title/trace_name),
on hand-built traces: one trace, a job in one folder, a job across folders."""

import pandas as pd

from advisor.render.sections import trace_name, trace_title
from advisor.trace.model import Trace


def job(paths: list[str]) -> Trace:
    return Trace(path=", ".join(paths), paths=paths, format="nsys-sqlite",
                 producer_version="x", kernels=pd.DataFrame())  # fmt: skip


def test_one_trace_is_its_path():
    t = Trace(path="/runs/a b/trace.sqlite", format="f", producer_version="x",
              kernels=pd.DataFrame())  # fmt: skip
    assert trace_title(t) == "/runs/a b/trace.sqlite" and trace_name(t) == "trace.sqlite"
    assert trace_title(job(["/r/x.json"])) == "/r/x.json"  # a job of one trace


def test_a_job_in_one_folder_names_the_folder_and_the_ends():
    paths = [f"/runs/job_16/rank{i:04d}.sqlite" for i in range(16)]
    assert trace_title(job(paths)) == (
        "16 traces in /runs/job_16 (rank0000.sqlite ... rank0015.sqlite)"
    )
    assert trace_name(job(paths)) == "job_16, 16 traces"
    assert trace_title(job(paths[:3])) == (
        "3 traces in /runs/job_16 (rank0000.sqlite, rank0001.sqlite, rank0002.sqlite)"
    )


def test_a_job_across_folders_keeps_whole_paths():
    paths = ["/a/r0.json", "/b/r1.json", "/c/r2.json", "/d/r3.json"]
    assert trace_title(job(paths)) == "4 traces (/a/r0.json ... /d/r3.json)"
    assert trace_name(job(paths)) == "4 traces"
    assert trace_title(job(paths[:2])) == "2 traces (/a/r0.json, /b/r1.json)"


def test_quantization_says_what_was_not_computed():
    # kernel a: 1 CTA of 128 threads on an H200, 10 us; kernel b: a grid of 0 (no valid
    # number in the trace), 20 us: no waves, so no idle computed for it ("-", not 0 ns)
    from builders import trace as hand_trace

    from advisor.analysis import analyze
    from advisor.render.sections import quantization

    rows = [dict(name="a", start=0, end=10_000), dict(name="b", start=20_000, end=40_000,
                                                     grid_x=0)]  # fmt: skip
    section = quantization(analyze(hand_trace(rows)), top=10)
    shown = {r[0]: r for r in section.rows}
    headers = [c.header for c in section.cols]
    waves, share, idle, kind = (headers.index(h) for h in ("waves", "idle share",
                                                           "quant. idle", "kind"))  # fmt: skip
    assert [shown["b"][i] for i in (waves, share, idle, kind)] == ["-", "-", "-", "no facts"]
    assert shown["a"][waves] != "-" and shown["a"][idle].endswith("us")
    # without GPU facts nothing is computed: no rows, and the note says why
    t = hand_trace(rows)
    t.gpus = {}
    section = quantization(analyze(t), top=10)
    assert section.empty and section.note.startswith("not computed without GPU facts")
