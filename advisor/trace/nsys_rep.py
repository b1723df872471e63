"""Nsight Systems reports (``.nsys-rep``, legacy ``.qdrep``): exported to SQLite with the
``nsys`` found on PATH (or ``$NSYS``) into a cache folder, then read like any export.

The cache is ``$ADVISOR_CACHE`` or ``$XDG_CACHE_HOME/advisor`` (default ``~/.cache/advisor``),
``nsys-rep/<sha256 of the report>.sqlite``: never beside the input, keyed by the report's
content (a re-run reuses it; a changed report gets a new export). The export is written
under a temporary name and renamed into place, so a failed or interrupted export leaves
nothing that would be read later.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

from advisor.errors import AdvisorInputError

SUFFIXES = (".nsys-rep", ".qdrep")
EXPORT_TIMEOUT_S = 3600


def is_report(path: Path) -> bool:
    return path.name.lower().endswith(SUFFIXES)


def cache_dir() -> Path:
    """Where exports are kept (see the module doc)."""
    if os.environ.get("ADVISOR_CACHE"):
        return Path(os.environ["ADVISOR_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "advisor"


def find_nsys() -> str | None:
    """The nsys executable: ``$NSYS`` when set, else ``nsys`` on PATH."""
    if os.environ.get("NSYS"):
        return os.environ["NSYS"]
    return shutil.which("nsys")


def content_hash(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def export_cache(path: Path, kind: str) -> tuple[str, Path]:
    """(the report's SHA-256, the cache folder ``<cache>/<kind>`` its exports go to);
    AdvisorInputError when the report cannot be read."""
    try:
        return content_hash(path), cache_dir() / kind
    except OSError as exc:
        raise AdvisorInputError(str(path), f"cannot read: {exc.strerror}") from None


def make_folder(folder: Path) -> None:
    """Create the export cache ``folder`` (AdvisorInputError when it cannot be)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise AdvisorInputError(str(folder), f"cannot create the export cache: {exc}") from None


def export_report(path: Path) -> Path:
    """The SQLite export of an ``.nsys-rep`` (made now, or found in the cache)."""
    nsys = find_nsys()
    if nsys is None:
        raise AdvisorInputError(
            str(path),
            "an Nsight Systems report: nsys is not on PATH (set NSYS=/path/to/nsys), or export "
            f"it yourself: nsys export --type sqlite -o {path.stem}.sqlite {path.name}",
        )
    digest, folder = export_cache(path, "nsys-rep")
    out = folder / f"{digest}.sqlite"
    if out.is_file():
        return out
    make_folder(folder)
    partial = folder / f".{digest}.{os.getpid()}.partial.sqlite"
    cmd = [nsys, "export", "--type", "sqlite", "--force-overwrite", "true", "--output",
           str(partial), str(path)]  # fmt: skip
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=EXPORT_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        partial.unlink(missing_ok=True)
        raise AdvisorInputError(str(path), f"nsys export failed to run: {exc}") from None
    if proc.returncode != 0 or not partial.is_file():
        partial.unlink(missing_ok=True)
        said = " ".join((proc.stderr or proc.stdout or "").split())[-300:] or "no output"
        raise AdvisorInputError(str(path), f"nsys export failed (exit {proc.returncode}): {said}")
    os.replace(partial, out)
    return out
