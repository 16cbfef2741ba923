"""Build an expensive test input once per pytest run, not once per xdist worker.

A session fixture runs in every worker: under ``pytest -n 2`` the memorised tiny Llama of ``run_workdir`` was
trained twice (about 38 CPU-s each on the 2-core CI machine), for identical files. The first worker to ask builds
it in the run's shared temporary folder, under a lock the other waits on; each worker then gets its own copy, so a
test that writes beside the model (outputs, probes) still writes where no other worker does, as before.
"""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

DONE = ".built"


def built_once(tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], object]) -> Path:
    """A fresh copy, for this worker, of what ``build(folder)`` writes into an empty ``folder``; built once per run.

    Under xdist every worker's base temp is a child of the run's (``.../pytest-N/popen-gw0``), so the parent is
    the one folder the workers share; without xdist the build goes in the session's own base temp. A build that
    raised leaves no ``DONE`` mark, so the next worker builds again (and fails the same way, with its traceback).
    """
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    built = shared / f"built-once-{name}"
    with open(shared / f"built-once-{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (built / DONE).exists():
            shutil.rmtree(built, ignore_errors=True)
            built.mkdir()
            build(built)
            (built / DONE).touch()
    copy = tmp_path_factory.mktemp(name)
    shutil.copytree(built, copy, dirs_exist_ok=True, ignore=shutil.ignore_patterns(DONE))
    return copy
