"""Write a migrated file atomically, keeping its permission bits, and only over the bytes that were migrated.

The new bytes already carry the original encoding, BOM and line endings (the engine works on
bytes). A temp file in the same directory plus `os.replace` means a crash never leaves a
half-written script; the temp file gets the original mode before the swap.

A run reads every file long before it writes (a 300-file tree is migrated for tens of seconds
first), so an editor's autosave or a `git checkout` in between must not be overwritten:
`write_atomic` re-reads the file right before `os.replace` and raises `ChangedOnDisk` when its
bytes are not the ones that were migrated (edited, replaced, renamed away or deleted). The
compare and the swap are microseconds apart; nothing short of a lock every editor honours closes
that last gap.

Temp files are named `.<name>.<pid>.<random>.neuron-migrate`. One left by a run that was killed
mid-write (SIGKILL, a power cut) is removed by `remove_stale_temps`, which the runner calls once
per folder it writes in. A concurrent run's temp file lives only between its `mkstemp` and its
`os.replace` (milliseconds), so one is removed only when the pid in its name is not a live process
on this machine, or when it is older than `STALE_AFTER_S` (a name from an older version, with no
pid, or a pid now reused): a live run is never robbed of its temp file by a run beside it, and
should a run in another pid namespace lose one, its `os.replace` fails and that file is reported
unwritten, never truncated.
"""

from __future__ import annotations

import hashlib
import os
import stat
import tempfile
import time
from pathlib import Path

SUFFIX = ".neuron-migrate"
STALE_AFTER_S = 3600.0


class ChangedOnDisk(Exception):
    """The file no longer holds the bytes that were migrated; it was left as it is now."""


def digest(data: bytes) -> bytes:
    """What `write_atomic` compares the file on disk against (the bytes read before migrating)."""
    return hashlib.sha256(data).digest()


def write_atomic(path: Path, data: bytes, expected: bytes | None = None) -> None:
    """Replace `path` with `data`; raises OSError (e.g. read-only) without touching the file.

    With `expected` (the `digest` of the bytes that were read and migrated), raises `ChangedOnDisk`
    instead of writing when the file now holds other bytes or is gone.
    """
    target = Path(os.path.realpath(path))  # write through a symlink, keep the link
    try:
        info = os.stat(target)
    except FileNotFoundError:
        if expected is None:
            raise
        raise ChangedOnDisk(f"{path}: deleted or renamed during the run") from None
    if not stat.S_ISREG(info.st_mode):
        raise OSError(f"{path}: not a regular file; left unchanged")
    mode = stat.S_IMODE(info.st_mode)
    # A read-only file is the user saying "don't change this" (root would bypass the bits).
    if not mode & stat.S_IWUSR or not os.access(target, os.W_OK):
        raise PermissionError(f"{path}: file is not writable (read-only); left unchanged")
    directory = target.parent
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.{os.getpid()}.", suffix=SUFFIX, dir=directory)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        if expected is not None:
            _unchanged_or_raise(path, target, expected)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _unchanged_or_raise(path: Path, target: Path, expected: bytes) -> None:
    """The last look before the swap: the file must still hold exactly the bytes that were migrated."""
    try:
        current = target.read_bytes()
    except FileNotFoundError:
        raise ChangedOnDisk(f"{path}: deleted or renamed during the run") from None
    if digest(current) != expected:
        raise ChangedOnDisk(f"{path}: changed during the run")


def remove_stale_temps(directory: Path, now: float | None = None) -> list[Path]:
    """Remove the temp files interrupted writes left in `directory`; returns what was removed.

    Only regular files named as `write_atomic` names them, and of those only the ones whose writer
    is gone (the module docstring says why that is safe beside a concurrent run).
    """
    removed: list[Path] = []
    now = time.time() if now is None else now
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return removed
    for entry in entries:
        if not (entry.name.startswith(".") and entry.name.endswith(SUFFIX)):
            continue
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if not stat.S_ISREG(info.st_mode):
            continue
        parts = entry.name.rsplit(".", 3)  # ['.<name>', '<pid>', '<random>', 'neuron-migrate']
        pid = int(parts[1]) if len(parts) == 4 and parts[1].isdigit() else None
        if (pid is not None and not _alive(pid)) or now - info.st_mtime > STALE_AFTER_S:
            try:
                os.unlink(entry.path)
            except OSError:
                continue
            removed.append(Path(entry.path))
    return removed


def _alive(pid: int) -> bool:
    """Whether `pid` is a process on this machine (one we may not signal still counts)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OverflowError:
        return False
    return True
