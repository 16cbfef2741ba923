"""``neuroncompat check`` shows the step it is at on stderr, only where stderr is a terminal (issue 45 item 6).

The terminal is a real pseudo-terminal (``pty``). Off a terminal nothing is written: the JSON tests in
``tests/test_check.py`` parse stdout and stderr together, which a progress line would break.
"""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import stderr_on_a_terminal

from neuroncompat.check.progress import StageProgress

_ON_TERMINAL = "from neuroncompat.check.progress import on_terminal; print(type(on_terminal(['m'])).__name__)"


def test_the_line_is_redrawn_in_place_and_erased() -> None:
    controller, terminal = pty.openpty()
    with os.fdopen(terminal, "w") as stream:
        progress = StageProgress(["path/to/model"], stream)
        progress.start()
        progress(0, "build")
        progress(0, "train-compiled")
        progress.close()
    shown = b""
    while True:  # what the terminal received, to its end (EIO once the writing side is closed)
        try:
            chunk = os.read(controller, 4096)
        except OSError:
            break
        if not chunk:
            break
        shown += chunk
    os.close(controller)
    assert shown.decode() == (
        "\r\x1b[Kneuroncompat check: starting (imports torch and transformers)"
        "\r\x1b[Kneuroncompat check: path/to/model: building the tiny model"
        "\r\x1b[Kneuroncompat check: path/to/model: stage train-compiled"
        "\r\x1b[K"
    )


def test_only_a_terminal_gets_it(tmp_path: Path) -> None:
    piped = subprocess.run([sys.executable, "-c", _ON_TERMINAL], capture_output=True, text=True, timeout=60)
    assert piped.stdout == "NoneType\n"
    _, stdout, _ = stderr_on_a_terminal([sys.executable, "-c", _ON_TERMINAL], tmp_path)
    assert stdout == b"StageProgress\n"


@pytest.mark.slow  # a whole check
def test_a_check_on_a_terminal_shows_each_stage(tmp_path: Path) -> None:
    import transformers

    transformers.LlamaConfig(architectures=["LlamaForCausalLM"]).save_pretrained(tmp_path)
    command = [sys.executable, "-m", "neuroncompat.cli", "check", "--format", "json", str(tmp_path)]
    status, stdout, terminal = stderr_on_a_terminal(command, tmp_path, timeout=600)
    assert status == 0, terminal
    assert [stage["status"] for stage in json.loads(stdout)["stages"]] == ["pass"] * 4
    shown = terminal.decode()
    steps = ["starting (imports torch and transformers)", f"{tmp_path}: building the tiny model"]
    steps += [f"{tmp_path}: stage {name}" for name in ("load", "generate", "train-eager", "train-compiled")]
    positions = [shown.index(f"\r\x1b[Kneuroncompat check: {step}") for step in steps]
    assert positions == sorted(positions)
    assert shown.endswith("\r\x1b[K")
