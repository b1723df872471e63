"""The ranks' analyses on Dask (cluster.py): a LocalCluster, and a scheduler with workers
started as separate processes on loopback (over TCP, and over TLS with a certificate made
here), give the documents of the local run; the LocalCluster listens on loopback only; a bad
or missing trace is one line naming it (and the worker), the others finish; a task whose
worker dies is run again, and reported when it has killed two; without Dask, or without TLS
settings for a tls:// scheduler, one line says what to do."""

import functools
import ipaddress
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from conftest import H200_2GPU, H200_SINGLE, ROOT

from advisor.errors import AdvisorInputError
from advisor.options import AnalysisOptions

pytest.importorskip("distributed")
import cloudpickle  # noqa: E402  (a dependency of distributed)

from advisor.cluster import INSTALL_HINT, DaskRunner  # noqa: E402

sys.path.insert(0, str(ROOT / "sample_traces"))
from split_ranks import split  # noqa: E402

cloudpickle.register_pickle_by_value(sys.modules[__name__])  # (the workers cannot import it)


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    return [str(p) for p in split(str(H200_2GPU), tmp_path_factory.mktemp("ranks"))]


def advisor(*args, timeout=300, env=None):
    return subprocess.run([sys.executable, "-m", "advisor", *args], capture_output=True,
                          text=True, timeout=timeout, env=env)  # fmt: skip


def analyze_json(*args, env=None):
    proc = advisor("analyze", *args, "--format", "json", env=env)
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


def _cluster(folder: Path, scheduler_args=(), common=(), security=None):
    """A dask scheduler and two single-threaded workers, each its own process on
    127.0.0.1 (as `dask scheduler` / `dask worker` on a cluster's nodes); yields the
    scheduler's address once both workers joined."""
    info = folder / "scheduler.json"
    # (Dask's HTTP endpoints bind every interface unless told otherwise, dashboard or not)
    common = ["--no-dashboard", "--dashboard-address", "127.0.0.1:0", *common]
    procs = [subprocess.Popen(
        [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
         "--port", "0", "--scheduler-file", str(info), *scheduler_args, *common],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]  # fmt: skip
    try:
        deadline = time.time() + 60
        while not info.exists() and time.time() < deadline:
            time.sleep(0.2)
        address = json.loads(info.read_text())["address"]
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "distributed.cli.dask_worker", "--scheduler-file",
             str(info), "--host", "127.0.0.1", "--nworkers", "2", "--nthreads", "1", *common],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))  # fmt: skip
        from distributed import Client

        with Client(address, timeout="60s", security=security) as client:
            client.wait_for_workers(2, timeout=60)
        yield address
    finally:
        for p in reversed(procs):
            p.terminate()
            p.wait(timeout=30)


@pytest.fixture(scope="module")
def scheduler(tmp_path_factory):
    """A scheduler and two workers over plain TCP on loopback."""
    yield from _cluster(tmp_path_factory.mktemp("dask"))


@pytest.fixture(scope="module")
def tls_scheduler(tmp_path_factory):
    """A scheduler and two workers over TLS on loopback, with a self-signed certificate made
    here (its own CA, for every party); yields the address and the environment that gives an
    advisor run Dask's TLS settings."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed to make the test certificate")
    folder = tmp_path_factory.mktemp("dask_tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1"], check=True,
                   capture_output=True)  # fmt: skip
    from distributed.security import Security

    tls = ["--tls-ca-file", str(cert), "--tls-cert", str(cert), "--tls-key", str(key)]
    env = {**os.environ, "DASK_DISTRIBUTED__COMM__TLS__CA_FILE": str(cert),
           "DASK_DISTRIBUTED__COMM__TLS__CLIENT__CERT": str(cert),
           "DASK_DISTRIBUTED__COMM__TLS__CLIENT__KEY": str(key)}  # fmt: skip
    security = Security(tls_ca_file=str(cert), tls_client_cert=str(cert),
                        tls_client_key=str(key), require_encryption=True)  # fmt: skip
    for address in _cluster(folder, ["--protocol", "tls"], tls, security):
        yield address, env


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


def test_a_scheduler_and_workers_over_tls(ranks, tls_scheduler):
    address, env = tls_scheduler
    assert address.startswith("tls://127.0.0.1:")
    _, local = analyze_json(*ranks)
    proc, remote = analyze_json(*ranks, "--dask", address, env=env)
    assert proc.returncode == 0, proc.stderr
    assert remote == local
    # without Dask's TLS settings, or over plain TCP: one line, exit 2, nothing on stdout
    plain = {k: v for k, v in env.items() if not k.startswith("DASK_DISTRIBUTED__COMM__TLS")}
    tcp = address.replace("tls://", "tcp://")
    for args, env_, says in [
        ([address], plain, f"--dask {address}: a tls:// scheduler needs Dask's TLS settings "
                           "(distributed.comm.tls.ca-file, distributed.comm.tls.client.cert, "),
        ([tcp], plain, f"--dask {tcp}: cannot reach the scheduler"),
    ]:  # fmt: skip
        proc = advisor("analyze", ranks[0], "--dask", *args, env=env_, timeout=120)
        assert proc.returncode == 2 and not proc.stdout
        assert proc.stderr.startswith(f"advisor: error: {says}"), proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1


LISTENERS = textwrap.dedent("""
    import json, sys

    import psutil

    from advisor.cluster import DaskRunner

    if __name__ == "__main__":
        with DaskRunner("local", jobs=2) as run:  # (as `advisor ... --dask local --jobs 2`)
            run.client.wait_for_workers(2, timeout=60)
            me = psutil.Process()
            sockets = [c.laddr.ip for p in [me, *me.children(recursive=True)]
                       for c in p.net_connections(kind="inet") if c.status == psutil.CONN_LISTEN]
            info = run.client.scheduler_info()
            json.dump({"sockets": sockets, "processes": len(me.children(recursive=True)),
                       "addresses": [info["address"], *info["workers"]]}, sys.stdout)
""")


def test_a_local_cluster_listens_on_loopback_only(tmp_path):
    # in a process of its own: the listening sockets of it and its children are the cluster's
    script = tmp_path / "listeners.py"
    script.write_text(LISTENERS)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # (this checkout's advisor)
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=300, env=env)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    found = json.loads(proc.stdout)
    # scheduler, two nannies and two workers, each worker with its HTTP endpoints
    assert found["processes"] >= 2 and len(found["sockets"]) >= 5
    assert all(ipaddress.ip_address(ip).is_loopback for ip in found["sockets"]), found
    assert all(a.startswith("tcp://127.0.0.1:") for a in found["addresses"]), found


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
    with pytest.raises(AdvisorInputError, match=r"--dask foo: .*give tcp://HOST:PORT, tls://"):
        DaskRunner("foo")


def test_without_dask_it_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)  # (import fails as if absent)
    with pytest.raises(AdvisorInputError, match=re.escape(INSTALL_HINT)):
        DaskRunner("local")
    argv = ["advisor", "analyze", str(H200_SINGLE), "--dask", "local"]
    code = (f"import sys; sys.modules['distributed'] = None; sys.argv = {argv!r}; "
            "from advisor.cli import main; main()")  # fmt: skip
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 2 and not proc.stdout
    assert proc.stderr.strip() == (
        "advisor: error: --dask needs dask.distributed, which is not installed: "
        'pip install ".[dask]" (in the advisor checkout)'
    )
