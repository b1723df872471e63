"""Check parsed YAML documents (rule files, ``--gpu-spec`` files, gate configs) against
their schemas, msgspec Structs, and say what is wrong in the user's words.

A problem is (field, what is wrong): the field as a dotted path into the document
(``emit.kind``, ``evidence.0``; ``empty`` for the whole document) and a short message,
e.g. ``'gemmm' is not one of 'gemm', 'launch' or 'advice'``. A schema's own checks
(``__post_init__``) raise ``FieldError`` to name the field they are about.
"""

from __future__ import annotations

import re
from typing import TypeVar

import msgspec
import msgspec.inspect as mi

S = TypeVar("S")

_AT = re.compile(r"^(?P<message>.*?)(?: - at `(?P<path>.*)`)?$", re.DOTALL)
_NAMED = re.compile(r"^Object (?P<what>missing required|contains unknown) field `(?P<name>[^`]*)`$")
_TYPE_WORDS = {"array": "list", "object": "mapping"}  # (msgspec's JSON words, in YAML's)


class FieldError(ValueError):
    """A schema's own check failed on ``field`` (raised from a Struct's ``__post_init__``)."""

    def __init__(self, field: str, problem: str):
        super().__init__(problem)
        self.field = field
        self.problem = problem


class Invalid(Exception):
    """A document does not fit its schema: ``field`` (dotted path) and ``problem``."""

    def __init__(self, field: str, problem: str):
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem


def convert(doc: object, schema: type[S], empty: str = "(file)", at: str = "") -> S:
    """``doc`` (plain data from YAML) as an instance of the Struct ``schema``; Invalid names
    the first field that does not fit (``empty`` when it is the whole document; ``at``:
    where ``doc`` lies in a larger document, prefixed to the field)."""
    try:
        return msgspec.convert(doc, schema)
    except msgspec.ValidationError as exc:
        field, problem = _problem(exc, schema, empty)
        raise Invalid(f"{at}.{field}" if at and field != empty else at or field, problem) from None


def _problem(exc: msgspec.ValidationError, schema: type, empty: str) -> tuple[str, str]:
    """(field, problem) of msgspec's error message ``message - at `$.a.b[0]```."""
    m = _AT.match(str(exc))
    message, path = (m["message"], m["path"] or "$") if m else (str(exc), "$")
    if path.startswith("key` in `"):  # a mapping key that is not text
        return _dotted(_steps(path.removeprefix("key` in `")), empty), "keys must be text"
    steps = _steps(path)
    cause = exc.__cause__ or exc.__context__  # (msgspec chains the __post_init__ error)
    if isinstance(cause, FieldError):
        return _dotted([*steps, cause.field], empty), cause.problem
    named = _NAMED.match(message)
    if named:
        missing = named["what"] == "missing required"
        return _dotted([*steps, named["name"]], empty), (
            "missing (required)" if missing else "not a known field"
        )
    if message.startswith("Invalid enum value "):
        value = message.removeprefix("Invalid enum value ")
        choices, numeric = _choices(mi.type_info(schema), steps)
        if choices:
            also = "a number or " if numeric else ""
            among = "" if len(choices) == 1 else "one of "
            return _dotted(steps, empty), f"{value} is not {also}{among}{_listed(choices)}"
    message = re.sub(r"`([^`]*)`", _type_words, message)
    return _dotted(steps, empty), message[:1].lower() + message[1:]


def _type_words(quoted: re.Match) -> str:
    """A type msgspec names in backquotes, in YAML's words (``str | array`` -> str | list)."""
    return re.sub(r"\w+", lambda w: _TYPE_WORDS.get(w[0], w[0]), quoted[1])


def _steps(path: str) -> list[str]:
    """``$.emit.kind`` -> ['emit', 'kind']; ``$.evidence[0]`` -> ['evidence', '0']."""
    return [s for s in re.split(r"[.\[\]]+", path.removeprefix("$")) if s]


def _dotted(steps: list[str], empty: str) -> str:
    return ".".join(steps) or empty


def _listed(values: list) -> str:
    shown = [repr(v) for v in values]
    return shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " or " + shown[-1]


def _choices(t: mi.Type, steps: list[str]) -> tuple[list, bool]:
    """The values an enum or literal field at ``steps`` (below the type ``t``) allows, and
    whether it takes a number too."""
    for step in steps:
        t = _container(t)
        if isinstance(t, mi.StructType):
            t = next((f.type for f in t.fields if f.encode_name == step), mi.AnyType())
        elif isinstance(t, (mi.ListType, mi.TupleType, mi.VarTupleType, mi.SetType)):
            t = getattr(t, "item_type", mi.AnyType())
        elif isinstance(t, mi.DictType):
            t = t.value_type
        else:
            return [], False
    members = t.types if isinstance(t, mi.UnionType) else (t,)
    values: list = []
    for member in members:
        if isinstance(member, mi.EnumType):
            values += [e.value for e in member.cls]
        elif isinstance(member, mi.LiteralType):
            values += list(member.values)
    return values, any(isinstance(m, (mi.IntType, mi.FloatType)) for m in members)


def _container(t: mi.Type) -> mi.Type:
    """The Struct / list / mapping member of a union (``X | None``), else ``t``."""
    if isinstance(t, mi.UnionType):
        kinds = (mi.StructType, mi.ListType, mi.DictType)
        return next((m for m in t.types if isinstance(m, kinds)), t)
    return t
