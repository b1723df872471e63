"""Where the ranks' analyses run: ``LocalRunner`` (worker processes on this machine) or
``DaskRunner`` (the workers of a dask.distributed cluster: ``--dask tcp://host:port`` or
``tls://host:port``, or ``--dask local`` for a LocalCluster here). Both run parts.rank_part
once per trace and hand back the RankParts in the order of the paths; only the parts travel
back.

On Dask, workers read the traces by path (a shared filesystem). A trace that cannot be read
becomes its part's one-line error, naming the worker; a task whose worker dies is run again
on another worker by the scheduler, and reported when it has killed two (the LocalCluster
allows one failure; a cluster of your own follows its scheduler's
``distributed.scheduler.allowed-failures``).

The LocalCluster listens on loopback only (scheduler, nannies and workers on 127.0.0.1) and
starts no dashboard. A ``tls://`` scheduler is reached with Dask's own security settings
(``distributed.comm.tls.*`` in Dask's configuration: the CA and the client's certificate and
key), as every Dask client reads them.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import replace
from typing import TYPE_CHECKING

from advisor.errors import AdvisorInputError
from advisor.options import AnalysisOptions
from advisor.parts import RankPart, rank_part

if TYPE_CHECKING:
    from distributed import Client, LocalCluster

OnDone = Callable[[RankPart], None]
Extra = Callable  # parts.rank_part's ``extra``: (TraceAnalysis, AnalysisOptions) -> dict
INSTALL_HINT = 'pip install ".[dask]" (in the advisor checkout)'
LOOPBACK = "127.0.0.1"  # where --dask local listens: nothing beyond this machine


def runner(options: AnalysisOptions) -> Runner:
    """The runner the options ask for: the Dask cluster at ``options.dask`` when given,
    else ``options.jobs`` local processes."""
    return DaskRunner(options.dask, options.jobs) if options.dask else LocalRunner(options.jobs)


class Runner:
    """Where the rank tasks run: ``map`` runs rank_part of every path (with ``extra``) and
    returns the parts in the order of the paths, calling ``on_done`` as each finishes; as a
    context manager, ``close`` at the end releases what the runner started."""

    def __enter__(self) -> Runner:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        return None

    def map(
        self,
        paths: list[str],
        options: AnalysisOptions,
        extra: Extra | None = None,
        on_done: OnDone | None = None,
    ) -> list[RankPart]:
        raise NotImplementedError


class LocalRunner(Runner):
    """Rank tasks in ``jobs`` worker processes here (default one per core; 1: in this
    process), each reader given the cores left per worker."""

    def __init__(self, jobs: int | None = None) -> None:
        self.jobs = jobs

    def map(self, paths, options, extra=None, on_done=None) -> list[RankPart]:
        notify = on_done or (lambda _: None)
        jobs = max(1, min(self.jobs or os.cpu_count() or 1, len(paths)))
        if jobs == 1:
            parts = []
            for p in paths:
                parts.append(rank_part(p, options, extra=extra))
                notify(parts[-1])
            return parts
        cores = max(1, (os.cpu_count() or 1) // jobs)
        clean = replace(options)  # (without its cached, unpicklable compiled rules)
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            futures = [pool.submit(rank_part, p, clean, cores, extra) for p in paths]
            for future in as_completed(futures):
                notify(future.result())
            return [f.result() for f in futures]


def _on_worker(path: str, options: AnalysisOptions, extra: Extra | None) -> RankPart:
    """rank_part on a Dask worker, with the worker's threads for the reader and the
    analysis; an error names the worker (the path may exist on the client but not
    there)."""
    from distributed import get_worker

    from advisor.memory import keep_freed_heap

    keep_freed_heap()  # (each call sets the same two values: cheap, and per process)
    worker = get_worker()
    part = rank_part(path, options, cores=max(1, worker.state.nthreads), extra=extra)
    if part.error is not None:
        part.error = f"{part.error} (on Dask worker {worker.address})"
    return part


class DaskRunner(Runner):
    """Rank tasks on the dask.distributed cluster at ``address`` (``local``: a LocalCluster
    of ``jobs`` single-threaded worker processes, default one per core, on loopback and
    without a dashboard). AdvisorInputError when Dask is not installed or the scheduler
    cannot be reached."""

    client: Client | None  # (None once closed)
    cluster: LocalCluster | None

    def __init__(self, address: str, jobs: int | None = None) -> None:
        try:
            import dask
            from distributed import Client, LocalCluster
        except ImportError:
            raise AdvisorInputError(
                None, f"--dask needs dask.distributed, which is not installed: {INSTALL_HINT}"
            ) from None
        self.cluster = None
        try:
            if address == "local":
                with dask.config.set({"distributed.scheduler.allowed-failures": 1}):
                    self.cluster = LocalCluster(
                        n_workers=jobs or os.cpu_count() or 1, threads_per_worker=1,
                        processes=True, host=LOOPBACK,
                        # no dashboard; the HTTP endpoints Dask always serves (health,
                        # metrics) on loopback too, at any free port
                        dashboard_address=f"{LOOPBACK}:0", scheduler_kwargs={"dashboard": False},
                    )  # fmt: skip
                self.client = Client(self.cluster)
            else:
                self.client = Client(address, security=_security(address), timeout="20s")
        except (OSError, TimeoutError) as exc:
            self.close()
            raise AdvisorInputError(
                None, f"--dask {address}: cannot reach the scheduler ({exc})"
            ) from None
        except ValueError as exc:  # (not an address: Dask names what is wrong with it)
            self.close()
            raise AdvisorInputError(
                None, f"--dask {address}: {exc}; give tcp://HOST:PORT, tls://HOST:PORT or 'local'"
            ) from None

    def close(self) -> None:
        """Disconnect (and stop the LocalCluster this runner started)."""
        client = getattr(self, "client", None)  # (unset when __init__ failed before it)
        if client is not None:
            client.close()
            self.client = None
        if self.cluster is not None:
            self.cluster.close()
            self.cluster = None

    def map(self, paths, options, extra=None, on_done=None) -> list[RankPart]:
        from distributed import as_completed as dask_completed

        client = self.client
        if client is None:
            raise RuntimeError("DaskRunner.map after close")
        notify = on_done or (lambda _: None)
        run = uuid.uuid4().hex[:8]
        clean = replace(options)
        futures = [
            client.submit(
                _on_worker, p, clean, extra, key=f"advisor-{run}-{i}", pure=False
            )  # fmt: skip
            for i, p in enumerate(paths)
        ]
        index = {f.key: i for i, f in enumerate(futures)}
        done: dict[int, RankPart] = {}
        for future in dask_completed(futures):
            i = index[future.key]
            done[i] = _result(future, paths[i])
            notify(done[i])
            future.release()
        return [done[i] for i in range(len(paths))]


TLS_SETTINGS = ("distributed.comm.tls.ca-file", "distributed.comm.tls.client.cert",
                "distributed.comm.tls.client.key")  # fmt: skip


def _security(address: str):
    """Dask's security settings from its configuration (distributed.Security), as every Dask
    client reads them; for a ``tls://`` scheduler they must name the CA and the client's
    certificate and key (AdvisorInputError when they do not, or cannot be read)."""
    from distributed.security import Security

    try:
        security = Security()
        context = security.get_connection_args("client")["ssl_context"]
    except OSError as exc:  # (ssl.SSLError too: a file that is not a PEM certificate or key)
        raise AdvisorInputError(
            None, f"--dask {address}: Dask's TLS settings name a file that cannot be read: {exc}"
        ) from None
    if address.startswith("tls://") and context is None:
        settings = ", ".join(TLS_SETTINGS)
        raise AdvisorInputError(
            None, f"--dask {address}: a tls:// scheduler needs Dask's TLS settings ({settings}; "
            "e.g. DASK_DISTRIBUTED__COMM__TLS__CA_FILE=ca.pem): no client certificate is set",
        )  # fmt: skip
    return security


def _result(future, path: str) -> RankPart:
    """The part a finished Dask task returned, or the one line that says why it has none."""
    from distributed import KilledWorker

    try:
        return future.result()
    except KilledWorker:
        return RankPart(path=path, error=f"{path}: the Dask workers running it died twice")
    except Exception as exc:  # (the task itself catches everything it can)
        return RankPart(path=path, error=f"{path}: Dask task failed: {type(exc).__name__}: {exc}")
