"""Where a finding is, from the `path:line (function)` locations the dry run records (`check` and `simulate`).

The recorder writes each location as one string, the path shortened for reading (relative to site-packages or
the working directory), the line, and the function; a `Finding` holds the file and the line apart, so the
renderers can place it (a SARIF region, a GitHub annotation's `line`, `file:line` in text).
"""

from __future__ import annotations

import re

_LOCATION = re.compile(r"^(?P<path>[^<].*?):(?P<line>\d+)(?: \(.*\))?$")


def split_location(location: str | None) -> tuple[str, int] | None:
    """``(path, line)`` of a ``path:line (function)`` location; None for ``<unknown>``, None and the like."""
    match = _LOCATION.match(location or "")
    return (match["path"], int(match["line"])) if match else None
