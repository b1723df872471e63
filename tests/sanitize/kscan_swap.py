"""Load a separately built copy of the compiled scanner (the sanitizer build) in place of
``advisor.trace._kscan``, before anything imports the Kineto reader.

As a pytest plugin (``-p kscan_swap``, with ``tests/sanitize`` on PYTHONPATH) it swaps in
the module named by the environment variable KSCAN_SO when the plugin is imported (before
the conftest files, which import the readers); scripts call ``swap(path)``."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

NAME = "advisor.trace._kscan"


def load_extension(name: str, path: str | Path) -> ModuleType:
    """The extension module at ``path`` imported as ``name`` (advisor.trace.<x>), in
    sys.modules and as the package's attribute."""
    import advisor.trace

    loader = importlib.machinery.ExtensionFileLoader(name, str(path))
    spec = importlib.util.spec_from_file_location(name, str(path), loader=loader)
    if spec is None:
        raise RuntimeError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    sys.modules[name] = module
    setattr(advisor.trace, name.rsplit(".", 1)[1], module)
    return module


def swap(path: str | Path) -> ModuleType:
    """Import the extension at ``path`` as advisor.trace._kscan (before advisor.trace.kineto
    is imported: that module binds the scanner once); again with the same path: the module
    already swapped in."""
    have = sys.modules.get(NAME)
    if have is not None and Path(getattr(have, "__file__", "")).resolve() == Path(path).resolve():
        return have
    if "advisor.trace.kineto" in sys.modules:
        raise RuntimeError("advisor.trace.kineto was imported before the scanner was swapped")
    module = load_extension(NAME, path)
    from advisor.trace import kineto

    if kineto._kscan is not module:
        raise RuntimeError("the Kineto reader did not take the swapped scanner")
    return module


def _from_environment() -> None:
    path = os.environ.get("KSCAN_SO")
    if path:
        module = swap(path)
        names = getattr(module, "MAX_NAMES", "?")
        print(f"kscan_swap: {module.__file__} (MAX_NAMES {names})", file=sys.stderr)


if __name__ != "__main__":
    _from_environment()
