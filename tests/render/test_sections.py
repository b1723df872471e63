"""The report's shared table definitions (render.sections), on hand-built traces."""


def test_quantization_says_what_was_not_computed():
    # kernel a: 1 CTA of 128 threads on an H200, 10 us; kernel b: a grid of 0 (no valid
    # number in the trace), 20 us: no waves, so no idle computed for it ("-", not 0 ns), and
    # the kind says why (its grid; "no facts" is for a GPU without facts)
    from builders import trace as hand_trace

    from advisor.analysis import analyze
    from advisor.render.sections import quantization

    rows = [dict(name="a", start=0, end=10_000), dict(name="b", start=20_000, end=40_000,
                                                     grid_x=0)]  # fmt: skip
    section = quantization(analyze(hand_trace(rows)), top=10)
    shown = {r[0]: r for r in section.rows}
    headers = [c.header for c in section.cols]
    waves, share, idle, kind = (headers.index(h) for h in ("waves", "idle share",
                                                           "quant. idle", "kind"))  # fmt: skip
    assert [shown["b"][i] for i in (waves, share, idle, kind)] == ["-", "-", "-", "no grid"]
    grid, block = headers.index("grid"), headers.index("block")
    assert (shown["b"][grid], shown["a"][grid], shown["a"][block]) == ("0x1x1", "1x1x1", "128")
    assert shown["a"][waves] != "-" and shown["a"][idle].endswith("us")
    # a grid the trace did not record (ROCm's Kineto traces): '-', not 'nanxnanxnan'
    no_grid = [dict(name="c", start=0, end=10_000, grid_x=float("nan"), grid_y=float("nan"),
                    grid_z=float("nan"), block_x=float("nan"))]  # fmt: skip
    (row,) = quantization(analyze(hand_trace(no_grid)), top=10).rows
    assert [row[i] for i in (grid, block, waves, idle, kind)] == ["-", "-", "-", "-", "no grid"]
    # without GPU facts nothing is computed: no rows, and the note says why
    t = hand_trace(rows)
    t.gpus = {}
    section = quantization(analyze(t), top=10)
    assert section.empty and section.note.startswith("not computed without GPU facts")
