"""`--format github`: GitHub Actions workflow commands, which become annotations on the PR diff.

`::error` for files that fail to parse and, under `--check`, for each rewrite, at the line of its
statement with its rule id in the title (`(unsafe)` where it can change behaviour); `::warning` for each
TODO; `::notice` for notes and for the rewrites outside `--check`. A notebook finding carries no `line`: its
lines count within a cell, not within the JSON file. Rendered by the renderer every command shares
(`neuroncompat_report.github`) from `migrate.formats.findings`.
"""

from __future__ import annotations

from migrate.formats.findings import run
from migrate.results import FileResult
from neuroncompat_report import github


def render(results: list[FileResult], mode: str) -> str:
    migration = run(results, mode)
    return github.render(migration.findings, migration.rules)
