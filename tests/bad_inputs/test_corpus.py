"""Every hostile or damaged input in the corpus (make_corpus.py) keeps the guarantees:
exit 0 (with warnings) or 2, on exit 2 exactly one line on stderr naming the file and the
problem and nothing on stdout, never a traceback, no partial output, and every file in the
corpus folder (the inputs) byte-identical afterwards, with nothing created beside them."""

import json
from pathlib import Path

import pytest
from corpus_runner import fingerprint, run
from make_corpus import build

MIN_CASES = 50
# what an error line must not show: Python's and the decoders' own words (the user's mistake
# is said in the user's terms instead)
INTERNALS = ("list indices must be", "KeyError", "TypeError", "Expecting value",
             "Expected `", "Value error,", "object is not subscriptable", "NoneType")  # fmt: skip


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    out = tmp_path_factory.mktemp("bad_inputs")
    return out, build(out)


def test_corpus_keeps_the_guarantees(corpus, capsys):
    out, cases = corpus
    assert len(cases) >= MIN_CASES
    problems = []
    for case in cases:
        before = fingerprint(out)
        runs = [case.args]
        if case.args[:1] == ["analyze"] and "--format" in case.args:  # and the terminal view
            runs.append([a for a in case.args if a not in ("--format", "json")])
        for args in runs:
            case_args, case.args = case.args, args
            code, stdout, stderr = run(case)
            case.args = case_args
            problems += _check(case, args, code, stdout, stderr)
            after = fingerprint(out)
            if after != before:
                changed = sorted(set(after.items()) ^ set(before.items()))
                problems.append(f"{case.name}: files changed or created: {changed[:3]}")
    replaced = out.parent / f"{out.name}_outputs" / "old_report.md"
    assert replaced.read_text().startswith("# "), "the existing report was not replaced"
    with capsys.disabled():
        print(f"\nbad-input corpus: {len(cases)} cases, {len(problems)} problems")
    assert not problems, "\n".join(problems)


def _check(case, args, code, stdout, stderr) -> list[str]:
    where = f"{case.name} (advisor {' '.join(args)})"
    problems = []
    if "Traceback" in stdout + stderr:
        problems.append(f"{where}: traceback printed")
    if code not in case.codes:
        problems.append(f"{where}: exit {code}, expected {case.codes}: {stderr.strip()[:300]}")
    if code == 2:
        lines = stderr.strip().splitlines()
        if len(lines) != 1 or not lines[0].startswith("advisor: error: "):
            problems.append(f"{where}: expected one error line, got {lines!r}")
        elif case.names not in lines[0]:
            problems.append(f"{where}: error line does not name {case.names!r}: {lines[0]}")
        elif case.says not in lines[0]:
            problems.append(f"{where}: error line does not say {case.says!r}: {lines[0]}")
        elif leaked := [x for x in INTERNALS if x in lines[0]]:
            problems.append(f"{where}: error line leaks internals {leaked}: {lines[0]}")
        if stdout:
            problems.append(f"{where}: exit 2 but stdout has {len(stdout)} characters")
        problems += [f"{where}: partial output {path}" for path in case.outputs
                     if Path(path).exists()]  # fmt: skip
    if code == 0 and "--format" in args:
        try:
            doc = json.loads(stdout)
        except ValueError:
            problems.append(f"{where}: exit 0 but stdout is not JSON")
        else:
            warnings = doc.get("trace", {}).get("warnings")
            if not isinstance(warnings, list):
                problems.append(f"{where}: JSON without trace.warnings")
            elif case.warns and not any(case.warns in w for w in warnings):
                problems.append(f"{where}: no warning mentions {case.warns!r}: {warnings}")
    return problems


def test_the_checks_catch_each_broken_guarantee(tmp_path):
    from make_corpus import Case

    case = Case("x.sqlite", ["analyze", "{f}"], (2,), names="x.sqlite", outputs=[str(tmp_path)])
    good = "advisor: error: /t/x.sqlite: export holds no kernels\n"
    assert _check(case, case.args, 2, "", good) == [
        f"{case.name} (advisor analyze {{f}}): partial output {tmp_path}"
    ]
    case.outputs = []
    assert _check(case, case.args, 2, "", good) == []
    broken = {
        "exit": (1, "", good),
        "traceback": (2, "", "Traceback (most recent call last):\n" + good),
        "two lines": (2, "", good + "more\n"),
        "unnamed": (2, "", "advisor: error: something failed\n"),
        "stdout": (2, "{}", good),
    }
    for what, (code, out, err) in broken.items():
        assert _check(case, case.args, code, out, err), what
    case.says = "no kernels"
    assert _check(case, case.args, 2, "", good) == []
    case.says = "no kernel table"
    assert _check(case, case.args, 2, "", good), "says something else"
