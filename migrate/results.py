"""What migrating one file produces: the records every file kind's migrator returns and every format reads.

They live apart from `migrate.engine` (the libcst pipeline) so the config-file migrators and the report
formats can name a result without importing the parser and every rule: results sit below both.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import NamedTuple

from migrate.markers import TODO_PREFIX

_TODO_LINE = re.compile(r"#\s*TODO\(neuron-migrate (NM\d+)\):\s*(.*)")


class Finding(NamedTuple):
    """A TODO comment or a report-only note: rule id, text, and where (when known).

    `line` is 1-based in the file; in a notebook it counts within the code cell `cell`
    (1-based over all cells, as Jupyter shows them).
    """

    rule: str
    message: str
    line: int | None = None
    cell: int | None = None


class Rewrite(NamedTuple):
    """One rewrite a rule made: its rule id and the line of the statement it is in, in the file as it was read.

    `line` is None where the rule acted on the file as a whole (the module-level passes) or where the file kind
    does not locate its rewrites; the reports then place it at the file's first change.
    """

    rule: str
    line: int | None = None
    cell: int | None = None


class TextChange(NamedTuple):
    """Old and new text of one file, or of one notebook cell, for the diff."""

    old: str
    new: str
    cell: int | None = None


@dataclass
class FileResult:
    """The outcome for one file. `new` is None when nothing changes or on error."""

    path: str
    status: str  # "unchanged", "changed", "skipped", "error", "internal-error"
    new: bytes | None = None
    hits: Counter[str] = field(default_factory=Counter)
    rewrites: list[Rewrite] = field(default_factory=list)  # the hits one by one, where located, in line order
    todos: list[Finding] = field(default_factory=list)
    warnings: list[Finding] = field(default_factory=list)
    error: str | None = None
    error_line: int | None = None
    changes: list[TextChange] = field(default_factory=list)
    kind: str = "python"  # "python", "notebook", "yaml", "shell"
    # why a "skipped" file was not migrated (binary, undecodable, not a kind neuron-migrate knows);
    # None for a `# neuron-migrate: skip-file` comment
    skip_reason: str | None = None

    @property
    def changed(self) -> bool:
        return self.new is not None


def find_todos(text: str, cell: int | None = None) -> list[Finding]:
    """Every `# TODO(neuron-migrate NMxxx): ...` comment in `text`, with its line."""
    if TODO_PREFIX.strip() not in text:
        return []
    found = []
    for number, line in enumerate(text.splitlines(), start=1):
        match = _TODO_LINE.search(line)
        if match:
            found.append(Finding(match.group(1), match.group(2), number, cell))
    return found
