"""Every `neuron-migrate` and `neuroncompat` command quoted in the README and the tools' pages runs as quoted.

A command a user copies from the docs must not stop at "No such option" because an option was renamed. Each
quoted command (from the ```bash blocks) is parsed by the real command-line interface, in a folder holding the
files the docs name (`train.py`, `src/`, `path/to/model`), so an option that no longer exists, a choice it no
longer takes or a subcommand that is gone fails here. The codemod's commands are quick, so they also run, for
real, through a shell (`neuron-migrate - < train.py` included), and must end as the docs say: 0, or 1 for a
`--check` that finds work. `simulate` and `check` start training runs: their end-to-end runs are other tests'.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import click
import pytest
from helpers import REPO

from migrate import cli as migrate_cli
from neuroncompat import cli as neuroncompat_cli

PAGES = [
    "README.md",
    *(
        f"docs/{name}.md"
        for name in ("install", "shim", "migrate", "simulate", "check", "simulator", "cuda_redirect", "plan")
    ),
]
_COMMAND = re.compile(r"^(?:[A-Z_]+=\S+ )*(neuron-migrate|neuroncompat(?= (?:simulate|check|doctor|plan)\b))\b(.*)$")


def _quoted() -> list[tuple[str, str, str]]:
    """(page, program, arguments) of each quoted command, its trailing comment and `args…` placeholder dropped."""
    found = []
    for page in PAGES:
        text = (REPO / page).read_text(encoding="utf-8")
        for block in re.findall(r"^```(?:bash|sh)\n(.*?)^```$", text, re.M | re.S):
            for line in block.splitlines():
                match = _COMMAND.match(line.strip())
                if match:
                    arguments = re.sub(r"\s+#.*$", "", match.group(2)).replace("args…", "").replace("$ARGS", "")
                    found.append((page, match.group(1), arguments.strip()))
    return found


COMMANDS = _quoted()


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A folder with what the quoted commands name: a CUDA script, a source tree, a model config."""
    example = REPO / "examples" / "finetune_cuda.py"
    for name in ("train.py", "model.py"):
        shutil.copy(example, tmp_path / name)
    (tmp_path / "src").mkdir()
    shutil.copy(example, tmp_path / "src" / "train.py")
    (tmp_path / "path" / "to" / "model").mkdir(parents=True)
    (tmp_path / "path" / "to" / "model" / "config.json").write_text('{"model_type": "llama"}\n')
    return tmp_path


def test_the_docs_quote_each_tool() -> None:
    programs = {
        (program, arguments.split()[0] if program == "neuroncompat" else "") for _, program, arguments in COMMANDS
    }
    assert programs >= {("neuron-migrate", ""), ("neuroncompat", "simulate"), ("neuroncompat", "check")}


@pytest.mark.parametrize("page, program, arguments", COMMANDS, ids=[f"{p}: {g} {a}"[:80] for p, g, a in COMMANDS])
def test_quoted_command_parses(page: str, program: str, arguments: str, project: Path, monkeypatch) -> None:
    monkeypatch.chdir(project)
    words = shlex.split(arguments)
    if "<" in words:  # a shell redirection, not the command's
        words = words[: words.index("<")]
    command: click.Command = migrate_cli.main
    if program == "neuroncompat":  # the subcommand parses its own arguments
        found = neuroncompat_cli.main.get_command(click.Context(neuroncompat_cli.main), words[0])
        assert found is not None, f"{page}: neuroncompat has no subcommand {words[0]!r}"
        command, words = found, words[1:]
    try:
        with command.make_context(f"{program} {page}", list(words)) as context:
            if "--" in words:  # `simulate` and `plan` pass a command on: each option quoted before `--` is their own
                [rest] = [p.name for p in command.params if isinstance(p, click.Argument) and p.nargs == -1]
                assert list(context.params[rest]) == words[words.index("--") + 1 :], (
                    f"{page}: `{program} {arguments}`: an option before `--` is not {command.name}'s"
                )
    except click.exceptions.Exit as done:  # --version, --help: a clean exit
        assert done.exit_code == 0
    except click.UsageError as error:
        pytest.fail(f"{page}: `{program} {arguments}` does not parse: {error.format_message()}")


@pytest.mark.parametrize(
    "page, arguments",
    [(page, arguments) for page, program, arguments in COMMANDS if program == "neuron-migrate"],
    ids=[f"{p}: {a}"[:80] for p, g, a in COMMANDS if g == "neuron-migrate"],
)
def test_quoted_codemod_command_runs(page: str, arguments: str, project: Path) -> None:
    done = subprocess.run(
        f"{shlex.quote(sys.executable)} -m migrate {arguments}",
        shell=True,
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
    )
    expected = {0, 1} if "--check" in arguments else {0}
    assert done.returncode in expected, f"{page}: `neuron-migrate {arguments}` exited {done.returncode}\n{done.stderr}"
    assert "Usage:" not in done.stderr and "Traceback" not in done.stderr, done.stderr
