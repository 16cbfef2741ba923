"""Every command answers ``-h`` as it answers ``--help``: usage and options, exit 0; the scenarios
module run where it cannot work says so in one line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import run_python


@pytest.mark.parametrize(
    ("args", "usage"),
    [
        ([], "neuroncompat [OPTIONS] COMMAND [ARGS]..."),
        (["simulate"], "neuroncompat simulate [OPTIONS] COMMAND..."),
        (["doctor"], "neuroncompat doctor [OPTIONS]"),
        (["run"], "neuroncompat run [OPTIONS] ARGV..."),
    ],
)
def test_neuroncompat_commands_accept_dash_h(args: list[str], usage: str) -> None:
    code = f"from neuroncompat.cli import main; main({[*args, '-h']!r}, prog_name='neuroncompat')"
    short = run_python(code)
    long = run_python(code.replace("'-h'", "'--help'"))
    assert short.returncode == 0, short.stderr
    assert f"Usage: {usage}" in short.stdout
    assert short.stdout == long.stdout


def test_help_starts_without_torch() -> None:
    """`neuroncompat --help` and each command's help answer without importing torch or transformers: they took
    2.3 CPU-s (torch's start-up, through the simulate report's modules) where 0.2 do."""
    code = (
        "import sys\n"
        "from neuroncompat.cli import main\n"
        "for args in ([], ['simulate'], ['doctor'], ['run'], ['check'], ['plan']):\n"
        "    try:\n"
        "        main([*args, '--help'], prog_name='neuroncompat')\n"
        "    except SystemExit:\n"
        "        pass\n"
        "print('IMPORTED', sorted(m for m in ('torch', 'transformers') if m in sys.modules))\n"
    )
    result = run_python(code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "IMPORTED []"


def test_simulate_passes_dash_h_after_the_command_to_the_script() -> None:
    """``-h`` after ``--`` belongs to the user's command, not to ``neuroncompat simulate``."""
    code = "from neuroncompat.cli import main; main(['simulate', '--', 'python', '-h'], prog_name='neuroncompat')"
    result = run_python(code)
    assert result.returncode == 2
    assert "Usage: neuroncompat simulate" in result.stderr and "no script given to python" in result.stderr


def test_python_dash_m_neuroncompat_dash_h_prints_its_usage() -> None:
    result = subprocess.run([sys.executable, "-m", "neuroncompat", "-h"], capture_output=True, text=True, check=False)
    assert result.returncode == 0 and result.stdout.startswith("usage: python -m neuroncompat SCRIPT.py")


def test_scenarios_run_directly_without_a_neuron_device_say_how_in_one_line(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NEURONCOMPAT_")}
    result = subprocess.run(
        [sys.executable, "-m", "neuroncompat.simulate.scenarios", "grpo", "--cache", "dynamic"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == (
        "python -m neuroncompat.simulate.scenarios: no Neuron device here; dry-run the scenario on the simulated one: "
        "neuroncompat simulate -- python -m neuroncompat.simulate.scenarios grpo --cache dynamic\n"
    )


@pytest.mark.slow  # a fresh interpreter importing the CLI (and torch), twice
def test_neuroncompat_version_and_help_end_with_examples_and_exit_codes() -> None:
    import neuroncompat

    for flag in ("--version", "-V"):
        version = subprocess.run([sys.executable, "-m", "neuroncompat.cli", flag], capture_output=True, text=True)
        assert (version.returncode, version.stdout) == (0, f"neuroncompat {neuroncompat.__version__}\n")
    text = run_python("from neuroncompat.cli import main; main(['--help'], prog_name='neuroncompat')").stdout
    examples, _, codes = text.partition("Examples:\n")[2].partition("\n\n")
    assert [line.split()[:2] for line in examples.splitlines()] == [
        ["neuroncompat", "doctor"],
        ["neuroncompat", "simulate"],
        ["neuroncompat", "check"],
        ["neuroncompat", "plan"],
    ]
    assert " ".join(codes.split()) == (
        "Exit codes: 0 ok, 1 changes needed, a stage failed or the step does not fit, 2 usage or input error, "
        "130 interrupted; "
        "COMMAND --help says more."
    )
