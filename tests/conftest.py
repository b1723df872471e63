"""Shared fixtures: the H200 sample traces and the public compatibility traces."""

from __future__ import annotations

import hashlib
from functools import cache
from pathlib import Path

import pytest

from advisor.analysis import analyze
from advisor.trace.load import load_trace

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "sample_traces"
PUBLIC_NSYS = ROOT.parent / "shared" / "traces" / "public" / "nsys"
H200_SINGLE = SAMPLES / "h200_scheduling.sqlite"
H200_GRAPHLEVEL = SAMPLES / "h200_tiny_graphlevel.sqlite"
H200_2GPU = SAMPLES / "h200x2_allreduce.sqlite"


def public_nsys() -> list[Path]:
    """Every public nsys export; fails (not skips) when the shared folder is missing."""
    files = sorted(PUBLIC_NSYS.glob("*.sqlite"))
    assert files, f"public traces not found under {PUBLIC_NSYS}"
    return files


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
