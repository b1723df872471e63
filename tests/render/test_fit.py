"""render.fit on hand-built tables (docs/terminal.md): numbers whole, columns left out in
their stated order, rows told apart, names shortened where they differ."""

import io

from rich.console import Console, Group

from advisor.render.fit import Col, fit, fitted_table, shorten_distinct, wrap

COLS = [Col("kernel", text=True, min=12, identifies=True), Col("dev", drop=2, identifies=True),
        Col("launches", drop=3), Col("count", drop=3), Col("total")]  # fmt: skip
ROWS = [["vectorized_elementwise_kernel", "0", "66", "1", "1.16 ms"],
        ["vectorized_elementwise_kernel", "1", "82", "2", "488.16 us"]]  # fmt: skip


def _printed(renderable, width: int) -> str:
    buf = io.StringIO()
    Console(file=buf, width=width, color_system=None).print(renderable)
    return buf.getvalue()


def test_wrap_keeps_each_number_with_its_unit():
    text = "each launch runs 488.16 us; 2.93 ms of it waits (overlap 0.0 %), +1 (+2.4%)"
    for width in range(12, 60):
        lines = wrap(text, width)
        assert all(len(line) <= width for line in lines)
        joined = "\n".join(lines)
        for number in ("488.16 us", "2.93 ms", "0.0 %", "(+2.4%)"):
            assert number in joined, (width, lines)
    assert wrap("a gap of 77.70 us; more", 16) == ["a gap of", "77.70 us; more"]
    assert wrap("one\ntwo three", 7, indent="- ", hanging="  ") == ["- one", "  two", "  three"]


def test_columns_left_out_by_priority_equal_ones_together():
    natural = fit(COLS, ROWS, 80)
    assert [c.header for c in natural.cols] == ["kernel", "dev", "launches", "count", "total"]
    assert natural.left_out == []
    # 29 + 3 + 8 + 5 + 9 + 16 = 70: at 60 the kernel name is shortened first (to its 12)...
    assert fit(COLS, ROWS, 60).left_out == []
    # ...at 50, launches and count (drop 3) go together, dev (drop 2) stays
    laid = fit(COLS, ROWS, 50)
    assert laid.left_out == ["launches", "count"] and "dev" in [c.header for c in laid.cols]
    # at 30, dev goes too: the name cell then says which device each row is
    laid = fit(COLS, ROWS, 30)
    assert laid.left_out == ["dev", "launches", "count"]
    assert [r[0] for r in laid.rows] == ["vectori…kernel\n[dev 0]", "vectori…kernel\n[dev 1]"]
    assert [r[1] for r in laid.rows] == ["1.16 ms", "488.16 us"]  # numbers untouched
    out = _printed(fitted_table("Kernels", COLS, ROWS, 30), 30)
    assert "(left out at this width: dev, launches, count)" in " ".join(out.split())
    assert max(map(len, out.splitlines())) <= 30


def test_values_join_the_name_only_where_rows_would_read_the_same():
    rows = [["gemm", "0", "1", "1", "1 ms"], ["gemm", "1", "1", "1", "2 ms"],
            ["relu", "0", "1", "1", "3 ms"]]  # fmt: skip
    laid = fit(COLS, rows, 20)
    assert laid.left_out == ["dev", "launches", "count"]
    assert [r[0] for r in laid.rows] == ["gemm\n[dev 0]", "gemm\n[dev 1]", "relu"]
    # a folded column's value always joins the name (the gate's metric)
    cols = [Col("what", text=True, wrap=True, identifies=True), Col("change"),
            Col("metric", text=True, drop=1, identifies=True, fold=True)]  # fmt: skip
    laid = fit(cols, [["all (steady state)", "+94.04 us (+3.4%)", "gpu_busy_ns"]], 44)
    assert laid.rows == [["all (steady state)\n[metric gpu_busy_ns]", "+94.04 us (+3.4%)"]]
    # a name's own "[...]" (what tells kernel groups apart beyond the columns) stays whole
    rows = [["Kernel2 [shape unknown (op)]", "0", "8", "1", "2.74 ms"],
            ["Kernel2 [no op or range]", "0", "1", "1", "344.25 us"]]  # fmt: skip
    assert [r[0] for r in fit(COLS, rows, 44).rows] == [
        "Kernel2\n[shape unknown (op)]",
        "Kernel2\n[no op or range]",
    ]


