"""What a hostile tree does to a run: files edited while it runs, deep nesting, dying workers, FIFOs, stale temp files.

Every test runs the real CLI in a real process (or the real writer on real files); the
concurrency is real too, synchronised through a FIFO rather than by timing.
"""

from __future__ import annotations

import errno
import multiprocessing
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from migrate.writer import STALE_AFTER_S, ChangedOnDisk, digest, write_atomic

CUDA = b"import torch\nx = torch.zeros(1).cuda()\n"
MIGRATED_LINE = b'x = torch.zeros(1).to("neuron")\n'
TIMEOUT = 60


def cli(*args: str, cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "migrate", *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(proc: subprocess.Popen[str]) -> tuple[int, str]:
    """The exit status and stderr of `proc`, killed if it outlives TIMEOUT."""
    try:
        _, err = proc.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise
    return proc.returncode, err


def open_fifo_for_writing(fifo: Path, proc: subprocess.Popen[Any]) -> int:
    """Open `fifo` once `proc` has opened it for reading (ENXIO until then); fails if `proc` ends first."""
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        try:
            return os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as exc:
            if exc.errno != errno.ENXIO:
                raise
        assert proc.poll() is None, f"the run ended before reading the FIFO: {proc.communicate()}"
        time.sleep(0.01)
    proc.kill()
    raise AssertionError("the run never opened the FIFO")


# -- 1. an edit made during a --write run is never overwritten


def test_the_writer_refuses_bytes_other_than_those_migrated(tmp_path: Path):
    script = tmp_path / "train.py"
    script.write_bytes(CUDA)
    read = script.read_bytes()
    script.write_bytes(CUDA + b"# the user's autosave\n")
    with pytest.raises(ChangedOnDisk):
        write_atomic(script, b"migrated\n", expected=digest(read))
    assert script.read_bytes() == CUDA + b"# the user's autosave\n"
    assert os.listdir(tmp_path) == ["train.py"]  # no temp file left
    script.unlink()
    with pytest.raises(ChangedOnDisk):
        write_atomic(script, b"migrated\n", expected=digest(read))
    assert os.listdir(tmp_path) == []  # a deleted file is not brought back


@pytest.mark.parametrize("edit", ["edited", "deleted"])
def test_a_file_edited_or_deleted_while_the_run_reads_others_is_skipped_and_named(tmp_path: Path, edit: str):
    """`a.py` is read and migrated; the run then blocks reading `gate.py` (a FIFO) while this test
    edits or deletes `a.py`, and only then lets the run go on to write."""
    (tmp_path / "a.py").write_bytes(CUDA)
    (tmp_path / "b.py").write_bytes(CUDA)
    os.mkfifo(tmp_path / "gate.py")
    proc = cli("--write", "-j", "1", "a.py", "gate.py", "b.py", cwd=tmp_path)
    fd = open_fifo_for_writing(tmp_path / "gate.py", proc)  # the run has read a.py and waits here
    if edit == "edited":
        (tmp_path / "a.py").write_bytes(CUDA + b"print('saved by the editor')\n")
    else:
        (tmp_path / "a.py").unlink()
    os.write(fd, b"x = 1\n")
    os.close(fd)
    code, err = finish(proc)
    assert code == 2, err
    assert "skipped: a.py: changed during the run, not written" in err
    if edit == "edited":
        assert (tmp_path / "a.py").read_bytes() == CUDA + b"print('saved by the editor')\n"
    else:
        assert not (tmp_path / "a.py").exists()
    assert MIGRATED_LINE in (tmp_path / "b.py").read_bytes()  # the rest of the run is written
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["b.py", "gate.py"] + ["a.py"] * (edit == "edited"))


# -- 2. nesting deeper than Python's parser accepts; a worker that dies


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_file_nested_2000_deep_is_skipped_with_its_line_and_the_run_goes_on(tmp_path: Path, jobs: str):
    tree = tmp_path / "src"
    tree.mkdir()
    for i in range(4):
        (tree / f"good{i}.py").write_bytes(CUDA)
    (tree / "deep.py").write_bytes(CUDA + b"y = " + b"(" * 2000 + b"1" + b")" * 2000 + b"\n")
    code, err = finish(cli("--write", "-j", jobs, "src", cwd=tmp_path))
    assert code == 2, err
    assert "error: src/deep.py:3: nested too deeply for Python's parser (too many nested parentheses)" in err
    assert "5 files scanned, 4 changed" in err
    for i in range(4):
        assert MIGRATED_LINE in (tree / f"good{i}.py").read_bytes()
    assert (tree / "deep.py").read_bytes().startswith(CUDA)


