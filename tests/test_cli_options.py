"""The options several commands share are one definition: the same flag has the same help
everywhere (the help texts had drifted: --gpu, --rules, --shape, --gemm, --emit)."""

import typer

from advisor import cli, cli_options

# flags whose meaning is the command's own (what is written, which format, which rows)
OWN = {"--format", "--top", "--output", "--config", "--help", "--version", "--assets"}


def _commands(group, prefix=""):
    for name, command in getattr(group, "commands", {}).items():
        yield f"{prefix}{name}", command
        yield from _commands(command, f"{prefix}{name} ")


def test_a_shared_flag_has_one_help_on_every_command():
    helps: dict[str, set[str]] = {}
    where: dict[str, list[str]] = {}
    for name, command in _commands(typer.main.get_command(cli.app)):
        for param in command.params:
            for flag in param.opts:
                if flag.startswith("--") and flag not in OWN:
                    helps.setdefault(flag, set()).add(param.help)
                    where.setdefault(flag, []).append(name)
    assert {flag: len(h) for flag, h in helps.items() if len(h) > 1} == {}
    # the shared ones are on the commands that read traces
    assert sorted(where["--gpu"]) == ["analyze", "baseline save", "gate", "report"]
    assert sorted(where["--rules"]) == ["analyze", "gate", "report", "rules list"]
    assert sorted(where["--store"]) == ["baseline list", "baseline save", "gate"]


def test_the_help_style_is_installed_once_and_shows_metavars():
    import typer.core

    before = typer.core.TyperOption.display_type_rich
    cli_options.install_help_style()  # (cli installed it at import: a second call changes nothing)
    assert typer.core.TyperOption.display_type_rich is before
    analyze = typer.main.get_command(cli.app).commands["analyze"]
    params = {p.opts[0]: p for p in analyze.params}
    assert params["--gpu"].display_type_rich(None) == "NAME"  # (typer's own: <text>)
    assert params["--separate"].display_type_rich(None) is None  # a flag
    assert params["traces"].display_type_rich(None) is None  # an argument
