"""The conventions users know from ruff and black (issue 45 item 7), each through a real `neuron-migrate` process.

`--version`; `-` reads a script on stdin and writes the migrated script, alone, to stdout (with
`--check`, only the exit status); `--help` ends with examples, which run as quoted, and the exit codes.
"""

from __future__ import annotations

import importlib.metadata
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from migrate.engine import migrate_source

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "finetune_cuda.py"


def neuron_migrate(*args: str, stdin: bytes = b"", cwd: Path | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "migrate", *args], input=stdin, cwd=cwd, capture_output=True, timeout=120, check=False
    )


def test_version() -> None:
    for flag in ("--version", "-V"):
        done = neuron_migrate(flag)
        assert done.returncode == 0
        assert done.stdout.decode() == f"neuron-migrate {importlib.metadata.version('neuroncompat')}\n"


def test_stdin_to_stdout() -> None:
    source = EXAMPLE.read_bytes()
    done = neuron_migrate("-", stdin=source)
    assert done.returncode == 0, done.stderr
    assert done.stdout == migrate_source(source, "-").new  # the migrated script and nothing else
    again = neuron_migrate("-", stdin=done.stdout)
    assert again.returncode == 0 and again.stdout == done.stdout  # nothing to do: the input, unchanged


def test_stdin_with_check_gives_the_exit_status_only() -> None:
    source = EXAMPLE.read_bytes()
    needs = neuron_migrate("--check", "-", stdin=source)
    assert (needs.returncode, needs.stdout) == (1, b"")
    migrated = neuron_migrate("-", stdin=source).stdout
    done = neuron_migrate("--check", "-", stdin=migrated)
    assert (done.returncode, done.stdout) == (0, b"")


def test_stdin_that_does_not_parse_is_an_error_naming_the_line() -> None:
    done = neuron_migrate("-", stdin=b"import torch\nx = torch.zeros(2).cuda(\n")
    assert done.returncode == 2 and done.stdout == b""
    assert re.match(r"neuron-migrate: -:2:\d+: syntax error", done.stderr.decode()), done.stderr


def test_stdin_goes_alone() -> None:
    for args in (("-", "train.py"), ("--write", "-"), ("--format", "json", "-")):
        done = neuron_migrate(*args, stdin=b"import torch\n")
        assert done.returncode == 2 and b"`-` (stdin) goes alone" in done.stderr, args


@pytest.mark.slow  # five neuron-migrate processes
def test_help_ends_with_examples_that_run_as_quoted_and_the_exit_codes(tmp_path: Path) -> None:
    text = neuron_migrate("--help").stdout.decode()
    examples, _, codes = text.partition("Examples:\n")[2].partition("\n\n")
    assert (
        codes.split()
        == (
            "Exit codes: 0 nothing to change (or all written), 1 changes needed (--check), "
            "2 usage or input error, 130 interrupted."
        ).split()
    )
    (tmp_path / "src").mkdir()
    shutil.copy(EXAMPLE, tmp_path / "train.py")
    shutil.copy(EXAMPLE, tmp_path / "src" / "train.py")
    commands = [
        re.split(r"\s{2,}", line.strip())[0] for line in examples.splitlines()
    ]  # the command, then what it does
    assert len(commands) == 4
    expected = {"train.py": 0, "--write src/": 0, "--check .": 1, "- < train.py": 0}  # train.py is still CUDA
    for command in commands:
        words = shlex.split(command)
        assert words[0] == "neuron-migrate"
        stdin = b""
        if words[-2:-1] == ["<"]:
            stdin, words = (tmp_path / words[-1]).read_bytes(), words[:-2]
        done = neuron_migrate(*words[1:], stdin=stdin, cwd=tmp_path)
        assert done.returncode == expected[command.removeprefix("neuron-migrate ")], (command, done.stderr)
