"""The exit statuses `neuron-migrate`, `neuroncompat simulate` and `neuroncompat check` share: per command, bad
input (2, the cause in the chosen format: JSON gets an object with an `error` field), a failure (1: a stage
failed, or the command could not finish, which JSON gets as the same error object) and an
interruption (130, never 1: CI reads 1 from `--check` as "would change").

Each command runs as a user runs it, in a process of its own. An interruption is sent once the command is
inside its work, known from the command itself, never from a sleep: `neuron-migrate` has opened the named file
(a FIFO, which this test holds open), the `check` worker has started (it writes to a FIFO this test reads).
`simulate`'s own interruption, forwarded to the script's process group, is tested in `tests/test_simulate_job.py`.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ERROR_SCHEMA = json.loads((ROOT / "docs" / "error.schema.json").read_text())
DEADLINE_S = 300  # a loaded 2-core machine can take a minute to start a torch process


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NEURONCOMPAT_")}
    env.update(HF_HUB_OFFLINE="1", **extra)
    return env


def _run(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), cwd=cwd, env=_env(), capture_output=True, text=True, timeout=DEADLINE_S)


def _error(stdout: str, tool: str, exit_code: int = 2) -> str:
    """The JSON error document on stdout, validated against docs/error.schema.json; its message."""
    jsonschema = pytest.importorskip("jsonschema")
    document = json.loads(stdout)
    jsonschema.Draft202012Validator(ERROR_SCHEMA).validate(document)
    assert document["tool"] == tool and document["exit_code"] == exit_code
    return document["error"]


MIGRATE = (sys.executable, "-m", "migrate")
NEURONCOMPAT = (sys.executable, "-m", "neuroncompat.cli")


# ---- neuron-migrate ----------------------------------------------------------------------------------------------


def test_migrate_bad_options_exit_2_with_the_cause_in_json(tmp_path: Path) -> None:
    done = _run(*MIGRATE, "--format", "json", "--write", "--check", "train.py", cwd=tmp_path)
    assert done.returncode == 2
    assert _error(done.stdout, "neuron-migrate") == "--write and --check are exclusive"
    assert "neuron-migrate: --write and --check are exclusive" in done.stderr


def test_migrate_a_broken_config_exits_2_naming_the_file(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.neuron-migrate]\nselect = [\n")
    (tmp_path / "train.py").write_text("x = 1\n")
    done = _run(*MIGRATE, "--format=json", "train.py", cwd=tmp_path)
    assert done.returncode == 2
    assert "pyproject.toml" in _error(done.stdout, "neuron-migrate")


def test_migrate_usage_errors_of_click_itself_exit_2_in_sarif(tmp_path: Path) -> None:
    done = _run(*MIGRATE, "--format", "sarif", "--jobs", "0", "train.py", cwd=tmp_path)
    assert done.returncode == 2
    invocation = json.loads(done.stdout)["runs"][0]["invocations"][0]
    assert invocation["executionSuccessful"] is False and invocation["exitCode"] == 2
    assert "'--jobs'" in invocation["toolExecutionNotifications"][0]["message"]["text"]


def test_migrate_check_exits_1_when_a_file_would_change_and_0_when_not(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text('import torch\nx = torch.zeros(2).to("cuda")\n')
    (tmp_path / "done.py").write_text("x = 1\n")
    assert _run(*MIGRATE, "--check", "train.py", cwd=tmp_path).returncode == 1
    assert _run(*MIGRATE, "--check", "done.py", cwd=tmp_path).returncode == 0


def _ctrl_c_as_at_a_terminal() -> None:
    """SIGINT back to its default in the command under test. A suite started in the background by a shell without
    job control (`cmd &` in a script, as CI and ci-local may start it) inherits SIGINT ignored, and a Python started
    so never turns Ctrl-C into KeyboardInterrupt: the command would not see the test's interrupt at all."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_an_interrupted_migrate_check_exits_130_not_1(tmp_path: Path) -> None:
    """The named file is a FIFO: neuron-migrate blocks reading it, and the test knows it is there when its own
    open of the FIFO's other end returns. Interrupted there, `--check` has found nothing: 130."""
    fifo = tmp_path / "train.py"
    os.mkfifo(fifo)
    process = subprocess.Popen(
        [*MIGRATE, "--check", "--format", "json", str(fifo)],
        cwd=tmp_path,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_ctrl_c_as_at_a_terminal,
    )
    writer: list[int] = []
    opening = threading.Thread(target=lambda: writer.append(os.open(fifo, os.O_WRONLY)), daemon=True)
    try:
        opening.start()
        opening.join(DEADLINE_S)
        assert writer, f"neuron-migrate never opened the file: {process.communicate(timeout=DEADLINE_S)}"
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=DEADLINE_S)
        assert process.returncode == 130, err
        assert "neuron-migrate: interrupted" in err and out == ""
    finally:
        process.kill()
        process.communicate()
        if not writer:  # release the thread still waiting for a reader
            os.close(os.open(fifo, os.O_RDONLY | os.O_NONBLOCK))
        for fd in writer:
            os.close(fd)


