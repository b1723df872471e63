"""advisor.memory: the process memory policy switches what it says it switches."""

import subprocess
import sys

from advisor import memory

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


def test_large_arrays_stay_in_the_heap_from_4m_rows():
    # glibc's mallinfo2: hblkhd is the bytes held in mmap()ed blocks. A 64 MB block is
    # mapped on its own under glibc's defaults (above its 32 MB threshold); once the policy
    # for a 4M-row table is set, it comes from the heap (a fresh process: the policy stays)
    code = """
import ctypes, sys
from advisor import memory
memory.advise_for_rows(int(sys.argv[1]))
libc = ctypes.CDLL("libc.so.6")
class Info(ctypes.Structure):
    _fields_ = [(f, ctypes.c_size_t) for f in ("arena", "ordblks", "smblks", "hblks",
                "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]
libc.mallinfo2.restype = Info
block = bytearray(64 << 20)
print(libc.mallinfo2().hblkhd >= 64 << 20)
"""

    def mapped(rows: int) -> str:
        run = [sys.executable, "-c", code, str(rows)]
        return subprocess.run(run, capture_output=True, text=True, check=True).stdout.strip()

    assert mapped(memory.HUGE_PAGE_ROWS - 1) == "True"
    assert mapped(memory.HUGE_PAGE_ROWS) == "False"
