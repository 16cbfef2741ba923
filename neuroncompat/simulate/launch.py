"""Run the user's command with the shim, the simulator and the recorder on in every process.

The command is rewritten so the script itself runs through ``python -m neuroncompat`` (no edit
to the script): ``python [opts] train.py`` -> ``python [opts] -m neuroncompat train.py``,
``python -m pkg.mod`` -> ``python -m neuroncompat -m pkg.mod``, ``torchrun [opts] train.py`` ->
``torchrun [opts] -m neuroncompat train.py`` (also with torchrun's ``-m``, and
``python -m torch.distributed.run``), and ``accelerate launch [opts] train.py`` ->
``python -m neuroncompat -m accelerate.commands.launch [opts] -m neuroncompat train.py``. The
launchers' own option parsers find where the script starts, so every launcher option is kept.

A bare ``python`` (``python3``, ``python3.12``) or ``torchrun`` becomes the interpreter ``neuroncompat``
itself runs under (``torchrun`` as its ``-m torch.distributed.run``): the one that has neuroncompat, where the
first ``python`` on PATH may not (``venv/bin/neuroncompat simulate -- python train.py`` without an activated
venv). A path (``/usr/bin/python3``, ``./other-venv/bin/torchrun``) is the user's choice and is kept.

For ``torchrun`` and ``accelerate launch`` the launcher's own error dump is left out of the
terminal (:mod:`~neuroncompat.simulate.launcher_output`; the whole output goes to a log file
whose path is printed) and a failed run ends with one line per failed rank: the user's exception
and file:line (:mod:`~neuroncompat.simulate.failures`).

The environment tells each process what to do: ``NEURONCOMPAT_SIMULATE=1`` (the shim starts
the simulator), ``NEURONCOMPAT_SIMULATE_RECORD=<dir>`` (and records into it) and
``NEURONCOMPAT_SIMULATE_CORES`` (enough cores for every local rank).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from neuroncompat.simulate import RECORD_ENV, failures
from neuroncompat.simulate.job import Job
from neuroncompat.simulate.launcher_output import LauncherOutput
from neuroncompat.simulate.report import load_records

_PYTHON = re.compile(r"python[\d.]*(\.exe)?")
_PYTHON_OPTIONS_WITH_VALUE = ("-W", "-X")
_TORCHRUN_MODULES = ("torch.distributed.run",)
_ACCELERATE_LAUNCH = "accelerate.commands.launch"


class UnsupportedCommand(ValueError):
    """A command ``neuroncompat simulate`` cannot route through the shim."""


@dataclass(frozen=True)
class Launch:
    """The rewritten command and how many processes it starts per node (None: one, or unknown)."""

    argv: list[str]
    processes: int | None = None
    launcher: str | None = None  # "torchrun" or "accelerate launch"; None for a plain python


def _count(value: Any) -> int | None:
    return int(value) if isinstance(value, int) or (isinstance(value, str) and value.isdigit()) else None


def _launcher(argv: Sequence[str], prefix: int, parsed: Any, processes: Any) -> Launch:
    """``argv[:prefix]`` (the launcher), its options, then ``-m neuroncompat`` before the script."""
    if getattr(parsed, "no_python", False):
        raise UnsupportedCommand(
            "--no-python runs the script without Python; neuroncompat can only simulate Python scripts"
        )
    script_at = len(argv) - len(parsed.training_script_args) - 1
    options = [arg for arg in argv[prefix:script_at] if arg not in ("-m", "--module")]
    target = ["-m"] if parsed.module else []
    return Launch([*argv[:prefix], *options, "-m", "neuroncompat", *target, *argv[script_at:]], _count(processes))


def _torchrun(argv: Sequence[str], prefix: int) -> Launch:
    from torch.distributed.run import get_args_parser

    parsed = get_args_parser().parse_args(list(argv[prefix:]))
    launch = _launcher(argv, prefix, parsed, parsed.nproc_per_node)
    return Launch(launch.argv, launch.processes, "torchrun")


def _accelerate(argv: Sequence[str], prefix: int, python: str) -> Launch:
    """``accelerate launch`` itself runs under the shim too: it starts one process per core only
    when it sees a multi-core Neuron device in its own process, as on a trn2."""
    from accelerate.commands.launch import launch_command_parser

    parsed = launch_command_parser().parse_args(list(argv[prefix:]))
    launch = _launcher(argv, prefix, parsed, parsed.num_processes)
    return Launch(
        [python, "-m", "neuroncompat", "-m", _ACCELERATE_LAUNCH, *launch.argv[prefix:]],
        launch.processes,
        "accelerate launch",
    )


def _python(argv: Sequence[str]) -> Launch:
    index = 1
    while index < len(argv):
        arg = argv[index]
        if arg == "-m":
            if index + 1 >= len(argv):
                raise UnsupportedCommand("python -m needs a module name")
            module = argv[index + 1]
            if module in _TORCHRUN_MODULES:
                return _torchrun(argv, index + 2)
            if module == _ACCELERATE_LAUNCH:
                return _accelerate(argv, index + 2, argv[0])
            if module == "neuroncompat":
                return Launch(list(argv))
            return Launch([*argv[:index], "-m", "neuroncompat", *argv[index:]])
        if arg == "-c":
            raise UnsupportedCommand("python -c is not supported: put the code in a script file")
        if not arg.startswith("-") or arg == "-":
            if arg == "-":
                raise UnsupportedCommand("a script from stdin is not supported: pass a script file")
            return Launch([*argv[:index], "-m", "neuroncompat", *argv[index:]])
        index += 2 if arg in _PYTHON_OPTIONS_WITH_VALUE else 1
    raise UnsupportedCommand("no script given to python")


def _this_interpreter(argv: list[str]) -> list[str]:
    """A bare ``python`` or ``torchrun`` as this interpreter's (see the module docstring); a path as given."""
    program = argv[0]
    if os.sep in program or (os.altsep is not None and os.altsep in program):
        return argv
    if _PYTHON.fullmatch(program):
        return [sys.executable, *argv[1:]]
    if program == "torchrun":
        return [sys.executable, "-m", "torch.distributed.run", *argv[1:]]
    return argv


