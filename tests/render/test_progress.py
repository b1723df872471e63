"""The progress bar: drawn on a terminal after the delay, never when not a terminal."""

import io
import os
import subprocess
import sys
import time

from rich.console import Console

from advisor.render.progress import progress_bar


def _console(terminal: bool) -> tuple[Console, io.StringIO]:
    buf = io.StringIO()
    return Console(file=buf, force_terminal=terminal, width=80), buf


def test_terminal_shows_steps_after_the_delay():
    console, buf = _console(terminal=True)
    with progress_bar(2, "reading x.sqlite", console=console, delay_s=0.0) as bar:
        deadline = time.monotonic() + 10  # a loaded CI machine may start the timer late
        while "0/2" not in buf.getvalue() and time.monotonic() < deadline:
            time.sleep(0.05)
        bar.advance("computing metrics")
    out = buf.getvalue()  # the bar is drawn once more when it stops
    assert "reading x.sqlite" in out and "0/2" in out
    assert "computing metrics" in out and "1/2" in out


def test_quick_runs_draw_nothing():
    console, buf = _console(terminal=True)
    with progress_bar(2, "reading x.sqlite", console=console, delay_s=5.0) as bar:
        bar.advance()
    assert "reading" not in buf.getvalue()


def test_piped_output_draws_nothing():
    console, buf = _console(terminal=False)
    with progress_bar(2, "reading x.sqlite", console=console, delay_s=0.0) as bar:
        time.sleep(0.3)
        bar.advance()
    assert buf.getvalue() == ""


def test_steps_done_before_the_bar_appears_are_counted():
    """The bar is built only when due: a step finished before that is drawn as done."""
    console, buf = _console(terminal=True)
    with progress_bar(3, "reading x.sqlite", console=console, delay_s=0.2) as bar:
        bar.advance("computing metrics")
        deadline = time.monotonic() + 10
        while "1/3" not in buf.getvalue() and time.monotonic() < deadline:
            time.sleep(0.05)
    out = buf.getvalue()
    assert "computing metrics" in out and "1/3" in out and "0/3" not in out


def test_a_redirected_stderr_draws_nothing_and_loads_no_rich():
    # stderr redirected (no tty, neither TTY_COMPATIBLE nor FORCE_COLOR set): the timer
    # returns before importing rich, whose import would hold up the run for ~20 ms
    code = (
        "import sys, time\n"
        "from advisor.render.progress import progress_bar\n"
        "with progress_bar(2, 'reading', delay_s=0.0) as bar:\n"
        "    time.sleep(0.3)\n"
        "    bar.advance()\n"
        "print('rich' in sys.modules)\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("TTY_COMPATIBLE", "FORCE_COLOR")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, timeout=60)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False" and out.stderr == ""
