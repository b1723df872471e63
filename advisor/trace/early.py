"""Reading started before the program has loaded: the console entry (launch.py) hands its
command line here first, before it imports anything else, and each reader that can use the
time starts on the trace it names (the Kineto reader's scan of a large uncompressed trace:
kineto/early.py; the kernel table of a large Nsight Systems export: sqlearly.py). The
readers take what was started when they read that file, and read as usual otherwise.
Imports nothing heavy: numpy and pandas are what is loading."""

from __future__ import annotations


def start(argv: list[str]) -> None:
    """Start what the readers can start on the trace of ``argv`` (the command line without
    the program); returns at once."""
    from advisor.trace import sqlearly
    from advisor.trace.kineto import early as kineto_early

    kineto_early.start(argv)
    sqlearly.start(argv)
