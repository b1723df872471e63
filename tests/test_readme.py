"""The README is a quick start that cannot drift (issue 31): at most 20 KB, its example
output is the tool's own (regenerated here: ``ADVISOR_UPDATE_README=1 pytest
tests/test_readme.py`` rewrites it), the numbers its text states come from the JSON, its
Python runs, and every relative link in it and in docs/ leads to a file."""

import contextlib
import io
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "bad_inputs"))

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
# a generated example: the command's arguments, the terminal width, and how much of the
# output is shown (its first N lines, or up to the line that starts with a text)
EXAMPLE = re.compile(r'(<!-- example: (.+?) \(COLUMNS=(\d+)(?:, (?:lines=(\d+)|up to "([^"]+)"))?\)'
                     r" -->\n```\n)(.*?)(```\n<!-- end example -->)", re.S)  # fmt: skip
MAX_BYTES = 20_000


def _advisor(*args, columns: int | None = None, cwd: Path = ROOT) -> str:
    env = {**os.environ, **({"COLUMNS": str(columns)} if columns else {})}
    proc = subprocess.run([sys.executable, "-m", "advisor", *args], capture_output=True,
                          text=True, timeout=300, cwd=cwd, env=env)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_the_readme_is_a_quick_start():
    assert len(README.read_bytes()) <= MAX_BYTES


PAGES = [README, *sorted((ROOT / "docs").rglob("*.md"))]
WITH_EXAMPLES = [p for p in PAGES if EXAMPLE.search(p.read_text())]


@pytest.mark.parametrize("page", WITH_EXAMPLES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_example_is_the_tools_own_output(page, tmp_path):
    # run where the sample traces are at their documented paths and outputs land in tmp
    (tmp_path / "sample_traces").symlink_to(ROOT / "sample_traces")
    text = page.read_text()
    parts, stale, at = [], [], 0
    for m in EXAMPLE.finditer(text):
        head, command, columns, lines, stop, shown, tail = m.groups()
        out = _advisor(*shlex.split(command), columns=int(columns), cwd=tmp_path)
        rows = [line.rstrip() for line in out.splitlines()]
        if lines:
            rows = rows[: int(lines)]
        elif stop:
            rows = rows[: next(i for i, line in enumerate(rows) if line.startswith(stop))]
        want = f"$ advisor {command}\n" + "".join(f"{r}\n" for r in rows)
        if shown != want:
            stale.append(command)
        parts += [text[at : m.start()], head, want, tail]
        at = m.end()
    if os.environ.get("ADVISOR_UPDATE_README") == "1":
        page.write_text("".join(parts) + text[at:])
        return
    assert not stale, f"stale examples (ADVISOR_UPDATE_README=1 regenerates them): {stale}"


def test_the_numbers_the_text_states_come_from_the_json():
    text = " ".join(README.read_text().split())
    doc = json.loads(_advisor("analyze", "sample_traces/h200_train_steps.sqlite", "-f", "json"))
    s = doc["summary"]
    share = s["launch_overhead_ns"] / (s["window_ns"] - s["startup_idle_ns"])
    assert f"the GPU idles {round(share * 100)} % of the steady time between host launches" in text
    step = next(f for f in doc["findings"] if f["rule"] == "host-bound-steps")
    steps = doc["steps"][0]
    assert (f"recovers about {int(step['est_savings_ns'] / 1e6 // 10 * 10)} ms over the "
            f"{steps['steady_steps']} steady steps") in text  # fmt: skip
    assert f"the {steps['steps']} training steps" in text


def test_the_python_in_the_readme_runs(monkeypatch):
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert blocks
    monkeypatch.chdir(ROOT)
    scope: dict = {}
    with contextlib.redirect_stdout(io.StringIO()):
        for block in blocks:
            exec(compile(block, "README.md", "exec"), scope)
    assert len(scope["result"].findings) > 0


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_leads_to_a_file(page):
    broken = []
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
        if re.match(r"[a-z]+:", target):  # (http:, https:, mailto:)
            continue
        if not (page.parent / target).exists():
            broken.append(target)
    assert not broken, broken


def test_the_counts_the_docs_state_are_the_codes(tmp_path):
    from make_corpus import build

    from advisor.data import load_yaml

    gpus = len(load_yaml("gpus.yaml")["gpus"])
    for page in ("docs/metrics.md", "docs/commands.md"):
        stated = re.findall(r"(\d+) GPUs", (ROOT / page).read_text())
        assert stated and {int(n) for n in stated} == {gpus}, page
    corpus = len(build(tmp_path / "corpus"))
    text = " ".join((ROOT / "docs/guarantees.md").read_text().split())
    assert f"({corpus} damaged and hostile inputs" in text
