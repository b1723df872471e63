"""advisor.staged: outputs appear whole or not at all."""

import errno
import tempfile

import pytest

from advisor import cli, staged
from advisor.staged import place, spooled, staging


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


def _made(monkeypatch, file=None) -> list[dict]:
    """The temporary files tempfile makes from now on (their arguments), each ``file()``
    when given."""
    made: list[dict] = []
    real = tempfile.TemporaryFile

    def recorded(**kwargs):
        made.append(kwargs)
        return file() if file else real(**kwargs)

    monkeypatch.setattr(tempfile, "TemporaryFile", recorded)
    return made


def test_a_spooled_output_is_its_pieces_in_order_on_disk_past_its_memory(monkeypatch):
    made = _made(monkeypatch)
    pieces = [b"{", b'"a": 1', b", ", b'"b": [1, 2, 3]', b"}"]  # 25 bytes
    with spooled(iter(pieces), in_memory=64) as whole:
        assert whole.read() == b"".join(pieces)
    assert made == []  # (25 bytes: held in memory)
    with spooled(iter(pieces), in_memory=10) as whole:
        assert whole.read() == b"".join(pieces)
    assert len(made) == 1 and made[0].get("dir") is None  # (the temporary folder)


def test_a_piece_that_fails_leaves_nothing_to_write(monkeypatch):
    def pieces():
        yield b"[1, "
        raise ValueError("a bug making the second piece")

    entered = False
    with pytest.raises(ValueError, match="second piece"), spooled(pieces(), in_memory=1):
        entered = True
    assert not entered


def test_a_full_temporary_folder_names_it(monkeypatch):
    _made(monkeypatch, file=lambda: open("/dev/full", "w+b"))  # noqa: SIM115 (ENOSPC)
    with pytest.raises(OSError) as err, spooled([b"x" * 100], in_memory=10):
        pass
    assert err.value.errno == errno.ENOSPC
    assert err.value.filename == f"{tempfile.gettempdir()} (a temporary copy of the output)"


def test_the_cli_writes_a_spooled_document_whole_to_stdout(monkeypatch, capsysbinary):
    # past SPOOL_IN_MEMORY the command's JSON goes through a temporary file, then stdout
    made = _made(monkeypatch)
    monkeypatch.setattr(staged, "SPOOL_IN_MEMORY", 8)
    cli._out_bytes(iter([b"{", b'\n  "a": [1, 2, 3]', b"\n}"]))
    assert capsysbinary.readouterr().out == b'{\n  "a": [1, 2, 3]\n}\n'
    assert len(made) == 1


def test_the_cli_writes_nothing_when_a_piece_fails(capsysbinary):
    def pieces():
        yield b'{\n  "a": 1,'
        raise ValueError("a bug making the second piece")

    with pytest.raises(ValueError):
        cli._out_bytes(pieces())
    assert capsysbinary.readouterr().out == b""
