"""Span edits and TODO comments for the line-oriented migrators (YAML, shell, notebook magics).

These files are rewritten by splicing: a rule names an exact character span and its
replacement, or asks for a TODO comment above a line. Everything else stays byte-identical
(indentation, quoting, comments, blank lines, line endings), which a load-and-dump round trip
of YAML or a re-rendered shell script cannot promise. Callers re-parse the result before
accepting it.

`# neuron-migrate: skip` on a line (or on a comment line right above it) drops the edits and
TODOs anchored on that line, as it does for Python statements; `skip[NM810]` drops only those
of the listed rules (ids or prefixes).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from migrate.markers import SKIP_MARKER, TODO_PREFIX, Skip, find_skip
from migrate.registry import Selection
from migrate.results import Finding, Rewrite

_TAG = re.compile(r"#\s*TODO\(neuron-migrate (NM\d+)\)")


@dataclass(frozen=True)
class _Edit:
    rule: str
    start: int
    end: int
    text: str
    anchor: int  # the site: its line's skip marker drops the edit; one hit per rule and site


@dataclass
class Changes:
    """What the rules want done to one text; `apply` produces the new text."""

    text: str
    selection: Selection
    edits: list[_Edit] = field(default_factory=list)
    todos: list[tuple[int, str, str]] = field(default_factory=list)  # (offset, rule, message)
    remarks: list[tuple[int, Finding]] = field(default_factory=list)  # (anchor, note)
    hits: Counter[str] = field(default_factory=Counter)
    rewrites: list[Rewrite] = field(default_factory=list)  # each rewrite `apply` made, at its line

    def enabled(self, rule: str) -> bool:
        return self.selection.enabled(rule)

    def replace(self, rule: str, start: int, end: int, text: str, anchor: int | None = None) -> None:
        """Replace `self.text[start:end]` with `text` (an insertion when start == end)."""
        if text != self.text[start:end]:
            self.edits.append(_Edit(rule, start, end, text, start if anchor is None else anchor))

    def todo(self, rule: str, offset: int, message: str) -> None:
        """A `# TODO(neuron-migrate RULE): message` line above the line holding `offset`."""
        if self.enabled(rule) and (offset, rule, message) not in self.todos:
            self.todos.append((offset, rule, message))

    def note(self, rule: str, offset: int, message: str, anchor: int | None = None) -> None:
        """A report-only remark about the line holding `offset`, dropped with the edits of its `anchor`'s line."""
        self.remarks.append((offset if anchor is None else anchor, Finding(rule, message, self.line_of(offset))))

    @property
    def notes(self) -> list[Finding]:
        """The remarks whose site no skip marker covers."""
        skips = self._skips()
        return [note for anchor, note in self.remarks if not _off(skips, self.line_of(anchor), note.rule)]

    def untouched(self, start: int, end: int) -> bool:
        """Whether no edit so far changes `text[start:end]`, so a rule may rewrite that span whole."""
        return all(edit.end <= start or edit.start >= end for edit in self.edits)

    def line_of(self, offset: int) -> int:
        return self.text.count("\n", 0, offset) + 1

    def line_start(self, offset: int) -> int:
        return self.text.rfind("\n", 0, offset) + 1

    def line_end(self, offset: int) -> int:
        """The offset of the line break ending the line holding `offset` (or the text's end)."""
        end = self.text.find("\n", offset)
        end = len(self.text) if end == -1 else end
        return end - 1 if end > 0 and self.text[end - 1] == "\r" else end

    def apply(self) -> str:
        """The new text: edits spliced in, TODO lines inserted once per line and rule."""
        skips = self._skips()
        newline = "\r\n" if "\r\n" in self.text else "\n"
        pieces: list[_Edit] = []
        done: set[tuple[int, str, str]] = set()
        for offset, rule, message in self.todos:
            start = self.line_start(offset)
            if (
                _off(skips, self.line_of(start), rule)
                or (start, rule, message) in done
                or rule in self._tags_above(start)
            ):
                continue
            done.add((start, rule, message))
            blanks = re.match(r"[ \t]*", self.text[start:])
            assert blanks is not None  # `*`: the empty match at worst
            indent = blanks.group(0)
            pieces.append(_Edit(rule, start, start, f"{indent}{TODO_PREFIX}{rule}): {message}{newline}", start))
        sites = set()
        for edit in self.edits:
            if not _off(skips, self.line_of(edit.anchor), edit.rule):
                pieces.append(edit)
                sites.add((edit.rule, edit.anchor))
        self.hits.update(rule for rule, _ in sites)
        self.rewrites = sorted(Rewrite(rule, self.line_of(anchor)) for rule, anchor in sites)
        pieces.sort(key=lambda e: (e.start, e.end))
        out, position = [], 0
        for edit in pieces:
            if edit.start < position:
                raise AssertionError(f"overlapping edits at offset {edit.start} ({edit.rule})")
            out.append(self.text[position : edit.start])
            out.append(edit.text)
            position = edit.end
        out.append(self.text[position:])
        return "".join(out)

    def _tags_above(self, start: int) -> set[str]:
        """TODO tags in the block of comment lines directly above the line at `start`."""
        tags = set()
        lines = self.text[:start].splitlines()
        for line in reversed(lines):
            if not line.lstrip().startswith("#"):
                break
            match = _TAG.search(line)
            if match:
                tags.add(match.group(1))
        return tags

    def _skips(self) -> dict[int, Skip]:
        """Line number -> what is skipped there: the line's own marker and a comment line's above it."""
        if SKIP_MARKER not in self.text:
            return {}
        skips: dict[int, Skip] = {}
        for number, line in enumerate(self.text.splitlines(), start=1):
            skip = find_skip(line)
            if skip is not None:
                comment = line.lstrip().startswith("#") and not line.startswith("#SBATCH")  # a directive is a line
                for target in (number, number + 1) if comment else (number,):
                    skips[target] = _merge(skips.get(target), skip)
        return skips


def _merge(a: Skip | None, b: Skip) -> Skip:
    """Both skips at once: everything when either is, else the listed rules of both."""
    if a is None or b.everything:
        return b
    return a if a.everything else Skip(a.prefixes + b.prefixes)


def _off(skips: dict[int, Skip], line: int, rule: str) -> bool:
    """Whether a skip marker switches `rule` off on `line`."""
    skip = skips.get(line)
    return skip is not None and skip.covers(rule)
