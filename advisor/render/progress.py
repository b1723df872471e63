"""Progress bar on stderr for long runs: appears only after ``delay_s`` seconds, only when
stderr is a terminal (never when piped or redirected), and clears itself when done. rich is
loaded only when the bar is due: a run shorter than the delay never imports it (~20 ms of
every command's start otherwise)."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress, TaskID

DELAY_S = 1.0


class StepProgress:
    """A bar of ``total`` steps; ``advance(label)`` marks one step done and names the next.
    The steps are counted here until the bar is drawn (``show``), then drawn as they come."""

    def __init__(self, total: int, label: str) -> None:
        self.total, self.done, self.label = total, 0, label
        self._lock = threading.Lock()  # (advance runs on the caller's thread, show on a timer)
        self._progress: Progress | None = None
        self._task: TaskID | None = None
        self._ended = False

    def advance(self, label: str | None = None) -> None:
        """Mark one step done; ``label`` describes what runs next."""
        with self._lock:
            self.done += 1
            self.label = label if label is not None else self.label
            if self._progress is not None and self._task is not None:
                self._progress.update(self._task, advance=1, description=label)

    def show(self, console: Console | None) -> None:
        """Draw the bar from now on, on ``console`` (default: stderr), unless that is no
        terminal or the steps have ended."""
        if console is None and not _stderr_may_be_terminal():
            return  # (without loading rich: this timer's import would hold up the run)
        from rich import progress as bar
        from rich.console import Console

        console = console or Console(stderr=True)
        if not console.is_terminal:
            return
        progress = bar.Progress(bar.TextColumn("{task.description}"), bar.BarColumn(),
                                bar.MofNCompleteColumn(), bar.TimeElapsedColumn(),
                                console=console, transient=True)  # fmt: skip
        with self._lock:
            if self._ended:
                return
            self._task = progress.add_task(self.label, total=self.total, completed=self.done)
            self._progress = progress
            progress.start()

    def end(self) -> None:
        """Stop drawing (the bar clears itself)."""
        with self._lock:
            self._ended = True
            if self._progress is not None:
                self._progress.stop()


def _stderr_may_be_terminal() -> bool:
    """False where rich's stderr console would say it is no terminal for certain: stderr is
    no tty and neither TTY_COMPATIBLE nor FORCE_COLOR (which rich obeys) is set."""
    if os.environ.get("TTY_COMPATIBLE") is not None or os.environ.get("FORCE_COLOR") is not None:
        return True
    try:
        return sys.stderr is not None and sys.stderr.isatty()
    except ValueError:  # (a closed stderr)
        return False


@contextmanager
def progress_bar(
    total: int, label: str, console: Console | None = None, delay_s: float = DELAY_S
) -> Iterator[StepProgress]:
    """Yield a StepProgress; the bar is drawn on ``console`` (default: stderr) once the run
    has lasted ``delay_s`` seconds, and not at all when that console is not a terminal."""
    steps = StepProgress(total, label)
    timer = threading.Timer(delay_s, steps.show, args=(console,))
    timer.daemon = True
    timer.start()
    try:
        yield steps
    finally:
        timer.cancel()
        timer.join()
        steps.end()
