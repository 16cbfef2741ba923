"""`--format sarif`: SARIF 2.1.0 for code scanning (e.g. github/codeql-action/upload-sarif).

Results: each TODO (`warning`), each rewrite under its own rule id at the line of its statement
(`error` under `--check`, else `note`; a notebook's in the cell the message names, a config file's at its
line), each parse error (`error`) and each note (`note`), rendered by the renderer every command shares
(`neuroncompat_report.sarif`) from `migrate.formats.findings`. Fix safety rides in property bags: each
registered rule and each of its results carry `safety` (and `safetyReason` when unsafe), and an unsafe
rewrite's message says how it changes behaviour.
"""

from __future__ import annotations

from migrate.formats.findings import run
from migrate.results import FileResult
from neuroncompat_report import sarif


def render(results: list[FileResult], mode: str) -> str:
    return sarif.render(run(results, mode))
