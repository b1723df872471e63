"""Built-in GPU spec table: the fallback when a trace carries no device facts."""

from __future__ import annotations

import re

from advisor.data import load_yaml
from advisor.errors import AdvisorInputError
from advisor.trace.model import GpuSpec

_FIELDS = set(GpuSpec.__dataclass_fields__) - {"source"}


def builtin_gpus() -> list[GpuSpec]:
    """Every entry of the built-in table, in table order."""
    rows = load_yaml("gpus.yaml")["gpus"]
    return [GpuSpec(**{k: v for k, v in row.items() if k in _FIELDS}) for row in rows]


def match_gpu(name: str) -> GpuSpec | None:
    """The first built-in entry whose name or a match regex fits ``name`` (case-insensitive)."""
    wanted = name.strip().lower()
    for row in load_yaml("gpus.yaml")["gpus"]:
        if row["name"].lower() == wanted or any(
            re.search(p, wanted, re.IGNORECASE) for p in row["match"]
        ):
            spec = {k: v for k, v in row.items() if k in _FIELDS}
            return GpuSpec(**spec)
    return None


def gpu_from_option(value: str) -> GpuSpec:
    """Resolve a ``--gpu NAME`` value; unknown names are bad input listing the known ones."""
    spec = match_gpu(value)
    if spec is None:
        known = ", ".join(g.name for g in builtin_gpus())
        raise AdvisorInputError(None, f"--gpu {value!r} is not a known GPU (known: {known})")
    return GpuSpec(**{**spec.to_dict(), "source": f"--gpu {value}"})
