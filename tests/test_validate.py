"""advisor.validate: a document that does not fit its schema names the field and the
problem in the user's words (the expected strings written by hand from the schemas below)."""

from __future__ import annotations

import enum
from typing import Annotated, Literal

import msgspec
import pytest

from advisor.validate import FieldError, Invalid, convert


class Colour(str, enum.Enum):
    RED = "red"
    BLUE = "blue"


class Inner(msgspec.Struct, forbid_unknown_fields=True):
    colour: Colour
    weight: float | Literal["auto"] = 1.0


class Outer(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    name: Annotated[str, msgspec.Meta(min_length=1)]
    count: Annotated[int, msgspec.Meta(gt=0)] = 1
    tags: list[str] = []
    inner: Inner | None = None
    parts: dict[str, Inner] = {}

    def __post_init__(self) -> None:
        if self.name == "reserved":
            raise FieldError("name", "'reserved' is taken")


@pytest.mark.parametrize(
    ("doc", "field", "problem"),
    [
        ({}, "name", "missing (required)"),
        ({"name": "a", "colour": 1}, "colour", "not a known field"),
        ({"name": "a", "count": 0}, "count", "expected int >= 1"),
        ({"name": "a", "count": "3"}, "count", "expected int, got str"),
        ({"name": "a", "tags": "x"}, "tags", "expected list, got str"),
        ({"name": "a", "tags": ["x", 2]}, "tags.1", "expected str, got int"),
        ({"name": "a", "inner": {"colour": "green"}}, "inner.colour",
         "'green' is not one of 'red' or 'blue'"),
        ({"name": "a", "inner": {"colour": "red", "weight": "x"}}, "inner.weight",
         "'x' is not a number or 'auto'"),
        ({"name": "a", "inner": {}}, "inner.colour", "missing (required)"),
        ({"name": "reserved"}, "name", "'reserved' is taken"),
        ([1, 2], "(doc)", "expected mapping, got list"),
        ({"name": "a", "parts": {1: {"colour": "red"}}}, "parts", "keys must be text"),
    ],
)  # fmt: skip
def test_a_misfit_names_its_field_and_problem(doc, field, problem):
    with pytest.raises(Invalid) as bad:
        convert(doc, Outer, empty="(doc)")
    assert (bad.value.field, bad.value.problem) == (field, problem)


def test_a_fitting_document_converts_and_at_prefixes_the_field():
    got = convert({"name": "a", "inner": {"colour": "blue"}}, Outer)
    assert (got.name, got.count, got.inner.colour, got.inner.weight) == ("a", 1, Colour.BLUE, 1.0)
    with pytest.raises(Invalid) as bad:
        convert({"colour": "red", "size": 2}, Inner, at="parts.first")
    assert bad.value.field == "parts.first.size"
    with pytest.raises(Invalid) as bad:
        convert("red", Inner, at="parts.first")
    assert (bad.value.field, bad.value.problem) == ("parts.first", "expected mapping, got str")
