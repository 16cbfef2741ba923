"""Write a migrated file atomically, keeping its permission bits.

The new bytes already carry the original encoding, BOM and line endings (the engine works on
bytes). A temp file in the same directory plus `os.replace` means a crash never leaves a
half-written script; the temp file gets the original mode before the swap.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path


def write_atomic(path: Path, data: bytes) -> None:
    """Replace `path` with `data`; raises OSError (e.g. read-only) without touching the file."""
    target = Path(os.path.realpath(path))  # write through a symlink, keep the link
    mode = stat.S_IMODE(os.stat(target).st_mode)
    # A read-only file is the user saying "don't change this" (root would bypass the bits).
    if not mode & stat.S_IWUSR or not os.access(target, os.W_OK):
        raise PermissionError(f"{path}: file is not writable (read-only); left unchanged")
    directory = target.parent
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".neuron-migrate", dir=directory)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