def plan(argv: Sequence[str]) -> Launch:
    """The command that runs ``argv`` through the shim (see the module docstring)."""
    argv = list(argv)
    if not argv:
        raise UnsupportedCommand("no command given")
    argv = _this_interpreter(argv)
    program = Path(argv[0]).name
    if _PYTHON.fullmatch(program):
        return _python(argv)
    if program == "torchrun":
        return _torchrun(argv, 1)
    if program == "accelerate" and argv[1:2] == ["launch"]:
        return _accelerate(argv, 2, sys.executable)
    raise UnsupportedCommand(f"{argv[0]!r}: expected python, torchrun or accelerate launch")


def _exit_code(returncode: int) -> int:
    """A signal death as the shell reports it (128 + signal number)."""
    return 128 - returncode if returncode < 0 else returncode


def run(argv: Sequence[str], cores: int | None = None) -> tuple[int, list[dict[str, Any]]]:
    """Run ``argv`` on the simulator; returns its exit code and every process's record.

    Without ``cores`` the simulator gets its default (2), or one core per local process when the
    launcher starts more. The command runs as its own job (:mod:`~neuroncompat.simulate.job`): Ctrl-C,
    SIGTERM and SIGHUP reach it and this waits for it to end, so its records are still read and the
    temporary directory is removed after it, never under it.
    """
    launch = plan(argv)
    env = dict(os.environ, NEURONCOMPAT_SIMULATE="1")
    if cores is None and launch.processes is not None and launch.processes > 2:
        cores = launch.processes
    if cores is not None:
        env["NEURONCOMPAT_SIMULATE_CORES"] = str(cores)
    with tempfile.TemporaryDirectory(prefix="neuroncompat-simulate-") as directory:
        env[RECORD_ENV] = directory
        log_path = Path(directory, "launcher.log")
        with open(log_path, "wb") as log:
            try:
                with Job(launch.argv, env, stderr=subprocess.PIPE if launch.launcher else None) as job:
                    assert job.process is not None
                    stderr = job.process.stderr
                    output = LauncherOutput(stderr, sys.stderr.buffer, log) if stderr is not None else None
                    returncode = job.wait()
            except FileNotFoundError as exc:
                raise UnsupportedCommand(f"{launch.argv[0]!r} was not found: {exc.strerror}") from exc
            if output is not None:
                output.join()
        exit_code = _exit_code(returncode)
        if launch.launcher and exit_code != 0:
            _summarise(launch.launcher, exit_code, failures.load(directory), log_path)
        return exit_code, load_records(directory)


def _summarise(launcher: str, exit_code: int, failed: list[dict[str, Any]], log_path: Path) -> None:
    """One line per failed rank, and where the launcher's whole output was kept."""
    fd, kept = tempfile.mkstemp(prefix="neuroncompat-simulate-", suffix=".log")
    with os.fdopen(fd, "wb") as out:
        out.write(log_path.read_bytes())
    for line in failures.summary(failed, launcher, exit_code):
        print(f"neuroncompat simulate: {line}", file=sys.stderr)
    print(f"neuroncompat simulate: {launcher}'s full output: {kept}", file=sys.stderr, flush=True)
