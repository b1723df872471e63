"""A small, safe expression language for rule conditions and savings, evaluated vectorized.

Grammar (a subset of Python expressions, checked node by node; nothing is ``eval``-ed):
  comparisons  waves >= 1.0, 0.2 <= tail_fraction < 0.9, persistent == false
  boolean      and, or, not (element-wise)
  arithmetic   + - * / and unary minus over columns and numbers
  functions    min(a, b, ...), max(a, b, ...), abs(a), matches(column, "category")
  names        metric columns of the rule's scope; true/false/True/False
``matches(column, "category")`` tests names against a category of advisor/data/classify.yaml.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

import numpy as np
import pandas as pd

from advisor.data import load_yaml, name_matches

_CMP = {
    ast.Lt: np.less,
    ast.LtE: np.less_equal,
    ast.Gt: np.greater,
    ast.GtE: np.greater_equal,
    ast.Eq: np.equal,
    ast.NotEq: np.not_equal,
}
_BIN = {ast.Add: np.add, ast.Sub: np.subtract, ast.Mult: np.multiply, ast.Div: np.true_divide}
_FUNCS = {"min", "max", "abs", "matches"}
_BOOLS = {"true": True, "false": False, "True": True, "False": False}


class ExprError(ValueError):
    """An expression that does not parse or names something unknown."""


@dataclass(frozen=True)
class Expr:
    """A checked expression: its text, parsed tree and the columns it reads."""

    text: str
    tree: ast.Expression
    columns: frozenset[str]

    def evaluate(self, table: pd.DataFrame) -> pd.Series:
        """Value per row of ``table`` (bool for conditions, float for savings)."""
        value = _eval(self.tree.body, table)
        if np.isscalar(value):
            value = pd.Series(value, index=table.index)
        return pd.Series(value, index=table.index)

    def mask(self, table: pd.DataFrame) -> np.ndarray:
        """A condition's rows of ``table``: bool per row, False where its value is missing."""
        value = _eval(self.tree.body, table)
        if isinstance(value, np.ndarray) and value.dtype == bool and value.shape == (len(table),):
            return value  # (comparisons and and/or/not: bool arrays already)
        return self.evaluate(table).fillna(False).astype(bool).to_numpy()


def compile_expr(text: str, known_columns: set[str]) -> Expr:
    """Parse and check ``text``; raise ExprError naming the first problem."""
    if not isinstance(text, str) or not text.strip():
        raise ExprError("empty expression")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise ExprError(f"not a valid expression: {text!r} ({exc.msg})") from None
    used: set[str] = set()
    categories = set(load_yaml("classify.yaml"))
    for node in ast.walk(tree):
        _check_node(node, known_columns, categories, used)
    return Expr(text=text, tree=tree, columns=frozenset(used))


def _check_node(node, known: set[str], categories: set[str], used: set[str]) -> None:
    allowed = (
        ast.Expression, ast.BoolOp, ast.And, ast.Or, ast.UnaryOp, ast.Not, ast.USub,
        ast.BinOp, ast.Compare, ast.Call, ast.Name, ast.Load, ast.Constant,
        *tuple(_CMP), *tuple(_BIN),
    )  # fmt: skip
    if not isinstance(node, allowed):
        raise ExprError(f"'{type(node).__name__}' is not allowed in rule expressions")
    if isinstance(node, ast.Constant) and not isinstance(node.value, (int, float, bool, str)):
        raise ExprError(f"constant {node.value!r} is not a number, boolean or string")
    if isinstance(node, ast.Call):
        name = node.func.id if isinstance(node.func, ast.Name) else None
        if name not in _FUNCS or node.keywords:
            raise ExprError(
                f"unknown function {ast.unparse(node.func)!r} (allowed: "
                f"{', '.join(sorted(_FUNCS))})"
            )
        if name == "matches":
            category = node.args[1] if len(node.args) == 2 else None
            if not (isinstance(category, ast.Constant) and isinstance(category.value, str)):
                raise ExprError('matches() takes a column and a category: matches(name, "gemm")')
            if category.value not in categories:
                raise ExprError(
                    f"unknown category {category.value!r} in matches() "
                    f"(known: {', '.join(sorted(categories))})"
                )
        elif not node.args:
            raise ExprError(f"{name}() needs arguments")
    if isinstance(node, ast.Name) and node.id not in _FUNCS and node.id not in _BOOLS:
        if node.id not in known:
            raise ExprError(f"unknown metric {node.id!r} (known: {', '.join(sorted(known))})")
        used.add(node.id)


def _eval(node, t: pd.DataFrame):
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return _BOOLS[node.id] if node.id in _BOOLS else t[node.id]
    if isinstance(node, ast.BoolOp):
        values = [np.asarray(_eval(v, t), dtype=bool) for v in node.values]
        combine = np.logical_and if isinstance(node.op, ast.And) else np.logical_or
        out = values[0]
        for v in values[1:]:
            out = combine(out, v)
        return out
    if isinstance(node, ast.UnaryOp):
        value = _eval(node.operand, t)
        if isinstance(node.op, ast.Not):
            return np.logical_not(np.asarray(value, dtype=bool))
        return np.negative(value)
    if isinstance(node, ast.BinOp):
        return _BIN[type(node.op)](_num(_eval(node.left, t)), _num(_eval(node.right, t)))
    if isinstance(node, ast.Compare):
        left = _eval(node.left, t)
        result: np.ndarray | None = None
        for op, comp in zip(node.ops, node.comparators, strict=True):
            right = _eval(comp, t)
            if isinstance(left, str) or isinstance(right, str):  # text: == and != only
                if not isinstance(op, (ast.Eq, ast.NotEq)):
                    raise ExprError("text can only be compared with == or !=")
                a, b = (pd.Series(x, index=t.index).astype(str) for x in (left, right))
                step = (a == b).to_numpy() if isinstance(op, ast.Eq) else (a != b).to_numpy()
            else:
                # NaN compares False: a metric that is unknown never fires a rule
                step = np.asarray(_CMP[type(op)](_num(left), _num(right)), dtype=bool)
            result = step if result is None else np.logical_and(result, step)
            left = right
        return result
    name = node.func.id
    if name == "matches":
        column = _eval(node.args[0], t)
        return name_matches(pd.Series(column, index=t.index).astype(str), node.args[1].value)
    args = [_num(_eval(a, t)) for a in node.args]
    if name == "abs":
        return np.abs(args[0])
    fold = np.fmin if name == "min" else np.fmax
    out = args[0]
    for a in args[1:]:
        out = fold(out, a)
    return out


def _num(value):
    """Booleans and object columns as float arrays so NaN propagates."""
    if isinstance(value, (pd.Series, np.ndarray)):
        arr = np.asarray(value)
        if arr.dtype == object:
            return pd.to_numeric(pd.Series(arr), errors="coerce").to_numpy(dtype=float)
        return arr.astype(float) if arr.dtype == bool else arr
    return value
