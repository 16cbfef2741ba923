"""How one rewrite reads in the formats that give each its own result (SARIF, GitHub annotations)."""

from __future__ import annotations

from migrate.report import where
from migrate.results import Rewrite
from migrate.rule_families import get_rule


def rewrite_message(rewrite: Rewrite, mode: str) -> str:
    """`would rewrite: <the rule's summary>`, then, for an unsafe rule, how the rewrite changes behaviour.

    A notebook's rewrite names its cell, since its line counts within the cell, not the JSON file."""
    rule = get_rule(rewrite.rule)
    verb = "rewrote" if mode == "write" else "would rewrite"
    place = f" ({where(rewrite)})" if rewrite.cell is not None else ""
    text = f"{verb}{place}: {rule.summary if rule else rewrite.rule}"
    if rule is not None and rule.safety == "unsafe":
        text += f" Unsafe, review it: {rule.safety_reason}."
    return text if mode == "write" else f"{text} Run neuron-migrate --write."
