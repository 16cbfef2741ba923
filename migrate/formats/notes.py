"""A TODO or a note of neuron-migrate's results as the shared report model's finding.

Its own module, apart from `migrate.formats.findings`, so the text format can list TODOs and notes without
importing what the SARIF and JSON formats need (the installed version, through `importlib.metadata`).
"""

from __future__ import annotations

from migrate.report import where
from migrate.results import Finding as Note
from neuroncompat_report.model import Finding, Severity

TOOL = "neuron-migrate"


def note(severity: Severity, path: str, item: Note) -> Finding:
    """A TODO (`warning`) or a note (`note`) of the file at `path` as the model's finding.

    A notebook's has no line (cell lines are not lines of the JSON file): its region names the cell and line."""
    if item.cell is None:
        return Finding(TOOL, item.rule, severity, path, item.line, item.message)
    return Finding(TOOL, item.rule, severity, path, None, item.message, region=where(item))
