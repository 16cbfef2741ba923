"""``[tool.neuroncompat.simulate]`` in the project's pyproject.toml: defaults for ``neuroncompat simulate``.

So a CI job and a developer's run judge the same way without repeating options::

    [tool.neuroncompat.simulate]
    strict = ["graph_break", "data_dependent", "rejected"]   # or true: every kind but int64_on_device
    max-shapes = 8
    graph-cost = 90
    cpu-fallback-ops = ["aten::foo"]   # your torch-neuronx release's CPU_FALLBACK operators

The nearest pyproject.toml at or above the working directory is read. Options given on the
command line win over it (``--no-strict`` turns a configured ``strict`` off). A malformed table is
an error naming the file, the line and the key, before anything runs.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # the light install runs on 3.10 too (docs/python.md)
    import tomli as tomllib

from neuroncompat.simulate.kinds import STRICT_DEFAULT, STRICT_KINDS

TABLE = "tool.neuroncompat.simulate"
_KEYS = ("strict", "max-shapes", "graph-cost", "cpu-fallback-ops")


class SettingsError(ValueError):
    """A malformed ``[tool.neuroncompat.simulate]`` table."""


@dataclass(frozen=True)
class Settings:
    """The table's values (None where it does not set one) and the file they came from."""

    strict: tuple[str, ...] | None = None
    max_shapes: int | None = None
    graph_cost: float | None = None
    cpu_fallback_ops: tuple[str, ...] = ()
    source: Path | None = field(default=None)


def find_pyproject(start: Path) -> Path | None:
    """The nearest pyproject.toml at or above the directory ``start``."""
    directory = start.resolve()
    for candidate in (directory, *directory.parents):
        path = candidate / "pyproject.toml"
        if path.is_file():
            return path
    return None


def _line_of(text: str, key: str) -> int | None:
    """The line of ``key = ...`` inside the table (for the error message)."""
    in_table = False
    for number, line in enumerate(text.splitlines(), 1):
        header = re.match(r"\s*\[([^\]]+)\]", line)
        if header:
            in_table = header.group(1).strip() == TABLE
        elif in_table and re.match(rf"\s*{re.escape(key)}\s*=", line):
            return number
    return None


def _error(path: Path, text: str, key: str, cause: str) -> SettingsError:
    line = _line_of(text, key)
    return SettingsError(f"{path}{f':{line}' if line else ''}: [{TABLE}] {key}: {cause}")


def _strict(value: Any) -> tuple[str, ...] | str:
    """The strict kinds, or the reason the value is not valid."""
    if value is True:
        return STRICT_DEFAULT
    if value is False:
        return ()
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        unknown = [v for v in value if v not in STRICT_KINDS]
        if unknown:
            return f"unknown kind(s) {', '.join(unknown)}; expected some of {', '.join(STRICT_KINDS)}"
        return tuple(value)
    return f"expected true, false or a list of kinds ({', '.join(STRICT_KINDS)})"


def load(start: Path) -> Settings:
    """The settings of the project at ``start`` (all unset when it has no pyproject.toml or table)."""
    path = find_pyproject(start)
    if path is None:
        return Settings()
    try:
        text = path.read_text(encoding="utf-8")
        data = tomllib.loads(text)
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise SettingsError(f"{path}: {exc}") from exc
    table = data.get("tool", {}).get("neuroncompat", {}).get("simulate")
    if table is None:
        return Settings(source=path)
    for key in table:
        if key not in _KEYS:
            raise _error(path, text, key, f"unknown key; expected one of {', '.join(_KEYS)}")
    strict: tuple[str, ...] | None = None
    if "strict" in table:
        parsed = _strict(table["strict"])
        if isinstance(parsed, str):
            raise _error(path, text, "strict", parsed)
        strict = parsed
    max_shapes = table.get("max-shapes")
    if max_shapes is not None and (not isinstance(max_shapes, int) or isinstance(max_shapes, bool) or max_shapes < 1):
        raise _error(path, text, "max-shapes", "expected an integer >= 1")
    graph_cost = table.get("graph-cost")
    number = isinstance(graph_cost, (int, float)) and not isinstance(graph_cost, bool)
    if graph_cost is not None and (not number or graph_cost < 0):
        raise _error(path, text, "graph-cost", "expected a number of seconds >= 0")
    ops = table.get("cpu-fallback-ops", [])
    if not isinstance(ops, list) or not all(isinstance(op, str) and op.startswith("aten::") for op in ops):
        raise _error(path, text, "cpu-fallback-ops", 'expected a list of ATen operator names ("aten::name")')
    return Settings(
        strict=strict,
        max_shapes=max_shapes,
        graph_cost=None if graph_cost is None else float(graph_cost),
        cpu_fallback_ops=tuple(ops),
        source=path,
    )


def cpu_fallback_ops_error(configured: Settings, cause: str) -> SettingsError:
    """An error in ``configured``'s ``cpu-fallback-ops`` found after loading (an operator torch lacks)."""
    path = configured.source
    if path is None:
        return SettingsError(f"[{TABLE}] cpu-fallback-ops: {cause}")
    return _error(path, path.read_text(encoding="utf-8"), "cpu-fallback-ops", cause)


def strict_kinds(flag: bool | None, chosen: tuple[str, ...], configured: Settings) -> tuple[str, ...]:
    """The kinds to fail on: ``--strict-kind``s when given; else every kind for ``--strict`` (or the
    table's kinds when it lists some); nothing for ``--no-strict``; the table's setting otherwise."""
    if chosen:
        return chosen
    if flag is True:
        return configured.strict or STRICT_DEFAULT
    if flag is False:
        return ()
    return configured.strict or ()
