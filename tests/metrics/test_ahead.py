"""Blocks computed ahead on threads (metrics/ahead.py): the blocks' order, the bound on
how many are started ahead, errors at their block, one thread's path."""

from __future__ import annotations

import threading
import time

import pytest

from advisor.metrics.ahead import ANALYSIS_THREADS, ahead, analysis_threads, beside, once


def _slow_square(x: int) -> int:
    time.sleep(0.002 * (x % 3))  # (later blocks can finish before earlier ones)
    return x * x


@pytest.mark.parametrize("threads", [1, 2, 3, 8])
def test_results_come_in_the_blocks_order(threads):
    blocks = list(range(40))
    assert list(ahead(_slow_square, blocks, threads)) == [x * x for x in blocks]


@pytest.mark.parametrize("threads", [2, 3])
def test_at_most_threads_blocks_are_started_ahead_of_the_one_taken(threads):
    started: list[int] = []

    def work(x: int) -> int:
        started.append(x)
        return x

    for i, x in enumerate(ahead(work, range(30), threads)):
        assert x == i
        time.sleep(0.003)  # (time for the pool to start all it may)
        # taken: blocks 0..i; started ahead of it: at most i + 1 .. i + threads
        assert len(started) <= i + 1 + threads
    assert sorted(started) == list(range(30))


def test_an_error_is_raised_at_its_block_and_later_blocks_are_dropped():
    started: list[int] = []

    def work(x: int) -> int:
        started.append(x)
        if x == 4:
            raise ValueError("block 4")
        return x

    taken = []
    with pytest.raises(ValueError, match="block 4"):
        for x in ahead(work, range(100), 2):
            taken.append(x)
    assert taken == [0, 1, 2, 3]
    assert max(started) <= 4 + 2  # (nothing started past the bound)


def test_one_thread_works_on_the_callers_thread():
    me = threading.get_ident()
    assert set(ahead(lambda _: threading.get_ident(), range(5), 1)) == {me}
    assert list(ahead(_slow_square, [], 2)) == []


@pytest.mark.parametrize("blocks", [[7], iter([7])])
def test_a_single_block_is_worked_on_the_callers_thread(blocks):
    # (no pool started for one block: a list, or an iterator that ends after it)
    me = threading.get_ident()
    assert list(ahead(lambda x: (x, threading.get_ident()), blocks, 2)) == [(7, me)]
    # two blocks or more: on the pool's threads, in order
    ids = list(ahead(lambda x: (x, threading.get_ident()), iter([1, 2, 3]), 2))
    assert [x for x, _ in ids] == [1, 2, 3] and me not in {t for _, t in ids}


def test_analysis_threads():
    assert analysis_threads(3) == 3
    assert analysis_threads(0) == 1  # (a worker's share is at least one thread)
    assert 1 <= analysis_threads() <= ANALYSIS_THREADS


def test_beside_runs_on_its_own_thread_and_gives_its_result_or_error():
    me = threading.get_ident()
    assert beside(threading.get_ident, 2).result() != me
    assert beside(threading.get_ident, 1).result() == me  # (one thread: run now, here)
    gate = threading.Event()
    waiting = beside(lambda: gate.wait(5) and "done", 2)
    assert not waiting.done()  # (the caller goes on meanwhile)
    gate.set()
    assert waiting.result() == "done"

    def fails():
        raise KeyError("stage")

    for threads in (1, 2):
        with pytest.raises(KeyError, match="stage"):
            beside(fails, threads).result()


def test_once_makes_an_entry_once_however_many_threads_ask():
    from concurrent.futures import ThreadPoolExecutor

    cache: dict = {}
    lock = threading.RLock()
    made: list[str] = []

    def make(key: str) -> str:
        made.append(key)
        time.sleep(0.01)  # (the other threads ask while it is being made)
        return key.upper()

    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(lambda _: once(cache, "a", lambda: make("a"), lock), range(16)))
    assert got == ["A"] * 16 and made == ["a"]
    # a build that needs another entry takes the (reentrant) lock again
    outer = once(cache, "b", lambda: once(cache, "c", lambda: make("c"), lock) + "!", lock)
    assert outer == "C!" and cache == {"a": "A", "c": "C", "b": "C!"}