@pytest.mark.skipif(multiprocessing.get_start_method() != "fork", reason="the crash is planted in a forked worker")
def test_a_worker_killed_by_a_segfault_names_its_file_and_the_others_finish(tmp_path: Path):
    """A real SIGSEGV in the worker holding `crash.py` (planted in the runner's call, not in libcst)."""
    tree = tmp_path / "src"
    tree.mkdir()
    for i in range(10):
        (tree / f"good{i}.py").write_bytes(CUDA)
    (tree / "crash.py").write_bytes(CUDA)
    code = (
        "import os, signal, sys\n"
        "import migrate.runner as runner\n"
        "real = runner.migrate_file\n"
        "def crashing(data, path, options):\n"
        "    if path.endswith('crash.py'):\n"
        "        os.kill(os.getpid(), signal.SIGSEGV)\n"
        "    return real(data, path, options)\n"
        "runner.migrate_file = crashing\n"
        "from migrate.cli import main\n"
        "main(['--write', '-j', '2', 'src'])\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.returncode == 2, proc.stderr
    assert "error: src/crash.py: the process migrating this file died (killed by SIGSEGV)" in proc.stderr
    assert "Traceback" not in proc.stderr and "11 files scanned, 10 changed" in proc.stderr
    assert all(MIGRATED_LINE in (tree / f"good{i}.py").read_bytes() for i in range(10))
    assert (tree / "crash.py").read_bytes() == CUDA


# -- 3. a FIFO in the tree


def test_a_fifo_named_like_a_script_does_not_block_the_walk(tmp_path: Path):
    (tmp_path / "train.py").write_bytes(CUDA)
    os.mkfifo(tmp_path / "x.py")  # nobody ever writes to it: reading it would block forever
    code, err = finish(cli("--check", ".", cwd=tmp_path))
    assert code == 1, err
    assert "1 file scanned, 1 would change" in err and "x.py" not in err


# -- 6. temp files of an interrupted write


def dead_pid() -> int:
    """The pid of a process that has exited (and been reaped)."""
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(proc.stdout)


def test_temp_files_of_a_killed_write_are_removed_by_the_next_run_that_writes_there(tmp_path: Path):
    (tmp_path / "train.py").write_bytes(CUDA)
    orphan = tmp_path / f".train.py.{dead_pid()}.k3x9q2za.neuron-migrate"  # its writer died
    live = tmp_path / f".train.py.{os.getpid()}.a1b2c3d4.neuron-migrate"  # a concurrent run mid-write
    old_style = tmp_path / ".train.py.zz81kq_0.neuron-migrate"  # no pid in the name
    fresh_old_style = tmp_path / ".train.py.qq11kk_0.neuron-migrate"
    for temp in (orphan, live, old_style, fresh_old_style):
        temp.write_bytes(b"import torch\nx = torch.zer")  # what a SIGKILL mid-write leaves
    long_ago = time.time() - STALE_AFTER_S - 60
    os.utime(old_style, (long_ago, long_ago))
    code, err = finish(cli("--check", ".", cwd=tmp_path))
    assert code == 1 and orphan.exists(), "a run that writes nothing touches nothing"
    code, err = finish(cli("--write", ".", cwd=tmp_path))
    assert code == 0, err
    assert not orphan.exists() and not old_style.exists()
    assert live.exists() and fresh_old_style.exists()  # a writer that may still be running keeps its file
    assert MIGRATED_LINE in (tmp_path / "train.py").read_bytes()


def test_a_write_killed_with_sigkill_leaves_a_temp_file_the_next_run_removes(tmp_path: Path):
    """A real SIGKILL: the writer is stopped between writing its temp file and the swap."""
    (tmp_path / "train.py").write_bytes(CUDA)
    os.mkfifo(tmp_path / "gate")
    code = (
        "import os, sys\n"
        "from pathlib import Path\n"
        "import migrate.writer as writer\n"
        "real = writer._unchanged_or_raise\n"
        "def blocked(*args):\n"
        "    open('gate', 'rb').read()\n"  # the test kills the process while it waits here
        "    return real(*args)\n"
        "writer._unchanged_or_raise = blocked\n"
        "data = Path('train.py').read_bytes()\n"
        "writer.write_atomic(Path('train.py'), b'half', expected=writer.digest(data))\n"
    )
    writer_proc = subprocess.Popen([sys.executable, "-c", code], cwd=tmp_path)
    try:
        fd = open_fifo_for_writing(tmp_path / "gate", writer_proc)
        writer_proc.kill()
        writer_proc.wait(timeout=TIMEOUT)
        os.close(fd)
    finally:
        if writer_proc.poll() is None:
            writer_proc.kill()
            writer_proc.wait()
    left = [p.name for p in tmp_path.iterdir() if p.name.endswith(".neuron-migrate")]
    assert len(left) == 1 and left[0].startswith(f".train.py.{writer_proc.pid}.")
    assert (tmp_path / "train.py").read_bytes() == CUDA  # the kill never truncated the script
    (tmp_path / "gate").unlink()
    code_, err = finish(cli("--write", ".", cwd=tmp_path))
    assert code_ == 0, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train.py"]
