"""The one error type for bad input; the CLI turns it into one line on stderr and exit 2."""

from __future__ import annotations

import re
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


class NoTraceRead(AdvisorInputError):
    """None of the traces could be read: ``errors`` holds one line per trace."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__(None, "no trace could be read")
        self.errors = errors


def read_problem(exc: Exception) -> str:
    """What one of READ_ERRORS says, in words for a damaged file."""
    if isinstance(exc, zlib.error):
        return f"damaged gzip data ({exc})"
    return str(exc)


# msgspec's names of JSON types, in words
_JSON_TYPES = {"array": "a list", "object": "an object", "str": "text", "int": "a number",
               "float": "a number", "bool": "true/false", "null": "null"}  # fmt: skip
_MSGSPEC = re.compile(r"Expected `([^`]*)`, got `([^`]*)`(?: - at `\$\.?([^`]*)`)?")


def json_problem(exc: Exception) -> str:
    """A JSON decoder's complaint in words: msgspec's "Expected `array | null`, got `int` -
    at `$.traceEvents`" -> "traceEvents is a number where a list belongs"; other messages
    as they are."""
    m = _MSGSPEC.search(str(exc))
    if not m:
        return str(exc)
    want = " or ".join(
        dict.fromkeys(
            _JSON_TYPES.get(t.strip(), t.strip())
            for t in m.group(1).split("|")
            if t.strip() != "null"
        )
    )
    got = _JSON_TYPES.get(m.group(2), m.group(2))
    where = m.group(3) or "the top level"
    return f"{where} is {got} where {want or 'null'} belongs"


def not_a_trace(doc) -> str:
    """Why a decoded JSON document is not a trace advisor reads, in words (its top-level
    type, or the keys it has)."""
    expected = ("expected a PyTorch profiler trace (an object with 'traceEvents') or a "
                "rocprofv3 JSON (an object with 'rocprofiler-sdk-tool')")  # fmt: skip
    if isinstance(doc, dict):
        keys = ", ".join(repr(k) for k in list(doc)[:5]) + (", ..." if len(doc) > 5 else "")
        what = f"a JSON object with keys {keys}" if doc else "an empty JSON object"
    elif isinstance(doc, list):
        what = f"a JSON list of {len(doc)} item(s)" if doc else "an empty JSON list"
    else:
        what = f"a JSON {type(doc).__name__}"
    return f"{what}, not a profiler trace: {expected}"


def error_line(path: str, exc: Exception) -> str:
    """The one line that stands for a trace that could not be read (one rank of several):
    bad input as it says, anything else as an internal error naming the trace."""
    if isinstance(exc, AdvisorInputError):
        return str(exc)
    return f"{path}: internal error: {type(exc).__name__}: {exc}"
