"""The one error type for bad input; the CLI turns it into one line on stderr and exit 2."""

from __future__ import annotations

import zlib

MAX_MESSAGE = 400  # characters
# what reading a damaged or unreadable file raises besides its format's own errors: I/O
# errors (gzip.BadGzipFile among them), a gzip stream that breaks (zlib.error) or ends early
READ_ERRORS: tuple[type[Exception], ...] = (OSError, EOFError, zlib.error)
# why a JSON document nesting past the decoder's recursion limit (RecursionError) is refused
TOO_DEEP = "nests deeper than the JSON decoder follows (a damaged or hostile file)"


class AdvisorInputError(Exception):
    """Bad input (trace, option or config): ``path`` names the file, the message says why."""

    def __init__(self, path: str | None, message: str) -> None:
        self.path = path
        # one line, whatever the cause carried (SQLite quotes multi-line schema text)
        self.message = " ".join(str(message).split())
        if len(self.message) > MAX_MESSAGE:
            self.message = self.message[: MAX_MESSAGE - 3] + "..."
        super().__init__(f"{path}: {self.message}" if path else self.message)


def read_problem(exc: Exception) -> str:
    """What one of READ_ERRORS says, in words for a damaged file."""
    if isinstance(exc, zlib.error):
        return f"damaged gzip data ({exc})"
    return str(exc)


def error_line(path: str, exc: Exception) -> str:
    """The one line that stands for a trace that could not be read (one rank of several):
    bad input as it says, anything else as an internal error naming the trace."""
    if isinstance(exc, AdvisorInputError):
        return str(exc)
    return f"{path}: internal error: {type(exc).__name__}: {exc}"
