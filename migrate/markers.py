"""The comment markers the codemod reads and writes, shared by every file kind's migrator.

`# neuron-migrate: skip` leaves a statement (a line of a config or launcher) alone: every rule.
`# neuron-migrate: skip[NM305]`, `skip[NM305,NM2]` switch off only the listed rules there, by id
or id prefix as `--ignore` takes them, so the other rules still rewrite the same statement.
`find_skip` is the one parser of both forms; the Python transformer, the line-oriented
migrators and the legacy families' module-level passes all ask it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

SKIP_MARKER = "neuron-migrate: skip"  # on a statement: leave it alone (all rules, or the listed ones)
SKIP_FILE = re.compile(rb"#\s*neuron-migrate:\s*skip-file")  # anywhere: leave the file alone
TODO_PREFIX = "# TODO(neuron-migrate "  # what every TODO the codemod writes starts with
RULE_SKIP_MARKER = SKIP_MARKER + "["  # the start of a per-rule skip, `skip[NM305,NM2]`

_SKIP = re.compile(re.escape(SKIP_MARKER) + r"(?:\[([^\]\n]*)\])?")
_TODO_LINES = re.compile(r"^[ \t]*" + re.escape(TODO_PREFIX) + r".*\n?", re.M)


def without_todos(text: str) -> str:
    """`text` without the TODO comment lines neuron-migrate wrote, for reading facts about the file.

    A TODO's words are the codemod's, not the script's: one that says `device_map="neuron"` or
    `torchrun` must not make the next run decide differently (the output would not be a fixed point).
    """
    return _TODO_LINES.sub("", text) if TODO_PREFIX in text else text


@dataclass(frozen=True)
class Skip:
    """What the skip markers in one comment (or line) switch off."""

    prefixes: tuple[str, ...] = ()  # rule ids or id prefixes, upper-case; empty: every rule

    @property
    def everything(self) -> bool:
        return not self.prefixes

    def covers(self, rule_id: str) -> bool:
        """Whether the rule `rule_id` is switched off here."""
        return not self.prefixes or rule_id.startswith(self.prefixes)

    def touches(self, family: str) -> bool:
        """Whether any rule of the id prefix `family` (e.g. `NM5`) may be switched off here."""
        return not self.prefixes or any(p.startswith(family) or family.startswith(p) for p in self.prefixes)


def find_skip(text: str) -> Skip | None:
    """The skip in `text` (a comment, a line, a statement's source), or None when it has no marker.

    A plain marker anywhere wins over listed ids; `skip[]` lists nothing and so skips everything.
    """
    if SKIP_MARKER not in text:
        return None
    prefixes: list[str] = []
    for match in _SKIP.finditer(text):
        listed = match.group(1)
        if listed is None:
            return Skip()
        prefixes.extend(p.strip().upper() for p in listed.split(",") if p.strip())
    return Skip(tuple(prefixes))
