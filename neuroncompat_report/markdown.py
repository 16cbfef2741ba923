"""A finding as markdown, inline, the same in every command's markdown report.

`` `file:line`: **RULE** message ``: inline, so a report puts it in a list item or a table cell (`|` is escaped,
and a line break becomes a space, for the cell); the place is code so a path's underscores stay literal, and it
is left out where the finding names no file. `**unsafe**` follows the rule id where the fix can change behaviour.
"""

from __future__ import annotations

from neuroncompat_report.model import Finding
from neuroncompat_report.text import place


def code(text: str) -> str:
    """Inline code that survives backticks inside `text`."""
    return f"`{text}`" if "`" not in text else f"`` {text} ``"


def line(finding: Finding) -> str:
    """The finding inline, safe in a table cell."""
    where = place(finding)
    unsafe = " **unsafe**" if finding.fix is not None and finding.fix.safety == "unsafe" else ""
    text = f"{code(where) + ': ' if where else ''}**{finding.rule}**{unsafe} {finding.message}"
    return text.replace("|", "\\|").replace("\n", " ")
