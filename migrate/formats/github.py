"""`--format github`: GitHub Actions workflow commands, which become annotations on the PR diff.

`::error` for files that fail to parse and, under `--check`, for each rewrite, at the line of its
statement with its rule id in the title (`(unsafe)` where it can change behaviour); `::warning` for each
TODO; `::notice` for notes and for the rewrites outside `--check`.
Values are escaped as the Actions toolkit does (`%`, CR, LF; plus `:` and `,` in properties).
A notebook finding carries no `line`: its lines count within a cell, not within the JSON file.
"""

from __future__ import annotations

from migrate.formats.rewrites import rewrite_message
from migrate.report import display_path, ordered, rewrites_of, unsafe, where
from migrate.results import FileResult, Finding
from migrate.rule_families import get_rule


def _data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _property(text: str) -> str:
    return _data(text).replace(":", "%3A").replace(",", "%2C")


def _command(level: str, path: str, line: int | None, title: str, message: str) -> str:
    props = [f"file={_property(path)}"]
    if line is not None:
        props.append(f"line={line}")
    props.append(f"title={_property(title)}")
    return f"::{level} {','.join(props)}::{_data(message)}\n"


def _finding(level: str, result: FileResult, finding: Finding) -> str:
    rule = get_rule(finding.rule)
    title = f"{finding.rule} {rule.name}" if rule else finding.rule
    message = finding.message if finding.cell is None else f"{where(finding)}: {finding.message}"
    return _command(level, display_path(result.path), finding.line if finding.cell is None else None, title, message)


def render(results: list[FileResult], mode: str) -> str:
    out = []
    for r in ordered(results):
        path = display_path(r.path)
        if r.error:
            out.append(_command("error", path, r.error_line, f"neuron-migrate {r.status}", r.error))
        for rewrite in rewrites_of(r):
            rule = get_rule(rewrite.rule)
            title = f"{rewrite.rule} {rule.name}" if rule else rewrite.rule
            out.append(
                _command(
                    "error" if mode == "check" else "notice",
                    path,
                    rewrite.line if rewrite.cell is None else None,
                    title + (" (unsafe)" if unsafe(rewrite.rule) else ""),
                    rewrite_message(rewrite, mode),
                )
            )
        out.extend(_finding("warning", r, todo) for todo in r.todos)
        out.extend(_finding("notice", r, note) for note in r.warnings)
    return "".join(out)
