"""Shared fixtures: the H200 sample traces and the public compatibility traces."""

from __future__ import annotations

import atexit
import hashlib
import lzma
import shutil
import tempfile
from functools import cache
from importlib.util import find_spec
from pathlib import Path

import pytest

from advisor.analysis import analyze
from advisor.trace.load import load_trace

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "sample_traces"
PUBLIC = ROOT / "tests" / "data" / "public"  # copies of public traces (SOURCES.md)
PUBLIC_NSYS = PUBLIC / "nsys"
PUBLIC_ROCPROF = PUBLIC / "rocprof"
# tests that run emitted Triton scripts need the `kernels` extra (torch + triton, CPU builds
# do: the scripts run under TRITON_INTERPRET=1); without it they skip and say why
needs_kernels = pytest.mark.skipif(
    find_spec("torch") is None or find_spec("triton") is None,
    reason="torch and triton are not installed (pip install '.[kernels]' or '.[test]')",
)
H200_SINGLE = SAMPLES / "h200_scheduling.sqlite"
H200_GRAPHLEVEL = SAMPLES / "h200_tiny_graphlevel.sqlite"
H200_2GPU = SAMPLES / "h200x2_allreduce.sqlite"


def public_nsys() -> list[Path]:
    """Every public nsys export in tests/data (fails, not skips, when none is there)."""
    files = sorted(PUBLIC_NSYS.glob("*.sqlite"))
    assert files, f"public traces not found under {PUBLIC_NSYS}"
    return files


@cache
def unpacked(path: Path) -> Path:
    """A sample kept xz-compressed (``NAME.sqlite.xz``: Nsight exports of a few MB, which
    the device tool's 64 MiB working tree cannot all carry) decompressed once per session
    into a temporary folder, as ``NAME.sqlite``; any other path as it is."""
    if path.suffix != ".xz":
        return path
    folder = Path(tempfile.mkdtemp(prefix="advisor-samples-"))
    atexit.register(shutil.rmtree, folder, True)
    out = folder / path.with_suffix("").name
    out.write_bytes(lzma.decompress(path.read_bytes()))
    return out


def why_nsys() -> list[Path]:
    """The why_idle captures' Nsight exports (sample_traces/why), the compressed ones
    unpacked."""
    why = SAMPLES / "why"
    files = [*why.glob("why_*.sqlite"), *why.glob("why_*.sqlite.xz")]
    return sorted((unpacked(p) for p in files), key=lambda p: p.name)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@cache
def analysis_of(path: Path, gpu: str | None = None):
    """Analysis of a trace, computed once per test session."""
    return analyze(load_trace(path, gpu=gpu))


@pytest.fixture(scope="session")
def single():
    return analysis_of(H200_SINGLE)


@pytest.fixture(scope="session")
def two_gpu():
    return analysis_of(H200_2GPU)


@pytest.fixture(scope="session")
def graphlevel():
    return analysis_of(H200_GRAPHLEVEL)


@pytest.fixture
def kernel_group_calls(monkeypatch) -> list:
    """The ``by`` of each kernel_groups call the analysis makes while the test runs (the
    kernel tables made on another thread are counted too)."""
    import advisor.analysis as analysis_module

    calls: list = []
    real = analysis_module.kernel_groups

    def counted(*args, **kwargs):
        calls.append(kwargs["by"])
        return real(*args, **kwargs)

    monkeypatch.setattr(analysis_module, "kernel_groups", counted)
    return calls
