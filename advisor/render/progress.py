"""Progress bar on stderr for long runs: appears only after ``delay_s`` seconds, only when
stderr is a terminal (never when piped or redirected), and clears itself when done."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

DELAY_S = 1.0


class StepProgress:
    """A bar of ``total`` steps; ``advance(label)`` marks one step done and names the next."""

    def __init__(self, progress: Progress, total: int, label: str) -> None:
        self._progress = progress
        self._task = progress.add_task(label, total=total)

    def advance(self, label: str | None = None) -> None:
        """Mark one step done; ``label`` describes what runs next."""
        self._progress.update(self._task, advance=1, description=label)


@contextmanager
def progress_bar(
    total: int, label: str, console: Console | None = None, delay_s: float = DELAY_S
) -> Iterator[StepProgress]:
    """Yield a StepProgress; the bar is drawn on ``console`` (default: stderr) once the run
    has lasted ``delay_s`` seconds, and not at all when that console is not a terminal."""
    console = console or Console(stderr=True)
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        disable=not console.is_terminal,
    )
    steps = StepProgress(progress, total, label)
    timer = threading.Timer(delay_s, progress.start)
    timer.daemon = True
    timer.start()  # Progress.start does nothing when disabled
    try:
        yield steps
    finally:
        timer.cancel()
        timer.join()
        progress.stop()
