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
