"""The one error type for bad input; the CLI turns it into one line on stderr and exit 2."""

from __future__ import annotations


class AdvisorInputError(Exception):
    """Bad input (trace, option or config): ``path`` names the file, the message says why."""

    def __init__(self, path: str | None, message: str) -> None:
        self.path = path
        self.message = message
        super().__init__(f"{path}: {message}" if path else message)
