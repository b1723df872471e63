"""Package data: built-in GPU facts, name-classification patterns, thresholds and gate
defaults (YAML); the accessors that read them."""

from __future__ import annotations

import re
import sys
from functools import cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from advisor.user_yaml import load_packaged_yaml

if TYPE_CHECKING:  # (an annotation only: importlib.resources.abc is Python 3.11 on)
    if sys.version_info >= (3, 11):
        from importlib.resources.abc import Traversable
    else:
        from importlib.abc import Traversable


@cache
def load_yaml(name: str) -> dict:
    """Parse one YAML file shipped in this package."""
    return load_packaged_yaml(resources.files(__package__).joinpath(name).read_text())


@cache
def pattern(category: str) -> re.Pattern[str]:
    """One case-insensitive regex matching any pattern of a classify.yaml category."""
    parts = load_yaml("classify.yaml")[category]
    return re.compile("|".join(f"(?:{p})" for p in parts), re.IGNORECASE)


@cache
def regex(name: str) -> re.Pattern[str]:
    """One regex of classify.yaml's ``regexes`` section, compiled as written."""
    return re.compile(load_yaml("classify.yaml")["regexes"][name])


@cache
def regex_list(category: str) -> tuple[re.Pattern[str], ...]:
    """The regexes of a classify.yaml list, each compiled as written, in order."""
    return tuple(re.compile(p) for p in load_yaml("classify.yaml")[category])


@cache
def gpu_facts(section: str) -> dict:
    """One section of gpus.yaml besides the table (defaults, nsys_fallback, cdna,
    cost_model_fallback, gluon_launch, gemm_tiles)."""
    return dict(load_yaml("gpus.yaml")[section])


@cache
def gate_metrics() -> dict[str, dict[str, bool]]:
    """gate_metrics.yaml: per group (time, ratio, counts, kernel) metric -> True when a
    larger value is worse."""
    return {group: dict(m) for group, m in load_yaml("gate_metrics.yaml").items()}


def _matches(values: pd.Series, patterns: list[re.Pattern[str]]) -> list[np.ndarray]:
    """One boolean array per pattern: which values it finds a match in. The values are
    factorized once and each regex runs once per distinct value (traces repeat a few names
    millions of times)."""
    if isinstance(values.dtype, pd.CategoricalDtype):  # already factorized
        codes, uniques = values.cat.codes.to_numpy(), values.cat.categories
    else:
        codes, uniques = pd.factorize(values.astype(object), use_na_sentinel=True)
    texts = [str(u) for u in uniques]
    out = []
    for rx in patterns:
        hit = np.array([rx.search(t) is not None for t in texts] + [False], dtype=bool)
        out.append(hit[codes])  # code -1 (missing) -> the trailing False
    return out


def text_matches(values: pd.Series, rx: re.Pattern[str]) -> pd.Series:
    """Boolean Series: which values ``rx`` finds a match in."""
    return pd.Series(_matches(values, [rx])[0], index=values.index)


def name_matches(names: pd.Series, category: str) -> pd.Series:
    """Boolean Series: which names match a classify.yaml category."""
    return text_matches(names, pattern(category))


def names_in(names: pd.Series, *categories: str) -> list[np.ndarray]:
    """One boolean array per classify.yaml category, factorizing the names only once."""
    return _matches(names, [pattern(c) for c in categories])


def builtin_rules_dir() -> Traversable:
    """The shipped rules/ folder: package data when installed, else the source checkout's."""
    try:
        return resources.files("advisor.builtin_rules")
    except ModuleNotFoundError:  # running from a source tree that was not installed
        return Path(__file__).resolve().parents[2] / "rules"
