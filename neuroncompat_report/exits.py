"""The exit statuses the three commands share, and the click command class that keeps to them.

- 0: nothing to do, or passed;
- 1: changes needed (`neuron-migrate --check`), or a stage or the script failed;
- 2: a usage or input error: the option, file, path or config that is wrong and why;
- 130: interrupted (128 + SIGINT, as a shell reports a program stopped with Ctrl-C).

130 has to be its own status: CI reads 1 from `neuron-migrate --check` as "a file would change", and an
interrupted run has found nothing of the kind. A usage or input error is written in the format the user asked
for (`migrate.formats`-style `--format`), so a tool reading `--format json` gets a JSON object with an `error`
field rather than an empty stdout (`neuroncompat_report.errors`).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any, NoReturn

import click

from neuroncompat_report.errors import write_error

OK = 0
FAILED = 1
INPUT_ERROR = 2
INTERRUPTED = 130


class InputError(click.ClickException):
    """A usage or input error a command found itself (a config, a path, a rule id): exit 2.

    `fmt` is the report format when the command already knows it (from a config file, say); otherwise the
    format is read from the command line.
    """

    exit_code = INPUT_ERROR

    def __init__(self, message: str, fmt: str | None = None) -> None:
        super().__init__(message)
        self.fmt = fmt


class Failure(click.ClickException):
    """The command ran and could not finish its work (a timeout, a worker that died): exit 1, in the format."""

    exit_code = FAILED


def format_in(argv: Sequence[str]) -> str:
    """The value of the last `--format X` / `--format=X` before a `--`, or "text"."""
    fmt = "text"
    for i, arg in enumerate(argv):
        if arg == "--":
            break
        if arg == "--format" and i + 1 < len(argv):
            fmt = argv[i + 1]
        elif arg.startswith("--format="):
            fmt = arg.partition("=")[2]
    return fmt


class _ExitStatuses:
    """Mixin for a click command or group: errors and Ctrl-C become the shared statuses, errors in the format.

    click itself exits 1 on Ctrl-C ("Aborted!") and writes every error as text on stderr; this runs click
    without its standalone handling and does both here instead.
    """

    tool = "neuroncompat"

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        argv = list(sys.argv[1:] if args is None else args)
        if not standalone_mode:
            return super().main(argv, prog_name, complete_var, False, **extra)  # type: ignore[misc]
        try:
            code = super().main(argv, prog_name, complete_var, False, **extra)  # type: ignore[misc]
        except click.Abort as stop:
            if isinstance(stop.__cause__, EOFError):
                _exit_with(self._tool(argv), click.UsageError("no input (end of file at a prompt)"), format_in(argv))
            click.echo(f"{self._tool(argv)}: interrupted", err=True)
            sys.exit(INTERRUPTED)
        except click.ClickException as error:
            fmt = getattr(error, "fmt", None) or format_in(argv)
            _exit_with(self._tool(argv), error, fmt)
        sys.exit(code if isinstance(code, int) else OK)

    def _tool(self, argv: Sequence[str]) -> str:
        """`neuron-migrate`, or `neuroncompat check` for a group's subcommand: what an error message starts with."""
        commands = getattr(self, "commands", {})
        sub = next((arg for arg in argv if not arg.startswith("-")), None)
        return f"{self.tool} {sub}" if sub in commands else self.tool


def _exit_with(tool: str, error: click.ClickException, fmt: str) -> NoReturn:
    """Write `error` in `fmt` and exit with its status (2 for usage and input errors)."""
    if fmt == "text" and not isinstance(error, InputError | Failure):
        error.show()  # click's own usage errors: the usage line and "Error: ...", as click prints them
    else:
        write_error(tool, error.format_message(), fmt, error.exit_code)
    sys.exit(error.exit_code)


class Command(_ExitStatuses, click.Command):
    """A click command that exits with the shared statuses; set `tool` to the name its errors start with."""


class Group(_ExitStatuses, click.Group):
    """A click group that exits with the shared statuses; its subcommands' errors and Ctrl-C included."""
