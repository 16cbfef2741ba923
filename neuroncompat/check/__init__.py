"""``neuroncompat check MODEL``: will this architecture run on Trainium? A preflight in seconds, on a laptop.

TorchNeuron's launch measured that most text-generation architectures run out of the box but published
no list; a user finds out whether theirs does after renting a trn2 and waiting for compiles. This
command answers on the simulated device: it builds a tiny random model of MODEL's architecture
(:mod:`neuroncompat.check.tiny`: same class, layer kinds, attention variants and dtype, shrunk sizes)
and runs, in a fresh process with the shim (:mod:`neuroncompat.check.worker`), what a script does on
a trn2: load with ``device_map="neuron"``, greedy static-cache ``generate``, and a training step eager
and compiled with the ``neuron`` backend, each compared with the same weights on the CPU. Each stage
reports pass/fail with its first error at the model's source line, the graphs it compiled, the dry
run's findings (graph breaks with Dynamo's reason, data-dependent shapes, CPU fallbacks, complex/fp64
on the device) and the shim patches that acted.

MODEL is a local directory holding ``config.json``, a ``config.json`` itself, or a hub id whose config is
in the local cache (no download: ``HF_HUB_OFFLINE=1`` is set for the run). :func:`check_many` checks several
models in one worker process, one after the other: most of a check's time is the process's start (imports,
Dynamo's first compile), which the later models then skip (``bench/bench_architectures.py`` and the CI subset
test use it). ``--tensor-parallel`` adds the 2-rank stage (``DistributedConfig(tp_size=2)``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from neuroncompat.check.worker_env import worker_environment

TIMEOUT_S = 600
# the JSON report's schema (``check --format json``): neuroncompat/check/report.schema.json, shipped in the package
SCHEMA = "neuroncompat.check/1"


class CheckError(Exception):
    """MODEL cannot be checked (a timeout, the worker died; or bad input, below): the message says why."""


class CheckInputError(CheckError):
    """MODEL is not something to check: no config, a config that is not JSON, or one transformers cannot read.
    The user's to fix (``check`` exits 2), not a failure of the model or of the tool."""


def config_file(model: str) -> Path:
    """MODEL's ``config.json``: the path itself, a directory's, or the cached hub snapshot's."""
    path = Path(model)
    if path.is_file():
        return _readable(path)
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise CheckInputError(f"{model}: no config.json in this directory")
        return _readable(path / "config.json")
    try:
        from huggingface_hub import hf_hub_download

        return Path(hf_hub_download(model, "config.json", local_files_only=True))
    except Exception as exc:  # not a local path, not in the cache
        raise CheckInputError(
            f"{model}: not a directory, not a config.json and not in the local hub cache ({type(exc).__name__}); "
            "pass a directory or config.json, or download the config first"
        ) from exc


