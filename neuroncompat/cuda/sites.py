"""The migration log: every redirected call site once, with the rule that would make it permanent.

Each entry is a user-code location (``file:line``), the CUDA call made there, what it became on
Neuron, the ``neuron-migrate`` rule id that rewrites it in the source (None where no rule
does), and how many times it ran. At exit the log is written as JSON to
``$NEURONCOMPAT_CUDA_LOG/rank<RANK>-<pid>.json`` (default directory:
``<tmp>/neuroncompat-cuda-redirect``) and a summary goes to stderr on rank 0, ending with the
``neuron-migrate`` command that rewrites the files. ``neuroncompat simulate`` sets the directory
and puts the entries in its report.

Schema (``"schema": "neuroncompat.cuda_redirect/1"``)::

    {"schema": str, "rank": int, "pid": int, "argv": [str],
     "sites": [{"file": str, "line": int, "call": str, "became": str, "rule": str | null,
                "calls": int}]}
"""

from __future__ import annotations

import atexit
import json
import multiprocessing
import os
import sys
import tempfile
import threading
from dataclasses import asdict, dataclass
from pathlib import Path
from types import FrameType

from neuroncompat import environment
from neuroncompat.cuda.callers import user_frame

LOG_ENV = "NEURONCOMPAT_CUDA_LOG"
SCHEMA = "neuroncompat.cuda_redirect/1"
_SUMMARY_ROWS = 20


@dataclass
class Site:
    file: str
    line: int
    call: str
    became: str
    rule: str | None
    calls: int = 0


_lock = threading.Lock()
_sites: dict[tuple[str, int, str], Site] = {}
_exit_registered = False


def display(filename: str) -> str:
    """A path relative to the working directory when it lies below it."""
    if filename.startswith("<"):
        return filename
    cwd = os.getcwd()
    path = os.path.abspath(filename)
    return os.path.relpath(path, cwd) if path.startswith(cwd + os.sep) else path


def record(frame: FrameType | None, call: str, became: str, rule: str | None) -> None:
    """Log ``call`` -> ``became`` at the innermost user line at or above ``frame``."""
    at = user_frame(frame) or frame
    if at is None:
        return
    key = (at.f_code.co_filename, at.f_lineno, call)
    with _lock:
        site = _sites.get(key)
        if site is None:
            site = _sites[key] = Site(display(key[0]), key[1], call, became, rule)
        site.calls += 1


def entries() -> list[Site]:
    """The sites logged so far, in file and line order."""
    with _lock:
        return sorted(_sites.values(), key=lambda s: (s.file, s.line, s.call))


def clear() -> None:
    with _lock:
        _sites.clear()


def log_directory() -> Path:
    return Path(environment.path(LOG_ENV) or Path(tempfile.gettempdir()) / "neuroncompat-cuda-redirect")


def snapshot() -> dict:
    return {
        "schema": SCHEMA,
        "rank": int(os.environ.get("RANK", "0")),
        "pid": os.getpid(),
        "argv": list(sys.argv),
        "sites": [asdict(site) for site in entries()],
    }


def write(directory: str | Path | None = None) -> Path:
    """Write this process's log as JSON; returns its path."""
    data = snapshot()
    folder = Path(directory) if directory is not None else log_directory()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"rank{data['rank']}-{data['pid']}.json"
    partial = path.with_suffix(".tmp")
    partial.write_text(json.dumps(data, indent=1))
    os.replace(partial, path)
    return path


def migrate_command(sites: list[Site]) -> str | None:
    """The ``neuron-migrate`` command that rewrites the logged files with the logged rules."""
    rules = sorted({s.rule for s in sites if s.rule})
    files = sorted({s.file for s in sites if not s.file.startswith("<")})
    if not rules or not files:
        return None
    return f"neuron-migrate --select {','.join(rules)} --write {' '.join(files)}"


def summary(sites: list[Site], path: Path | None) -> str:
    """What the exit summary prints: one line per site (bounded) and the permanent fix."""
    files = {s.file for s in sites}
    where = f" (log: {path})" if path is not None else ""
    lines = [f"neuroncompat: CUDA redirect ran {len(sites)} CUDA call site(s) in {len(files)} file(s) on Neuron{where}"]
    for site in sites[:_SUMMARY_ROWS]:
        rule = f"  [{site.rule}]" if site.rule else ""
        lines.append(f"  {site.file}:{site.line}  {site.call} -> {site.became}{rule}")
    if len(sites) > _SUMMARY_ROWS:
        lines.append(f"  ... {len(sites) - _SUMMARY_ROWS} more in the log")
    command = migrate_command(sites)
    if command:
        lines.append(f"  make it permanent: {command}")
    return "\n".join(lines)


def write_at_exit() -> None:
    """Register (once) the exit handler that writes the log and prints the summary on rank 0."""
    global _exit_registered
    if _exit_registered:
        return
    _exit_registered = True
    pid = os.getpid()

    def at_exit() -> None:
        sites = entries()
        if os.getpid() != pid or not sites:
            return
        try:
            path: Path | None = write()
        except OSError as exc:
            print(f"neuroncompat: could not write the CUDA redirect log: {exc}", file=sys.stderr)
            path = None
        # Under `neuroncompat simulate` the report shows the merged log instead; a multiprocessing
        # child (mp.spawn worker) writes its log and leaves the summary to the process that started it.
        if (
            os.environ.get("RANK", "0") == "0"
            and not environment.path("NEURONCOMPAT_SIMULATE_RECORD")
            and multiprocessing.parent_process() is None
        ):
            print(summary(sites, path), file=sys.stderr)

    atexit.register(at_exit)
