"""The ranks' analyses on Dask (cluster.py): a LocalCluster, and a scheduler with workers
started as separate processes on loopback, give the documents of the local run; a bad or
missing trace is one line naming it (and the worker), the others finish; a task whose worker
dies is run again, and reported when it has killed two; without Dask, one line says how to
install it."""

import functools
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import H200_2GPU, H200_SINGLE, ROOT

from advisor.errors import AdvisorInputError
from advisor.options import AnalysisOptions

pytest.importorskip("distributed")
import cloudpickle  # noqa: E402  (a dependency of distributed)

from advisor.cluster import DaskRunner  # noqa: E402

sys.path.insert(0, str(ROOT / "sample_traces"))
from split_ranks import split  # noqa: E402

cloudpickle.register_pickle_by_value(sys.modules[__name__])  # (the workers cannot import it)


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    return [str(p) for p in split(str(H200_2GPU), tmp_path_factory.mktemp("ranks"))]


def advisor(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "advisor", *args], capture_output=True,
                          text=True, timeout=timeout)  # fmt: skip


def analyze_json(*args):
    proc = advisor("analyze", *args, "--format", "json")
    return proc, (json.loads(proc.stdout) if proc.stdout else None)


def test_a_local_cluster_gives_the_local_document(ranks, tmp_path):
    bad = tmp_path / "broken.sqlite"
    bad.write_bytes(b"not sqlite")
    _, local = analyze_json(*ranks, str(bad), "--jobs", "2")
    proc, remote = analyze_json(*ranks, str(bad), "--dask", "local", "--jobs", "2")
    assert proc.returncode == 2  # the bad trace: reported by name, the others analysed
    assert proc.stderr.strip().splitlines()[-1].startswith(f"advisor: error: {bad}: not a")
    assert "(on Dask worker tcp://127.0.0.1:" in proc.stderr
    rows = remote.pop("ranks")
    assert rows[2]["error"].startswith(local.pop("ranks")[2]["error"] + " (on Dask worker")
    assert remote == local and remote["findings"]


@pytest.fixture(scope="module")
def scheduler(tmp_path_factory):
    """A dask scheduler and two single-threaded workers, each its own process on
    127.0.0.1 (as `dask scheduler` / `dask worker` on a cluster's nodes)."""
    folder = tmp_path_factory.mktemp("dask")
    info = folder / "scheduler.json"
    common = ["--no-dashboard"]
    procs = [subprocess.Popen(
        [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
         "--port", "0", "--scheduler-file", str(info), *common],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]  # fmt: skip
    try:
        deadline = time.time() + 60
        while not info.exists() and time.time() < deadline:
            time.sleep(0.2)
        address = json.loads(info.read_text())["address"]
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "distributed.cli.dask_worker", "--scheduler-file",
             str(info), "--nworkers", "2", "--nthreads", "1", *common],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))  # fmt: skip
        from distributed import Client

        with Client(address, timeout="60s") as client:
            client.wait_for_workers(2, timeout=60)
        yield address
    finally:
        for p in reversed(procs):
            p.terminate()
            p.wait(timeout=30)


def test_a_scheduler_and_workers_on_loopback(ranks, scheduler, tmp_path):
    _, local = analyze_json(*ranks)
    proc, remote = analyze_json(*ranks, "--dask", scheduler)
    assert proc.returncode == 0, proc.stderr
    assert remote == local
    # a path the workers do not have: named with the worker, the other rank analysed
    missing = str(tmp_path / "gone" / "rank2.sqlite")
    proc, doc = analyze_json(ranks[0], missing, "--dask", scheduler)
    assert proc.returncode == 2
    line = proc.stderr.strip().splitlines()[-1]
    assert line.startswith(f"advisor: error: {missing}: ") and "(on Dask worker tcp://" in line
    assert [r["error"] is None for r in doc["ranks"]] == [True, False]


def test_the_gate_on_the_cluster(scheduler):
    args = ["gate", "--baseline", str(H200_SINGLE), "--candidate", str(H200_SINGLE),
            "--format", "json"]  # fmt: skip
    local, remote = advisor(*args), advisor(*args, "--dask", scheduler)
    assert (local.returncode, remote.returncode) == (0, 0), remote.stderr
    assert json.loads(remote.stdout) == json.loads(local.stdout)


def test_the_diff_report_on_the_cluster(scheduler, tmp_path):
    pair = [str(H200_SINGLE), str(ROOT / "sample_traces" / "h200_tiny_graphlevel.sqlite")]
    assert advisor("report", *pair, "-o", str(tmp_path / "a.md")).returncode == 0
    proc = advisor("report", *pair, "-o", str(tmp_path / "b.md"), "--dask", scheduler)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "b.md").read_text() == (tmp_path / "a.md").read_text()


def die(marker: Path, times: int, a, options) -> dict:
    """A rank task's extra that kills its worker process the first ``times`` times."""
    runs = int(marker.read_text()) if marker.exists() else 0
    marker.write_text(str(runs + 1))
    if runs < times:
        os._exit(1)
    return {"runs": runs + 1}


def test_a_dying_worker_is_retried_then_reported(tmp_path):
    options = AnalysisOptions()
    with DaskRunner("local", jobs=2) as run:
        once = functools.partial(die, tmp_path / "once", 1)
        part = run.map([str(H200_SINGLE)], options, extra=once)[0]
        assert part.error is None and part.extra == {"runs": 2}  # run again, elsewhere
        always = functools.partial(die, tmp_path / "always", 99)
        part = run.map([str(H200_SINGLE)], options, extra=always)[0]
    assert part.error == f"{H200_SINGLE}: the Dask workers running it died twice"


def test_progress_over_ranks(ranks):
    from advisor.multi import analyze_ranks

    done = []
    with DaskRunner("local", jobs=2) as run:
        job = analyze_ranks(ranks, AnalysisOptions(), on_read=done.append, runner=run)
    assert sorted(p.path for p in done) == sorted(ranks) and len(job.ranks) == 2


def test_an_unreachable_scheduler_is_one_line():
    proc = advisor("analyze", str(H200_SINGLE), "--dask", "tcp://127.0.0.1:9", timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.startswith("advisor: error: --dask tcp://127.0.0.1:9: cannot reach")
    assert len(proc.stderr.strip().splitlines()) == 1 and not proc.stdout


def test_a_malformed_address_is_one_line():
    with pytest.raises(AdvisorInputError, match=r"--dask foo: .*give tcp://HOST:PORT"):
        DaskRunner("foo")


def test_without_dask_it_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)  # (import fails as if absent)
    with pytest.raises(AdvisorInputError, match=r'pip install "advisor\[dask\]"'):
        DaskRunner("local")
    argv = ["advisor", "analyze", str(H200_SINGLE), "--dask", "local"]
    code = (f"import sys; sys.modules['distributed'] = None; sys.argv = {argv!r}; "
            "from advisor.cli import main; main()")  # fmt: skip
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 2 and not proc.stdout
    assert proc.stderr.strip() == ("advisor: error: --dask needs dask.distributed, which is "
                                   'not installed: pip install "advisor[dask]"')  # fmt: skip
