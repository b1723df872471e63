"""The Trace model's names for a report (Trace.title / Trace.short_name), on hand-built
traces: one trace, a job in one folder, a job across folders."""

import pandas as pd

from advisor.trace.model import Trace


def job(paths: list[str]) -> Trace:
    return Trace(path=", ".join(paths), paths=paths, format="nsys-sqlite",
                 producer_version="x", kernels=pd.DataFrame())  # fmt: skip


def test_one_trace_is_its_path():
    t = Trace(path="/runs/a b/trace.sqlite", format="f", producer_version="x",
              kernels=pd.DataFrame())  # fmt: skip
    assert t.title() == "/runs/a b/trace.sqlite" and t.short_name() == "trace.sqlite"
    assert job(["/r/x.json"]).title() == "/r/x.json"  # a job of one trace


def test_a_job_in_one_folder_names_the_folder_and_the_ends():
    paths = [f"/runs/job_16/rank{i:04d}.sqlite" for i in range(16)]
    assert job(paths).title() == ("16 traces in /runs/job_16 (rank0000.sqlite ... rank0015.sqlite)")
    assert job(paths).short_name() == "job_16, 16 traces"
    assert job(paths[:3]).title() == (
        "3 traces in /runs/job_16 (rank0000.sqlite, rank0001.sqlite, rank0002.sqlite)"
    )


def test_a_job_across_folders_keeps_whole_paths():
    paths = ["/a/r0.json", "/b/r1.json", "/c/r2.json", "/d/r3.json"]
    assert job(paths).title() == "4 traces (/a/r0.json ... /d/r3.json)"
    assert job(paths).short_name() == "4 traces"
    assert job(paths[:2]).title() == "2 traces (/a/r0.json, /b/r1.json)"
