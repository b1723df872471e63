"""A bounded run of the reader fuzz (fuzz_readers.py; the full campaign is in
docs/fuzzing.md): every reader's mutated inputs end in a trace or AdvisorInputError, and the
driver tells a bug (exit 3) and a hang apart from bad input and keeps their inputs."""

import json
import random

import pytest
from fuzz_readers import KINDS, build_seeds, main, make_input, run_one, summarize

from advisor.errors import AdvisorInputError

INPUTS = 84  # 12 per kind


@pytest.fixture(scope="module")
def seeds(tmp_path_factory):
    return build_seeds(tmp_path_factory.mktemp("seeds"))


def test_every_kind_has_seeds_that_read(seeds, tmp_path):
    import fuzz_readers

    assert {s.kind for s in seeds} == set(KINDS)
    for kind in KINDS:  # the first seed of each kind, unchanged, is a trace advisor reads
        seed = next(s for s in seeds if s.kind == kind)
        folder = tmp_path / kind
        folder.mkdir()
        for name, data in seed.files.items():
            (folder / name).write_bytes(data if not name.endswith(".gz") else __import__(
                "gzip").compress(data))  # fmt: skip
        fuzz_readers.analyse(folder / seed.main, None)


def test_a_bounded_run_has_no_internal_error(seeds, tmp_path):
    records = [run_one(i, seeds, "advisor-fuzz-test", tmp_path, tmp_path / "out")
               for i in range(INPUTS)]  # fmt: skip
    s = summarize(records, 0.0)
    assert s["inputs"] == INPUTS and set(s["by_kind"]) == set(KINDS)
    assert not s["bugs"], json.dumps(s["bugs"], indent=1)
    assert not s["timeouts"] and "harness_error" not in s["outcomes"]
    assert s["outcomes"].get("ok", 0) > INPUTS // 5  # (the mutations leave many traces readable)


def test_inputs_are_the_same_for_the_same_index(seeds, tmp_path):
    made = []
    for n in range(2):
        folder = tmp_path / str(n)
        folder.mkdir()
        seed = seeds[7]
        what = make_input(seed, random.Random("s:41"), folder)
        made.append((what, {p.name: p.read_bytes() for p in folder.iterdir()}))
    assert made[0] == made[1]


@pytest.mark.parametrize(
    "raised, outcome",
    [(KeyError("x"), "bug"), (AdvisorInputError("t", "bad"), "input_error")],
)
def test_a_bug_is_told_apart_and_its_input_kept(raised, outcome, seeds, tmp_path, monkeypatch):
    import fuzz_readers

    def fail(path, gpu):
        raise raised

    monkeypatch.setattr(fuzz_readers, "analyse", fail)
    rec = run_one(3, seeds, "s", tmp_path, tmp_path / "out")
    assert rec.outcome == outcome
    kept = list((tmp_path / "out").glob("bugs/*/3/record.json"))
    assert len(kept) == (outcome == "bug")
    if kept:
        assert json.loads(kept[0].read_text())["error"] == "KeyError: 'x'"


def test_a_hang_is_stopped_and_told(seeds, tmp_path, monkeypatch):
    import time

    import fuzz_readers

    def spin(path, gpu):  # CPU time: the limit
        end = time.process_time() + 5
        while time.process_time() < end:
            pass

    monkeypatch.setattr(fuzz_readers, "TIME_LIMIT_S", 0.2)
    monkeypatch.setattr(fuzz_readers, "analyse", spin)
    assert run_one(0, seeds, "s", tmp_path, tmp_path / "out").outcome == "timeout"
    # waiting without the CPU: the wall-clock backstop
    monkeypatch.setattr(fuzz_readers, "WALL_LIMIT_S", 0.3)
    monkeypatch.setattr(fuzz_readers, "analyse", lambda path, gpu: time.sleep(5))
    assert run_one(1, seeds, "s", tmp_path, tmp_path / "out").outcome == "timeout"


def test_a_limit_reached_as_the_input_ends_is_a_timeout_not_a_dead_worker(
    seeds, tmp_path, monkeypatch
):
    # the campaign's first run lost a worker (and hung its pool) when the alarm came while
    # the timer was being disarmed: the handler's exception left run_one from `finally`
    # and a second run lost the CI's pytest process: the exception skipped the wall-clock
    # timer's disarming, which fired (SIGALRM, default handler again: exit 142) 300 s later
    import signal

    import fuzz_readers

    real = fuzz_readers.signal.setitimer
    fired = []

    def disarm(which, seconds):
        real(which, seconds)
        if seconds == 0 and not fired:  # the first timer disarmed, the alarm comes
            fired.append(which)
            fuzz_readers._on_alarm(None, None)

    monkeypatch.setattr(fuzz_readers, "analyse", lambda path, gpu: None)
    monkeypatch.setattr(fuzz_readers.signal, "setitimer", disarm)
    assert run_one(0, seeds, "s", tmp_path, tmp_path / "out").outcome == "timeout"
    assert fired == [signal.ITIMER_PROF]
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)  # nothing left to go off
    assert signal.getitimer(signal.ITIMER_PROF) == (0.0, 0.0)


def test_batches_add_up_and_a_finished_batch_is_not_run_again(tmp_path, monkeypatch):
    import fuzz_readers

    ran = []

    def batch(indices, *args, **kw):
        ran.append(indices)
        return [fuzz_readers.Record(i, KINDS[i % 7], "s", [], "ok") for i in indices]

    monkeypatch.setattr(fuzz_readers, "run_batch", batch)
    monkeypatch.setattr(fuzz_readers, "build_seeds", lambda work: [])
    args = ["--count", "10", "--batch", "4", "--workers", "1", "--out", str(tmp_path)]
    assert main(args) == 0 and main(args) == 0
    assert [list(r) for r in ran] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    total = json.loads((tmp_path / "summary.json").read_text())
    assert total["inputs"] == 10 and total["outcomes"] == {"ok": 10}


def test_the_read_stage_reads_only_and_keeps_its_files_apart(tmp_path, monkeypatch):
    import fuzz_readers

    def no_analysis(path, gpu):
        raise AssertionError("the read stage analysed an input")

    monkeypatch.setattr(fuzz_readers, "analyse", no_analysis)
    read = []
    real = fuzz_readers.read
    monkeypatch.setattr(
        fuzz_readers, "read", lambda path, gpu: read.append(path) or real(path, gpu)
    )
    args = ["--count", "7", "--batch", "7", "--workers", "1", "--seed", "r", "--out", str(tmp_path)]
    assert main([*args, "--stage", "read"]) == 0
    assert len(read) == 7  # one per kind, each read
    total = json.loads((tmp_path / "summary-read.json").read_text())
    assert total["inputs"] == 7 and not total["bugs"]
    assert sorted(p.name for p in tmp_path.glob("batch*")) == ["batch-read_r_0_7.json"]
    assert not (tmp_path / "summary.json").exists()  # (an analyze run's counts stay its own)
