"""The user's traceback without the tool's frames, and a failed launch summarised per rank.

``python -m neuroncompat bad.py`` and ``neuroncompat simulate -- python bad.py`` print the
script's error exactly as ``python bad.py`` does (no runpy or neuroncompat frames); a failing
``torchrun``/``accelerate launch`` under ``neuroncompat simulate`` shows the rank's traceback, then
one line naming the rank, the exception and the user's file:line, and where the launcher's full
output was kept, instead of the launcher's own error dump.
"""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from neuroncompat.simulate.launcher_output import LauncherOutput

SYNTAX_ERROR = "x = 1\ndef step(:\n    pass\n"
RUNTIME_ERROR = "def step():\n    raise ValueError('bad batch')\n\nstep()\n"


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NEURONCOMPAT_")}
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("source", [SYNTAX_ERROR, RUNTIME_ERROR], ids=["syntax", "runtime"])
def test_python_dash_m_neuroncompat_prints_the_error_as_python_does(tmp_path: Path, source: str) -> None:
    (tmp_path / "bad.py").write_text(source)
    plain = _run("bad.py", cwd=tmp_path)
    shimmed = _run("-m", "neuroncompat", "bad.py", cwd=tmp_path)
    assert (shimmed.returncode, shimmed.stderr) == (plain.returncode, plain.stderr) == (1, shimmed.stderr)
    assert "runpy" not in shimmed.stderr and "neuroncompat" not in shimmed.stderr


def test_simulate_shows_the_users_syntax_error_without_tool_frames(tmp_path: Path) -> None:
    (tmp_path / "bad.py").write_text(SYNTAX_ERROR)
    plain = _run("bad.py", cwd=tmp_path)
    # the interpreter under test, not the `python` on PATH (which may be another Python, without neuroncompat)
    simulated = _run("-m", "neuroncompat.cli", "simulate", "--", sys.executable, "bad.py", cwd=tmp_path)
    assert simulated.returncode == 1
    assert simulated.stderr == plain.stderr
    assert simulated.stderr.startswith(f'  File "{tmp_path / "bad.py"}", line 2\n')
    assert simulated.stderr.endswith("SyntaxError: invalid syntax\n")
    assert simulated.stdout.startswith(f"neuroncompat simulate: {sys.executable} bad.py\n")  # the report still comes


TORCHRUN_FAILURE = b"""\
W1201 21:10:25.891000 30074 site-packages/torch/distributed/run.py:874] *****
user output line
Traceback (most recent call last):
  File "fails.py", line 17, in <module>
    raise RuntimeError("rank 1 fails")
RuntimeError: rank 1 fails
E1201 21:10:58.802000 30074 site-packages/torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: 1)
Traceback (most recent call last):
  File "/venv/bin/torchrun", line 8, in <module>
    sys.exit(main())
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html
============================================================
"""


def test_launcher_output_keeps_the_ranks_lines_and_logs_the_launchers() -> None:
    shown, log = io.BytesIO(), io.BytesIO()
    output = LauncherOutput(io.BytesIO(TORCHRUN_FAILURE), shown, log)
    output.join()
    assert shown.getvalue() == (
        b'user output line\nTraceback (most recent call last):\n  File "fails.py", line 17, in <module>\n'
        b'    raise RuntimeError("rank 1 fails")\nRuntimeError: rank 1 fails\n'
    )
    assert log.getvalue() == TORCHRUN_FAILURE
    assert output.hidden == 9  # 2 glog lines, the launcher's traceback and what follows it


ONE_RANK_RAISES = """\
import os
import torch

rank = int(os.environ["RANK"])
torch.zeros(2, device=f"neuron:{os.environ['LOCAL_RANK']}")


def load_batch():
    if rank == 1:
        raise KeyError("input_ids")


load_batch()
"""


def _assert_summarised(result: subprocess.CompletedProcess[str], launcher: str) -> None:
    assert result.returncode == 1
    err = result.stderr
    assert "KeyError: 'input_ids'" in err
    assert "neuroncompat simulate: rank 1 failed: KeyError: 'input_ids' (fails.py:10)" in err
    assert "ChildFailedError" not in err and "CalledProcessError" not in err and "torch/distributed" not in err
    kept = re.search(rf"neuroncompat simulate: {launcher}'s full output: (\S+)", err)
    assert kept, err
    log = Path(kept.group(1))
    try:
        assert "Traceback" in log.read_text() and len(log.read_text().splitlines()) > len(err.splitlines())
    finally:
        log.unlink()


@pytest.mark.slow
@pytest.mark.ranks
def test_failing_torchrun_is_summarised_by_rank(tmp_path: Path) -> None:
    (tmp_path / "fails.py").write_text(ONE_RANK_RAISES)
    torchrun = str(Path(sys.executable).with_name("torchrun"))
    result = _run("-m", "neuroncompat.cli", "simulate", "--", torchrun, "--nproc_per_node=2", "fails.py", cwd=tmp_path)
    _assert_summarised(result, "torchrun")


@pytest.mark.slow
@pytest.mark.ranks
def test_failing_accelerate_launch_is_summarised_by_rank(tmp_path: Path) -> None:
    (tmp_path / "fails.py").write_text(ONE_RANK_RAISES)
    accelerate = str(Path(sys.executable).with_name("accelerate"))
    command = [accelerate, "launch", "--num_processes", "2", "fails.py"]
    result = _run("-m", "neuroncompat.cli", "simulate", "--", *command, cwd=tmp_path)
    _assert_summarised(result, "accelerate launch")
