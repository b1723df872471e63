"""advisor.staged: outputs appear whole or not at all."""

import pytest

from advisor.staged import place, staging


def test_a_failed_move_takes_back_the_files_already_placed(tmp_path):
    blocker = tmp_path / "b.png"
    blocker.mkdir()
    (blocker / "keep").write_text("x")  # a file cannot replace a non-empty folder
    with staging(tmp_path, ".t-") as stage:
        (stage / "a.png").write_text("chart")
        (stage / "b.png").write_text("chart")
        (stage / "r.md").write_text("report")
        moves = [("a.png", tmp_path / "a.png"), ("b.png", blocker), ("r.md", tmp_path / "r.md")]
        with pytest.raises(OSError):
            place(stage, moves)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.png"]  # no stage, no a.png


def test_staged_files_land_in_order_and_the_stage_goes(tmp_path):
    with staging(tmp_path / "new", ".t-") as stage:
        (stage / "x").write_text("1")
        (stage / "y").write_text("2")
        assert place(stage, [("x", tmp_path / "new" / "x"), ("y", tmp_path / "y")]) == [
            tmp_path / "new" / "x",
            tmp_path / "y",
        ]
    assert sorted(p.name for p in (tmp_path / "new").iterdir()) == ["x"]
    assert (tmp_path / "y").read_text() == "2"
