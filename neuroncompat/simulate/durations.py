"""Durations as every dry-run report prints them (the text report, its verdict, the markdown comment)."""

from __future__ import annotations


def duration(seconds: float) -> str:
    """Seconds as the report prints them: ``45 s``, ``9 min``, ``2 h 05 min``."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    minutes = round(seconds / 60)
    return f"{minutes} min" if minutes < 90 else f"{minutes // 60} h {minutes % 60:02d} min"
