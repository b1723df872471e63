"""The package layout as README's "Architecture" states it: each part of advisor imports
only the parts below it (checked on the source with ast, lazy imports included)."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "advisor"
BASE = {"errors", "units", "plain", "user_yaml", "data", "staged", "output_paths"}

# part -> the parts it may import (besides BASE, which every part may use)
ALLOWED = {
    "errors": set(), "units": set(), "plain": set(), "staged": set(),
    "output_paths": {"errors"}, "user_yaml": {"errors"}, "data": {"user_yaml"},
    "memory": set(),
    "trace": {"memory"},  # readers: release the readers' freed heap
    "metrics": {"trace"},
    "analysis": {"metrics", "trace"},
    "instances": {"analysis", "metrics"},
    "views": {"analysis", "metrics"},
    "rules": {"analysis", "instances", "views", "metrics"},
    "findings": {"analysis", "rules"},
    "options": {"metrics", "rules", "trace"},
    "pipeline": {"analysis", "findings", "options", "rules", "trace"},
    "parts": {"analysis", "metrics", "options", "pipeline", "rules", "trace", "views"},
    "cluster": {"memory", "options", "parts"},
    "multi": {"analysis", "cluster", "findings", "options", "parts", "pipeline", "rules",
              "trace"},
    "configs": {"rules", "trace"},
    "baselines": set(),
    "gating": {"analysis", "baselines", "cluster", "findings", "instances", "metrics", "options",
             "parts", "pipeline", "rules"},
    "render": {"analysis", "gating", "metrics", "rules", "views"},
    "report": {"analysis", "render", "rules"},
    "api": {"analysis", "cluster", "configs", "gating", "multi", "options", "pipeline", "render",
            "report", "rules"},
    "cli": {"api", "baselines", "cluster", "configs", "gating", "memory", "multi", "options",
            "pipeline",
            "render",
            "report", "rules", "trace", "__version__"},
    "launch": {"cli", "memory"},
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
        for node in ast.walk(ast.parse(f.read_text())):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module:
                if node.module == "advisor":
                    names = [f"advisor.{a.name}" for a in node.names]
                else:
                    names = [node.module]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            for name in names:
                if name.startswith("advisor.") and _part(name) != part:
                    found.setdefault(part, set()).add(_part(name))
    return found


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