# ---- neuroncompat check ------------------------------------------------------------------------------------------


def test_check_a_config_that_is_not_json_exits_2_naming_file_and_line(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text('{"model_type": "llama",\n  "hidden_size": }\n')
    done = _run(*NEURONCOMPAT, "check", "--format", "json", str(tmp_path), cwd=tmp_path)
    assert done.returncode == 2
    message = _error(done.stdout, "neuroncompat check")
    assert message.startswith(f"{tmp_path / 'config.json'}:2:18: not valid JSON")
    assert "Traceback" not in done.stderr


def test_check_a_missing_model_exits_2_in_markdown_and_text(tmp_path: Path) -> None:
    done = _run(*NEURONCOMPAT, "check", "--format", "markdown", str(tmp_path / "nowhere"), cwd=tmp_path)
    assert done.returncode == 2 and done.stdout.startswith("**neuroncompat check: error.**")
    assert "not a directory, not a config.json" in done.stdout
    done = _run(*NEURONCOMPAT, "check", str(tmp_path), cwd=tmp_path)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == f"neuroncompat check: {tmp_path}: no config.json in this directory\n"


DYING_WORKER = """
import os, sys
if "neuroncompat.check.worker" in sys.orig_argv:  # the worker only, not the check command that starts it
    sys.stderr.write("the worker ran out of memory\\n")
    os._exit(3)
"""


def test_check_whose_worker_dies_exits_1_with_an_error_document_not_an_empty_report(tmp_path: Path) -> None:
    """The worker dies at its start (a sitecustomize on PYTHONPATH, which the worker's environment keeps): the
    check could not finish, so 1, and `--format json` gets the error document with the worker's status and its
    last words, not an empty stdout. The command runs in this process (the worker is the process that matters)."""
    from click.testing import CliRunner

    from neuroncompat.cli import main

    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(DYING_WORKER)
    (tmp_path / "config.json").write_text('{"model_type": "llama"}\n')
    pythonpath = os.pathsep.join(filter(None, [str(tmp_path / "site"), os.environ.get("PYTHONPATH")]))
    done = CliRunner().invoke(main, ["check", "--format", "json", str(tmp_path)], env={"PYTHONPATH": pythonpath})
    assert done.exit_code == 1, done.output
    message = _error(done.stdout, "neuroncompat check", exit_code=1)
    assert message == f"{tmp_path}: the check process exited with 3 before any result:\nthe worker ran out of memory"
    assert done.stderr == f"neuroncompat check: {message}\n"


@pytest.mark.slow  # the worker starts torch and transformers to find the model type unknown
def test_check_a_config_transformers_cannot_read_exits_2_without_a_traceback(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text('{"model_type": "no-such-model"}\n')
    done = _run(*NEURONCOMPAT, "check", "--format", "json", str(tmp_path), cwd=tmp_path)
    assert done.returncode == 2
    message = _error(done.stdout, "neuroncompat check")
    assert "transformers cannot read config.json: ValueError:" in message and "`no-such-model`" in message
    assert "Traceback" not in done.stdout + done.stderr


@pytest.mark.slow  # one worker run: Reformer's default config builds no causal LM, on the CPU too
def test_check_a_model_that_fails_a_stage_exits_1_with_its_report(tmp_path: Path) -> None:
    transformers = pytest.importorskip("transformers")
    transformers.ReformerConfig(architectures=["ReformerModelWithLMHead"]).save_pretrained(tmp_path)
    done = _run(*NEURONCOMPAT, "check", "--format", "json", str(tmp_path), cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    assert report["exit_code"] == 1 and report["stages"][0]["status"] == "cpu-fails"


SITECUSTOMIZE = """
import os, sys
if "neuroncompat.check.worker" in sys.orig_argv:  # the worker only, not the check command that starts it
    with open(os.environ["EXIT_CODES_READY"], "w") as ready:
        ready.write(str(os.getpid()))
"""


@pytest.mark.slow  # starts the check's worker, which begins importing torch before it is stopped
def test_an_interrupted_check_exits_130_and_stops_its_worker(tmp_path: Path) -> None:
    """The worker says it started by writing its pid to a FIFO (a sitecustomize on PYTHONPATH, which the worker's
    environment keeps); the interruption comes after that, while the worker has not finished."""
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(SITECUSTOMIZE)
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text('{"model_type": "llama"}\n')
    fifo = tmp_path / "ready"
    os.mkfifo(fifo)
    ready = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # never blocks; select waits for the worker's write
    pythonpath = os.pathsep.join(filter(None, [str(tmp_path / "site"), os.environ.get("PYTHONPATH")]))
    process = subprocess.Popen(
        [*NEURONCOMPAT, "check", "--format", "json", str(tmp_path / "model")],
        cwd=tmp_path,
        env=_env(EXIT_CODES_READY=str(fifo), PYTHONPATH=pythonpath),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_ctrl_c_as_at_a_terminal,
    )
    try:
        readable, _, _ = select.select([ready], [], [], DEADLINE_S)
        assert readable, "the check worker never started"
        worker = int(os.read(ready, 32))
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=DEADLINE_S)
        assert process.returncode == 130, err
        assert "neuroncompat check: interrupted" in err and out == ""
        with pytest.raises(ProcessLookupError):  # killed and reaped by the check command before it exited
            os.kill(worker, 0)
    finally:
        os.close(ready)
        process.kill()
        process.communicate()


# ---- neuroncompat simulate ---------------------------------------------------------------------------------------


def test_simulate_an_unsupported_command_exits_2_with_the_cause_in_json(tmp_path: Path) -> None:
    done = _run(*NEURONCOMPAT, "simulate", "--format", "json", "--", "make", "train", cwd=tmp_path)
    assert done.returncode == 2
    assert "expected python, torchrun or accelerate launch" in _error(done.stdout, "neuroncompat simulate")


def test_simulate_a_broken_setting_exits_2_naming_the_file(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.neuroncompat.simulate]\nmax-shapes = "many"\n')
    done = _run(*NEURONCOMPAT, "simulate", "--format", "json", "--", "python", "train.py", cwd=tmp_path)
    assert done.returncode == 2
    assert "pyproject.toml" in _error(done.stdout, "neuroncompat simulate")


def test_simulate_a_script_that_fails_exits_1(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("raise SystemExit('the data is missing')\n")
    done = _run(*NEURONCOMPAT, "simulate", "--format", "json", "python", "train.py", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    assert report["exit_code"] == 1 and report["simulate_exit_code"] == 1
