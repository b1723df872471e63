"""The rich console the commands print their tables on (stdout)."""

from __future__ import annotations

import os

from rich.console import Console

from advisor.output_paths import silence_stdout
from advisor.render.terminal import PIPED_WIDTH


class QuietConsole(Console):
    """Rich console that goes quiet when the reader of stdout stops (e.g. `| head`) and
    lets the command finish with its own exit code (rich's default exits 1 there)."""

    def on_broken_pipe(self) -> None:
        self.quiet = True
        silence_stdout()


def stdout_console() -> Console:
    """Rich console on stdout: the terminal's width, or COLUMNS when set; piped or
    redirected without COLUMNS: PIPED_WIDTH (100) columns."""
    console = QuietConsole()
    if console.is_terminal or os.environ.get("COLUMNS", "").isdigit():
        return console
    return QuietConsole(width=PIPED_WIDTH)
