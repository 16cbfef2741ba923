"""`neuroncompat simulate` runs the user's command as its own job: signals reach it, nothing outlives it, and a
bare `python` is the interpreter neuroncompat runs under. Real processes throughout."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from neuroncompat.simulate.job import Job

DEADLINE_S = 120


def _until(condition: Callable[[], bool], what: str) -> None:
    """Poll ``condition`` until it holds; fail naming ``what`` after the deadline (polling, not a sleep as sync)."""
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"still waiting after {DEADLINE_S} s: {what}")
        time.sleep(0.05)


def _gone(pid: int) -> bool:
    """The process has ended: no such pid, or a zombie that only waits to be reaped (a grandchild re-parented to
    PID 1, which in a container may reap late or never)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


# Writes its own pid, its child's pid and the simulate record directory to READY, then sleeps.
SLEEPER = """\
import json, os, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
ready = {"pid": os.getpid(), "child": child.pid, "record": os.environ.get("NEURONCOMPAT_SIMULATE_RECORD")}
with open(sys.argv[1] + ".tmp", "w") as f:
    json.dump(ready, f)
os.replace(sys.argv[1] + ".tmp", sys.argv[1])
time.sleep(600)
"""


def test_a_signal_to_the_job_owner_reaches_the_whole_group(tmp_path: Path) -> None:
    ready = tmp_path / "ready.json"
    script = tmp_path / "sleeper.py"
    script.write_text(SLEEPER)
    pids: dict = {}
    before = signal.getsignal(signal.SIGTERM)
    try:
        with Job([sys.executable, str(script), str(ready)], dict(os.environ)) as job:
            _until(ready.exists, "the script to start")
            pids = json.loads(ready.read_text())
            os.kill(os.getpid(), signal.SIGTERM)  # what `kill <simulate>` does; the job passes it on
            returncode = job.wait()
        assert returncode == -signal.SIGTERM
        _until(lambda: _gone(pids["child"]), "the script's own child to end with its group")
        assert signal.getsignal(signal.SIGTERM) is before  # the handler is undone once the job ended
    finally:
        for pid in pids.values():
            if isinstance(pid, int):
                _kill(pid)


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NEURONCOMPAT_")}
    env.update(extra)
    return env


@pytest.mark.slow  # the script runs under the shim and the simulator (torch imported)
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT], ids=lambda s: s.name)
def test_simulate_killed_leaves_no_orphan_and_no_temporary_directory(tmp_path: Path, signum: int) -> None:
    ready = tmp_path / "ready.json"
    (tmp_path / "sleeper.py").write_text(SLEEPER)
    simulate = subprocess.Popen(
        [sys.executable, "-m", "neuroncompat.cli", "simulate", "python", "sleeper.py", str(ready)],
        cwd=tmp_path,
        env=_clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    pids: dict = {}
    try:
        _until(lambda: ready.exists() or simulate.poll() is not None, "the script to start")
        assert ready.exists(), simulate.communicate()
        pids = json.loads(ready.read_text())
        simulate.send_signal(signum)
        out, err = simulate.communicate(timeout=DEADLINE_S)
        assert simulate.returncode == 128 + signum, err
        assert _gone(pids["pid"])  # simulate waited for the script itself
        # the script's own child got the signal with its group; it ends on its own schedule, so it is polled for
        _until(lambda: _gone(pids["child"]), "the script's own child to end with its group")
        assert pids["record"] and not Path(pids["record"]).exists()
        assert f"the script FAILED with exit code {128 + signum}" in out
    finally:
        simulate.kill()
        simulate.communicate()
        for pid in pids.values():
            if isinstance(pid, int):
                _kill(pid)


@pytest.mark.slow  # the script runs under the shim and the simulator (torch imported)
def test_a_bare_python_is_the_interpreter_neuroncompat_runs_under(tmp_path: Path) -> None:
    """The first `python` on PATH lacks neuroncompat (here it cannot even start a script): simulate must not use it."""
    wrong = tmp_path / "bin"
    wrong.mkdir()
    (wrong / "python").write_text("#!/bin/sh\necho 'not the python neuroncompat runs under' >&2\nexit 97\n")
    (wrong / "python").chmod(0o755)
    (tmp_path / "which.py").write_text(
        "import sys, torch\nopen('which.txt', 'w').write(sys.executable + ' ' + str(torch.neuron.is_available()))\n"
    )
    env = _clean_env(PATH=f"{wrong}{os.pathsep}{os.environ['PATH']}")
    done = subprocess.run(
        [sys.executable, "-m", "neuroncompat.cli", "simulate", "python", "which.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=DEADLINE_S,
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "which.txt").read_text() == f"{sys.executable} True"