def _readable(config: Path) -> Path:
    """``config`` if it holds a JSON object; otherwise the error names the file, line and cause, here rather than
    as a traceback from the worker (which would only start torch to find the same)."""
    try:
        values = json.loads(config.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise CheckInputError(f"{config}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    except json.JSONDecodeError as exc:
        raise CheckInputError(f"{config}:{exc.lineno}:{exc.colno}: not valid JSON: {exc.msg}") from exc
    except OSError as exc:
        raise CheckInputError(f"{config}: cannot read: {exc.strerror or exc}") from exc
    if not isinstance(values, dict):
        raise CheckInputError(f"{config}:1: a model config is a JSON object, not {type(values).__name__}")
    return config


def check(
    model: str,
    timeout: float = TIMEOUT_S,
    tensor_parallel: bool = False,
    progress: Callable[[int, str], None] | None = None,
) -> dict[str, Any]:
    """Run the stages on MODEL's architecture; the worker's result plus ``model`` and ``exit_code``.

    ``tensor_parallel`` adds the 2-rank stage (``DistributedConfig(tp_size=2)`` under ``torchrun``): two more
    processes, about 8 s on 2 cores, so it is asked for rather than run by default."""
    result = check_many([model], timeout, tensor_parallel, progress)[0]
    if isinstance(result, CheckError):
        raise result
    return result


def _run_worker(
    command: list[str], scratch: str, timeout: float, pass_fds: tuple[int, ...] = ()
) -> subprocess.CompletedProcess[str]:
    """Run the worker to its end; on a timeout or Ctrl-C it is killed and reaped before the error goes on.

    ``subprocess.run`` leaves a worker it killed on Ctrl-C unreaped (it waits a quarter of a second), so an
    interrupted ``check`` could exit while its worker still held memory and the scratch directory.
    """
    with subprocess.Popen(
        command,
        env=worker_environment(os.environ),
        cwd=scratch,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        pass_fds=pass_fds,  # the progress relay's pipe (check/progress.py), when there is one
    ) as worker:
        try:
            stdout, stderr = worker.communicate(timeout=timeout)
        except BaseException:
            worker.kill()
            worker.wait()
            raise
    return subprocess.CompletedProcess(command, worker.returncode, stdout, stderr)


def check_many(
    models: list[str],
    timeout: float = TIMEOUT_S,
    tensor_parallel: bool = False,
    progress: Callable[[int, str], None] | None = None,
) -> list[dict[str, Any] | CheckError]:
    """:func:`check` each of ``models`` in one worker process, in turn; a model that cannot be checked gets its
    :class:`CheckError` in its place. ``timeout`` is for them all; each result's ``seconds`` is its own time.
    ``progress`` is called with a model's index and its step as the worker starts each (``check/progress.py``)."""
    configs = [config_file(model) for model in models]
    with tempfile.TemporaryDirectory(prefix="neuroncompat-check-") as scratch:
        outs = [Path(scratch) / f"result-{n}.json" for n in range(len(models))]
        command = [
            sys.executable,
            "-m",
            "neuroncompat.check.worker",
            *(["--tensor-parallel"] if tensor_parallel else []),
        ]
        for config, out in zip(configs, outs):
            command += [str(config.resolve()), str(out)]
        relay = _Relay(progress) if progress is not None else None
        if relay is not None:
            command[3:3] = ["--progress-fd", str(relay.write_fd)]
        try:
            # `python -m` puts its working directory first on sys.path: the empty scratch directory, so a
            # user's concurrent.py or torch.py beside the model cannot shadow what the worker imports.
            done = _run_worker(command, scratch, timeout, () if relay is None else (relay.write_fd,))
        except subprocess.TimeoutExpired as exc:
            if len(models) == 1:
                raise CheckError(f"{models[0]}: the check took more than {timeout:.0f} s") from exc
            raise CheckError(f"{', '.join(models)}: the checks took more than {timeout:.0f} s") from exc
        finally:
            if relay is not None:
                relay.close()
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-15:])
        results: list[dict[str, Any] | CheckError] = []
        for model, out in zip(models, outs):
            if not out.is_file():
                results.append(
                    CheckError(f"{model}: the check process exited with {done.returncode} before any result:\n{tail}")
                )
                continue
            result: dict[str, Any] = json.loads(out.read_text())
            if "input_error" in result:
                results.append(CheckInputError(f"{model}: {result['input_error']}"))
                continue
            if "error" in result:
                results.append(CheckError(f"{model}: the check stopped before any result:\n{result['error']}"))
                continue
            result = {"schema": SCHEMA, "model": model, **result}
            # a stage skipped for want of anything to check (no tensor-parallel plan) fails nothing; one skipped
            # because the model did not load comes after the load's failure
            result["exit_code"] = 0 if all(s["status"] in ("pass", "skipped") for s in result["stages"]) else 1
            results.append(result)
    return results


class _Relay:
    """A pipe the worker writes ``MODEL_INDEX STEP`` lines to, read by a thread that calls ``progress``.

    The worker inherits the write end (``pass_fds``); ours is closed once the worker has ended, so the
    thread reads to the end of the pipe and stops.
    """

    def __init__(self, progress: Callable[[int, str], None]) -> None:
        read_fd, self.write_fd = os.pipe()
        self._thread = threading.Thread(target=self._read, args=(read_fd, progress), daemon=True)
        self._thread.start()

    @staticmethod
    def _read(read_fd: int, progress: Callable[[int, str], None]) -> None:
        with os.fdopen(read_fd) as lines:
            for line in lines:
                index, _, step = line.strip().partition(" ")
                progress(int(index), step)

    def close(self) -> None:
        os.close(self.write_fd)
        self._thread.join()
