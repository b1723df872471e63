"""Checks on output paths before any work: an output may never be (or replace) an input
trace, and a file output may not be a directory (nor a directory output a file); and what
happens to stdout when its reader stops."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from advisor.errors import AdvisorInputError


def _is_input(path: Path, inputs: list[str]) -> bool:
    """True when ``path`` is the same file as an input (through symlinks or hard links)."""
    if not path.exists():
        return False
    for i in inputs:
        try:
            if path.samefile(i):
                return True
        except OSError:  # an input that does not exist (reported by the reader)
            continue
    return False


def check_output_file(out: str, inputs: list[str], what: str) -> None:
    """``out`` may be written as the ``what`` file (it may exist: it is then replaced)."""
    p = Path(out)
    if _is_input(p, inputs):
        raise AdvisorInputError(out, f"is an input trace: refusing to overwrite it with the {what}")
    if p.is_dir():
        raise AdvisorInputError(out, f"is a directory: give a file name for the {what}")
    if p.exists() and not p.is_file():
        raise AdvisorInputError(out, f"is not a regular file: cannot write the {what} there")
    if not p.parent.is_dir():
        raise AdvisorInputError(
            out,
            f"its folder {p.parent} does not exist: create it first (advisor creates no "
            f"folders above the {what})",
        )


def check_output_dir(out: str, inputs: list[str], what: str) -> None:
    """``out`` may be used as the ``what`` folder (created when missing)."""
    p = Path(out)
    if _is_input(p, inputs):
        raise AdvisorInputError(out, f"is an input trace: refusing to use it as the {what}")
    if p.exists() and not p.is_dir():
        raise AdvisorInputError(out, f"is a file: the {what} must be a folder")


def silence_stdout() -> None:
    """The reader of stdout has stopped (e.g. `| head`): send the rest to /dev/null."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