def test_names_alike_once_shortened_show_where_they_differ():
    names = [
        *(
            f"void cudnn::bn_bw_1C11_kernel_new<float, float, float2, {n}, true, 1>(float)"
            for n in (128, 512)
        ),
        "void cudnn::bn_fw_tr_1C11_kernel_NCHW<float, 128>(f)",
    ]
    for width in (20, 24, 32, 50):
        short = shorten_distinct(names, width)
        assert len(set(short)) == 3 and all(len(x) <= width for x in short), short
    assert shorten_distinct(names, 32)[:2] == ["void …, 128, true, 1>(float)",
                                               "void …, 512, true, 1>(float)"]  # fmt: skip
    assert shorten_distinct(["same", "same"], 2) == ["s…", "s…"]  # equal names stay equal


def test_a_wrapped_cell_led_by_a_name_gives_it_a_few_lines():
    # a finding's "where": a 420-character kernel name, its range, device and time. Wrapped
    # on words it took 20 lines of a 30-character column; as a name, 2 (and where a word
    # runs past a line, one more), its ends kept, the two kernels told apart
    long = ("void at::native::elementwise_kernel_manual_unroll<128, 8, "
            + ", ".join(f"at::native::functor_{i}<c10::BFloat16>" for i in range(10))
            + ">(int, {n})")  # fmt: skip
    cells = [f"{long.format(n=n)}\nrange ProfilerStep\ndevice 2\nat +846.49 ms"
             for n in ("a", "b")]  # fmt: skip
    col = Col("where", text=True, wrap=True, name_lines=2)
    fitted = fit([col], [[c] for c in cells], 34)
    assert fitted is not None and fitted.widths == [30]
    shown, width = fitted.rows, 30
    for (cell,), n in zip(shown, ("a", "b"), strict=True):
        lines = cell.split("\n")
        assert lines[-3:] == ["range ProfilerStep", "device 2", "at +846.49 ms"]
        assert 2 <= len(lines) - 3 <= 3 and max(map(len, lines)) <= width, lines
        name = " ".join(lines[:-3])
        assert name.startswith("void at::native::") and "…" in name and f"{n})" in name
    assert shown[0] != shown[1]
    # no line of a folded name ends or starts with the ellipsis (it would read as a cut
    # number, "f3…"); broken at a space in a line's second half where there is one
    from advisor.render.fit import fold_name

    assert fold_name("sm80_xmma_gemm_f32f32_f3…ecute_kernel__5x", 24) == [
        "sm80_xmma_gemm_f32f32_f", "3…ecute_kernel__5x"]  # fmt: skip
    assert fold_name("void at::native::(anonymous …t16 const*)", 30) == [
        "void at::native::(anonymous …t", "16 const*)"]  # fmt: skip
    assert fold_name("void at::native::(anonymous namespace)::k", 30) == [
        "void at::native::(anonymous", "namespace)::k"]  # fmt: skip
    # a first line that wraps on its words into two lines is wrapped, not cut in a word
    ((cell,),) = fit([col], [["range tiny_kernels_eager\ndevice 0"]], 27).rows
    assert cell == "range\ntiny_kernels_eager\ndevice 0"
    # a short first line (a range finding) is as it was
    ((cell,),) = fit([col], [["range step\ndevice 0\nat +1.00 ms"]], 34).rows
    assert cell == "range step\ndevice 0\nat +1.00 ms"


def test_a_prose_column_may_break_long_words_instead_of_shortening_them():
    # a finding's config path and a flag to pass: whole, over lines (shortened, they could
    # be neither opened nor typed)
    text = "config: /tmp/out/01_host_work_sync_in_loop_dev0.md or record_shapes=True"
    for col, whole in ((Col("m", text=True, wrap=True, break_words=True), True),
                       (Col("m", text=True, wrap=True), False)):  # fmt: skip
        fitted = fit([col], [[text]], 24)
        assert fitted is not None and fitted.widths == [20]
        joined = "".join(fitted.rows[0][0].split("\n"))
        assert ("/tmp/out/01_host_work_sync_in_loop_dev0.md" in joined) is whole, joined


def test_a_table_that_cannot_fit_is_printed_as_blocks():
    cols = [Col("metric", text=True, wrap=True), Col("time"), Col("share of steady time")]
    rows = [["start-up idle (module load)", "1.47 s", "(97.5 % of the window)"]]
    assert fit(cols, rows, 30) is None
    blocks = fitted_table("Where the GPU time went", cols, rows, 30)
    assert isinstance(blocks, Group)
    out = _printed(blocks, 30)
    assert max(map(len, out.splitlines())) <= 30
    assert "1.47 s" in out and "97.5 %" in out


def test_cells_are_not_rich_markup():
    rows = [["f<[lambda(int) (instance 1)]>", "0", "1", "1", "[bold]1 ms"]]
    out = _printed(fitted_table("t", COLS, rows, 80), 80)
    assert "[lambda(int) (instance 1)]" in out and "[bold]1 ms" in out
