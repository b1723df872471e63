import math

import pandas as pd
import pytest

from advisor.rules.expr import ExprError, compile_expr

COLS = {"waves", "tail_fraction", "name", "persistent", "total_ns", "k_iters", "limiter"}
TABLE = pd.DataFrame(
    {
        "waves": [1.0076, 0.5, 2.0, float("nan")],
        "tail_fraction": [0.4962, 0.5, 0.0, 0.3],
        "name": ["tiled_gemm_kernel", "elementwise", "nvjet_sm90_x", "gemm_y"],
        "persistent": [False, False, True, False],
        "total_ns": [1000.0, 2000.0, 3000.0, 4000.0],
        "k_iters": [128.0, float("nan"), 4.0, 8.0],
        "limiter": ["registers", "warps", "shared_memory", "registers"],
    }
)


def ev(text):
    return compile_expr(text, COLS).evaluate(TABLE).tolist()


def test_comparisons_and_boolean_logic():
    assert ev("waves >= 1 and tail_fraction >= 0.2") == [True, False, False, False]
    assert ev("waves < 1 or persistent") == [False, True, True, False]
    assert ev("not persistent") == [True, True, False, True]
    assert ev("0.2 <= tail_fraction < 0.5") == [True, False, False, True]
    assert ev("persistent == false") == [True, True, False, True]


def test_nan_never_fires_and_not_of_unknown_is_true():
    # k_iters unknown in row 1: "k_iters <= 16" is False there, its negation True
    assert ev("k_iters <= 16") == [False, False, True, True]
    assert ev("not (k_iters <= 16)") == [True, True, False, False]


def mask(text, table=TABLE):
    return compile_expr(text, COLS).mask(table).tolist()


def test_a_conditions_mask_is_false_where_its_value_is_missing():
    """Expr.mask (the rows a rule fires on): bool arrays as they come, anything else as
    evaluate gives it with missing values False; the same rows as evaluate's either way."""
    assert mask("waves >= 1 and tail_fraction >= 0.2") == [True, False, False, False]
    assert mask("k_iters <= 16") == [False, False, True, True]  # (NaN: False)
    holes = TABLE.assign(persistent=pd.Series([True, None, False, True], dtype=object))
    assert mask("persistent", holes) == [True, False, False, True]  # (a bare column: None)
    assert mask("true") == [True] * 4 and mask("false") == [False] * 4  # (a constant)
    for text in ("waves < 1 or persistent", "not persistent", "k_iters <= 16"):
        assert mask(text) == ev(text)


def test_arithmetic_and_functions():
    got = ev("max(total_ns * (1 - tail_fraction / 0.5), 0)")
    assert got[0] == pytest.approx(1000 * (1 - 0.4962 / 0.5))
    assert got[1] == 0 and got[2] == 3000
    assert ev("min(total_ns, 1500)") == [1000, 1500, 1500, 1500]
    assert ev("abs(-waves)")[2] == 2.0
    assert math.isnan(ev("waves + 1")[3])


def test_matches_and_text_equality():
    assert ev('matches(name, "gemm_kernels")') == [True, False, True, True]
    assert ev('matches(name, "persistent_kernels")') == [False, False, True, False]
    assert ev('limiter == "registers"') == [True, False, False, True]
    assert ev('limiter != "registers"') == [False, True, True, False]


@pytest.mark.parametrize(
    "text, words",
    [
        ("wavez > 1", "unknown metric 'wavez'"),
        ("__import__('os').system('true')", "unknown function"),
        ("waves.real > 1", "'Attribute' is not allowed"),
        ("waves[0] > 1", "'Subscript' is not allowed"),
        ("(lambda: 1)()", "unknown function"),
        ("[w for w in waves]", "not allowed"),
        ("waves > ", "not a valid expression"),
        ('matches(name, "no_such_category")', "unknown category"),
        ("matches(name)", "matches() takes a column and a category"),
        ("waves ** 2 > 1", "'Pow' is not allowed"),
        ("", "empty expression"),
        ("sorted(waves)", "unknown function 'sorted'"),
    ],
)
def test_rejected_expressions_name_the_problem(text, words):
    with pytest.raises(ExprError) as err:
        compile_expr(text, COLS)
    assert words in str(err.value)


def test_columns_used_are_recorded():
    assert compile_expr("waves >= 1 and not persistent", COLS).columns == {"waves", "persistent"}
