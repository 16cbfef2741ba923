"""`[tool.neuron-migrate]` in the nearest pyproject.toml: defaults for the CLI options.

Keys mirror the options: `select`, `ignore`, `exclude` (lists of strings), `shim` (bool),
`jobs` (int), `format` (a `--format` name), `neuron-kernels` (a table: layer name -> Neuron kernel
repo `"org/repo:Layer"`, for NM212; `--neuron-kernel LAYER=REPO` entries are added to it). Options
given on the command line win.

A pyproject.toml that cannot hold the table is not parsed: most projects have one without it, and
`tomllib` is a noticeable part of a one-file run's start-up (a malformed file is then some other
tool's concern, not an error of this one). TOML can only spell the table with a `[tool]` header, a
`tool.neuron-migrate` dotted key or header (quotes and spaces allowed around the dot), or a top-level
`tool = {...}` inline table, each at the start of a line; `_MAY_HOLD_TABLE` looks for those, so a
`neuron-migrate = "migrate.cli:main"` script entry, a description or a comment mentioning the table does not count.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_MAY_HOLD_TABLE = re.compile(
    r"""^[ \t]*(?:\[\[?[ \t]*["']?tool["']?[ \t]*\]|(?:\[\[?[ \t]*)?["']?tool["']?[ \t]*\.[ \t]*["']?neuron-migrate|["']?tool["']?[ \t]*=)""",
    re.MULTILINE,
)

KEYS = {
    "select": list,
    "ignore": list,
    "exclude": list,
    "shim": bool,
    "jobs": int,
    "format": str,
    "neuron-kernels": dict,
}


@dataclass
class Config:
    values: dict[str, Any] = field(default_factory=dict)
    source: Path | None = None


class ConfigError(ValueError):
    """A malformed `[tool.neuron-migrate]` table (exit code 2)."""


def kernel_repo_problem(repo: object) -> str | None:
    """Why `repo` is no Neuron kernel repo as `KernelConfig` takes one (`"org/repo:Layer"`), or None."""
    if not isinstance(repo, str) or "/" not in repo or ":" not in repo or repo.endswith(":"):
        return f'expected "org/repo:LayerName" (a Hub kernel repo with a torch-neuron build), got {repo!r}'
    return None


def find_pyproject(start: Path) -> Path | None:
    """The nearest pyproject.toml at or above `start` (a file or directory)."""
    directory = start.resolve()
    if not directory.is_dir():
        directory = directory.parent
    for candidate in (directory, *directory.parents):
        path = candidate / "pyproject.toml"
        if path.is_file():
            return path
    return None


def load(start: Path) -> Config:
    path = find_pyproject(start)
    if path is None:
        return Config()
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: {exc}") from exc
    if not _MAY_HOLD_TABLE.search(text):
        return Config(source=path)
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # the light install runs on 3.10 too (docs/python.md)
        import tomli as tomllib

    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: {exc}") from exc
    table = data.get("tool", {}).get("neuron-migrate", {})
    for key, value in table.items():
        kind = KEYS.get(key)
        if kind is None:
            raise ConfigError(f"{path}: unknown key [tool.neuron-migrate].{key}")
        if not isinstance(value, kind) or (
            kind is list and isinstance(value, list) and not all(isinstance(v, str) for v in value)
        ):
            raise ConfigError(f"{path}: [tool.neuron-migrate].{key} must be {kind.__name__}")
        if isinstance(value, dict):
            for layer, repo in value.items():
                problem = kernel_repo_problem(repo)
                if problem:
                    raise ConfigError(f"{path}: [tool.neuron-migrate].{key}.{layer}: {problem}")
    return Config(values=table, source=path)
