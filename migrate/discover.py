"""Find the files to migrate under the given paths: recursion, default excludes, `.gitignore`.

A directory walk yields the suffixes in `SUFFIXES` (Python, notebooks, YAML, shell); which
YAML files are configs worth touching is decided from their keys by the YAML migrator, not here.

stdlib only. `.gitignore` support covers what repositories use in practice: blank lines and
comments, `!` negation, directory-only patterns (`build/`), anchored patterns (`/dist`,
`a/b`), `*`, `?`, `**`. Each directory's `.gitignore` applies below it. Symlinked directories
are followed once (a loop is cut by tracking real paths). The walk yields regular files only (a
FIFO, socket or device with a matching name is passed over: reading one would block or never
end); a file named on the command line is read whatever it is, so `<(...)` works.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

# suffix -> the kind of file `migrate.dispatch` hands it to
SUFFIXES = {
    ".py": "python",
    ".ipynb": "notebook",
    ".yaml": "yaml",
    ".yml": "yaml",
    ".sh": "shell",
    ".bash": "shell",
    ".slurm": "shell",
    ".sbatch": "shell",
}

DEFAULT_EXCLUDES = frozenset(
    {
        ".venv",
        "venv",
        "build",
        "dist",
        ".tox",
        "site-packages",
        ".git",
        "__pycache__",
        "node_modules",
        ".nox",
        ".mypy_cache",
        ".pytest_cache",
        ".eggs",
    }
)


@dataclass(frozen=True)
class _Pattern:
    regex: re.Pattern[str]
    negate: bool
    dir_only: bool
    anchored: bool


def _compile(line: str) -> _Pattern | None:
    line = line.rstrip("\n").rstrip()
    if not line or line.startswith("#"):
        return None
    negate = line.startswith("!")
    if negate:
        line = line[1:]
    dir_only = line.endswith("/")
    line = line.rstrip("/")
    anchored = "/" in line
    line = line.lstrip("/")
    parts = []
    for piece in re.split(r"(\*\*/|/\*\*|\*\*)", line):
        if piece == "**/":
            parts.append(r"(?:.*/)?")
        elif piece in ("/**", "**"):
            parts.append(r"(?:/.*)?" if piece == "/**" else r".*")
        else:
            parts.append(fnmatch.translate(piece)[4:-3].replace(".*", "[^/]*"))
    return _Pattern(re.compile("".join(parts) + r"\Z"), negate, dir_only, anchored)


class _Ignore:
    """The `.gitignore` rules of one directory."""

    def __init__(self, base: Path, patterns: list[_Pattern]) -> None:
        self.base = base
        self.patterns = patterns

    def decide(self, path: Path, is_dir: bool) -> bool | None:
        """True ignored, False re-included, None no opinion."""
        try:
            rel = path.relative_to(self.base).as_posix()
        except ValueError:
            return None
        result = None
        for p in self.patterns:
            if p.dir_only and not is_dir:
                continue
            target = rel if p.anchored else rel.rsplit("/", 1)[-1]
            if p.regex.match(target):
                result = not p.negate
        return result


def _load(directory: Path) -> _Ignore | None:
    try:
        text = (directory / ".gitignore").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    patterns = [p for p in map(_compile, text.splitlines()) if p is not None]
    return _Ignore(directory, patterns) if patterns else None


def _ignored(path: Path, is_dir: bool, stack: list[_Ignore]) -> bool:
    verdict = False
    for ignore in stack:
        decision = ignore.decide(path, is_dir)
        if decision is not None:
            verdict = decision
    return verdict


def source_files(paths: list[str], extra_excludes: frozenset[str] = frozenset()) -> Iterator[Path]:
    """Yield files to migrate, in a stable order. Explicit file arguments are always yielded."""
    excludes = DEFAULT_EXCLUDES | extra_excludes
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            yield from _walk(path, [], set(), excludes)
        else:
            yield path


def _walk(directory: Path, stack: list[_Ignore], seen: set[str], excludes: frozenset[str]) -> Iterator[Path]:
    real = os.path.realpath(directory)
    if real in seen:
        return
    seen.add(real)
    local = _load(directory)
    stack = [*stack, local] if local else stack
    try:
        entries = sorted(os.scandir(directory), key=lambda e: e.name)
    except OSError:
        return
    for entry in entries:
        path = Path(entry.path)
        try:
            is_dir = entry.is_dir()
        except OSError:
            continue
        if is_dir:
            if entry.name in excludes or _ignored(path, True, stack):
                continue
            yield from _walk(path, stack, seen, excludes)
        elif path.suffix.lower() in SUFFIXES and _regular(entry) and not _ignored(path, False, stack):
            yield path


def _regular(entry: os.DirEntry[str]) -> bool:
    """A regular file (or a link to one): a FIFO named `x.py` would block the read forever, a device too."""
    try:
        return entry.is_file()
    except OSError:
        return False
