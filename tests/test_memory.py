"""advisor.memory: the process memory policy switches what it says it switches."""

import gc
import subprocess
import sys

from conftest import ROOT

from advisor import memory, pipeline

try:
    from numpy._core.multiarray import _get_madvise_hugepage
except ImportError:  # numpy < 2
    from numpy.core.multiarray import _get_madvise_hugepage


def test_huge_pages_only_for_tables_of_at_least_4m_rows():
    before = _get_madvise_hugepage()
    try:
        memory.advise_huge_pages(memory.HUGE_PAGE_ROWS - 1)
        assert _get_madvise_hugepage() is False
        memory.advise_huge_pages(memory.HUGE_PAGE_ROWS)
        assert _get_madvise_hugepage() is True
    finally:
        memory.advise_huge_pages(memory.HUGE_PAGE_ROWS if before else 0)


def test_one_heap_for_every_thread():
    # glibc: with the arena limit at 1, a new thread allocates from the main arena, so
    # malloc_info lists one heap (a fresh process: the limit must come before any thread)
    code = """
import ctypes, threading
from advisor import memory
memory.share_one_heap()
blocks = []
t = threading.Thread(target=lambda: blocks.extend(bytearray(4096) for _ in range(1000)))
t.start(); t.join()
libc = ctypes.CDLL("libc.so.6")
libc.open_memstream.restype = ctypes.c_void_p
buf, size = ctypes.c_char_p(), ctypes.c_size_t()
stream = libc.open_memstream(ctypes.byref(buf), ctypes.byref(size))
libc.malloc_info(0, ctypes.c_void_p(stream)); libc.fclose(ctypes.c_void_p(stream))
print(buf.value.decode().count("<heap nr="))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "1"


# a fresh process with the policy for a table of argv[1] rows, glibc's mallinfo2 and a 64 MB
# block allocated (the subprocess tests below print what they ask of it)
MALLINFO_AFTER_POLICY = """
import ctypes, sys
from advisor import memory
memory.advise_for_rows(int(sys.argv[1]))
libc = ctypes.CDLL("libc.so.6")
class Info(ctypes.Structure):
    _fields_ = [(f, ctypes.c_size_t) for f in ("arena", "ordblks", "smblks", "hblks",
                "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]
libc.mallinfo2.restype = Info
block = bytearray(64 << 20)
"""


def test_large_arrays_stay_in_the_heap_from_4m_rows():
    # glibc's mallinfo2: hblkhd is the bytes held in mmap()ed blocks. A 64 MB block is
    # mapped on its own under glibc's defaults (above its 32 MB threshold); once the policy
    # for a 4M-row table is set, it comes from the heap (a fresh process: the policy stays)
    code = MALLINFO_AFTER_POLICY + "print(libc.mallinfo2().hblkhd >= 64 << 20)\n"

    def mapped(rows: int) -> str:
        run = [sys.executable, "-c", code, str(rows)]
        return subprocess.run(run, capture_output=True, text=True, check=True).stdout.strip()

    assert mapped(memory.HUGE_PAGE_ROWS - 1) == "True"
    assert mapped(memory.HUGE_PAGE_ROWS) == "False"


def test_freed_large_arrays_are_not_given_back_from_4m_rows():
    # mallinfo2's arena: the bytes the heap holds from the system. Freeing a 64 MB block at
    # the heap's top gives it back under glibc's trimming; with the policy for a 4M-row
    # table it stays, for the next array to reuse without faulting pages in again. (The
    # threshold once passed 2**62, which ctypes masks to a C int's 0: trimming at every free.)
    code = MALLINFO_AFTER_POLICY + (
        "held = libc.mallinfo2().arena\ndel block\n"
        "print(libc.mallinfo2().arena >= held - (1 << 20), held >= 64 << 20)\n"
    )

    def kept(rows: int) -> str:
        run = [sys.executable, "-c", code, str(rows)]
        return subprocess.run(run, capture_output=True, text=True, check=True).stdout.strip()

    assert kept(memory.HUGE_PAGE_ROWS) == "True True"


def test_paused_gc_is_off_inside_and_as_it_was_after():
    assert gc.isenabled()
    with memory.paused_gc():
        assert not gc.isenabled()
        with memory.paused_gc():  # (nested: the inner block leaves it off)
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with memory.paused_gc():
            pass
        assert not gc.isenabled()  # (off before: still off)
    finally:
        gc.enable()


def test_the_pipeline_runs_without_collections(monkeypatch):
    # reading, the metrics and the rules run with the collector off; it is on again after
    seen = []
    analysis_of = pipeline.analysis_of

    def spy(*args, **kwargs):
        seen.append(gc.isenabled())
        return analysis_of(*args, **kwargs)

    monkeypatch.setattr(pipeline, "analysis_of", spy)
    pipeline.run(str(ROOT / "sample_traces" / "h200_train_steps.sqlite"))
    assert seen == [False] and gc.isenabled()


def test_the_pipeline_asks_for_the_memory_policy_before_reading():
    # first with the rows the file says it holds (before any column is allocated: the heap
    # policy must be in force then), then with the rows read (1,411 kernels, 25 copies and
    # 25 memsets in this sample, counted with SQLite: the kernel table's rowids run 1-1411)
    seen = []
    pipeline.run(str(ROOT / "sample_traces" / "h200_scheduling.sqlite"), memory_advice=seen.append)
    assert seen == [1411, 1411 + 25 + 25]


def test_the_console_leaves_the_libraries_out_of_collections():
    # advisor.launch imports the libraries with the collector off, freezes what they made
    # and turns it on for the command
    code = """
import gc, sys
import advisor.launch as launch
import advisor.cli as cli
cli.entry = lambda: print(gc.isenabled(), gc.get_freeze_count() > 10000)
sys.argv = ["advisor", "--help"]
launch.entry()
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "True"]
