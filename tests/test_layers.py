"""The package layout as README's "Architecture" states it: each part of advisor imports
only the parts below it (checked on the source with ast, lazy imports included)."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "advisor"
BASE = {"errors", "units", "plain", "user_yaml", "validate", "data", "staged", "output_paths"}

# part -> the parts it may import (besides BASE, which every part may use)
ALLOWED = {
    "errors": set(), "units": set(), "plain": set(), "staged": set(),
    "output_paths": {"errors"}, "user_yaml": {"errors"}, "validate": set(), "data": {"user_yaml"},
    "memory": set(),
    "trace": {"memory"},  # readers: release the readers' freed heap
    "metrics": {"trace"},
    "analysis": {"metrics", "trace"},
    "instances": {"analysis", "metrics"},
    "views": {"analysis", "metrics"},
    "rules": {"analysis", "instances", "views", "metrics"},
    "findings": {"analysis", "rules"},
    "options": {"metrics", "rules", "trace"},
    "pipeline": {"analysis", "findings", "memory", "options", "rules", "trace"},  # (paused_gc)
    "frames": set(),
    "regionstore": set(),
    "commstore": {"analysis", "frames", "metrics", "regionstore"},
    # (memory: the merged parts' freed heap given back)
    "parts": {"analysis", "commstore", "frames", "memory", "metrics", "options", "pipeline",
              "regionstore", "rules", "trace", "views"},
    "cluster": {"memory", "options", "parts"},
    "multi": {"analysis", "cluster", "commstore", "findings", "options", "parts", "pipeline",
              "rules", "trace"},
    "configs": {"rules", "trace"},
    "baselines": set(),
    "gating": {"analysis", "baselines", "cluster", "findings", "instances", "metrics", "options",
             "parts", "pipeline", "rules"},
    "render": {"analysis", "gating", "metrics", "rules", "views"},
    "report": {"analysis", "render", "rules"},
    "api": {"analysis", "cluster", "configs", "gating", "memory", "multi", "options", "pipeline",
            "render", "report", "rules"},  # (memory: paused_gc around the document)
    "cli_options": set(),
    "cli": {"api", "baselines", "cli_options", "cluster", "configs", "gating", "memory", "multi",
            "options",
            "pipeline",
            "render",
            "report", "rules", "trace", "__version__"},
    "launch": {"cli", "memory", "trace"},  # (trace: only early, below)
    "__main__": {"launch"},
    "__init__": {"api"},
}  # fmt: skip


def _part(module: str) -> str:
    """advisor.trace.nsys -> trace; advisor.cli -> cli; advisor -> __init__."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _imports() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for f in ROOT.rglob("*.py"):
        if "templates" in f.parts:  # (emitted scripts: standalone, import no advisor)
            continue
        module = ".".join(f.relative_to(ROOT.parent).with_suffix("").parts)
        part = _part(module.removesuffix(".__init__"))
        for name in _imported(f):
            if name.startswith("advisor.") and _part(name) != part:
                found.setdefault(part, set()).add(_part(name))
    return found


def _imported(f: Path) -> list[str]:
    """The modules ``f`` imports (lazy imports too), ``from P import M`` as ``P.M`` for the
    packages advisor and advisor.trace (whose names may be modules)."""
    names = []
    for node in ast.walk(ast.parse(f.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module in ("advisor", "advisor.trace"):
                names += [f"{node.module}.{a.name}" for a in node.names]
            else:
                names.append(node.module)
        elif isinstance(node, ast.Import):
            names += [a.name for a in node.names]
    return names


def test_every_part_imports_only_what_the_architecture_allows():
    found = _imports()
    assert set(found) <= set(ALLOWED), set(found) - set(ALLOWED)  # a new part: say where
    wrong = {p: sorted(u - ALLOWED[p] - BASE) for p, u in found.items() if u - ALLOWED[p] - BASE}
    assert not wrong, wrong


def test_the_rule_catches_a_wrong_import(tmp_path, monkeypatch):
    # the check itself: a trace module importing the renderers is reported
    fake = tmp_path / "advisor"
    (fake / "trace").mkdir(parents=True)
    (fake / "trace" / "bad.py").write_text("from advisor.render import json\n")
    monkeypatch.setattr(__import__(__name__), "ROOT", fake)
    assert _imports() == {"trace": {"render"}}


# Inside the reader package, what the rest of advisor may import, module by module: the
# format-free Trace, its GPU facts, quality checks and counter join anywhere, the one entry
# point that picks a reader (load) only where a trace path becomes a Trace; never a reader
# itself (nsys, kineto, rocprof, rocpd, nsys_rep, ncu, ...): nothing downstream knows the
# format.
TRACE_MODULES_FOR_ALL = {"model", "gpus", "quality", "counters"}
TRACE_ENTRY = {
    "load": {"options", "pipeline", "multi", "parts", "api", "cli"},
    "early": {"launch"},
}  # (readers started before the libraries load)


def _trace_module_imports(root: Path = ROOT) -> dict[str, set[str]]:
    """Per module outside advisor/trace: the advisor.trace modules it imports."""
    found: dict[str, set[str]] = {}
    for f in root.rglob("*.py"):
        rel = f.relative_to(root.parent).with_suffix("")
        if rel.parts[1:2] == ("trace",) or "templates" in rel.parts:
            continue
        module = ".".join(rel.parts)
        for name in _imported(f):
            if name.startswith("advisor.trace."):
                found.setdefault(module, set()).add(name.split(".")[2])
    return found


def test_no_module_outside_the_readers_knows_a_format():
    wrong = {}
    for module, used in _trace_module_imports().items():
        part = _part(module.removesuffix(".__init__"))
        bad = {m for m in used - TRACE_MODULES_FOR_ALL if part not in TRACE_ENTRY.get(m, set())}
        if bad:
            wrong[module] = sorted(bad)
    assert not wrong, wrong


def test_the_module_rule_catches_a_reader_import(tmp_path):
    fake = tmp_path / "advisor"
    (fake / "metrics").mkdir(parents=True)
    (fake / "metrics" / "bad.py").write_text("from advisor.trace.nsys import read_nsys\n"
                                             "from advisor.trace.model import Trace\n")  # fmt: skip
    assert _trace_module_imports(fake) == {"advisor.metrics.bad": {"nsys", "model"}}
