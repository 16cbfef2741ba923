"""The records of `neuron-migrate --format json`, from which `docs/migrate.schema.json` is generated.

The schema file is `neuroncompat_report.schema`'s rendering of `MigrateReport`; `tests/test_report_schemas.py`
fails when the two differ, so a field added to the report is added here and the file regenerated, never edited by
hand: `python -m neuroncompat_report.schema . migrate.formats.json_types:PUBLISHED`. Within schema_version 1
fields are only added, never removed or changed in meaning. Only the generator and the tests import this module.
"""

from __future__ import annotations

import sys
from typing import Annotated, Literal

from neuroncompat_report.schema import Field, Published

if sys.version_info >= (3, 11):
    from typing import NotRequired, TypedDict
else:  # typing's TypedDict knows NotRequired from 3.11
    from typing_extensions import NotRequired, TypedDict

RULE = "^NM[0-9]{3}$"
RuleId = Annotated[str, Field(pattern="^(NM[0-9]{3}|parse-error)$")]
Safety = Annotated[
    Literal["safe", "unsafe", None],
    Field(
        "Fix safety, as in ruff: safe keeps what the script does; unsafe changes behaviour (numerics, data, memory, "
        "shapes). Null for parse-error."
    ),
]
SafetyReason = Annotated[str | None, Field("One line: how an unsafe rule changes behaviour; null when safe.")]
Rewrites = Annotated[
    dict[str, Annotated[int, Field(minimum=1)]],
    Field("Rewrite count per rule id (one per rewritten site), keys in id order.", key_pattern=RULE),
]
Count = Annotated[int, Field(minimum=0)]


class Tool(TypedDict):
    name: Literal["neuron-migrate"]
    version: Annotated[str, Field("The installed neuroncompat distribution's version.")]


class Summary(TypedDict):
    files: Annotated[int, Field("Files scanned.", minimum=0)]
    changed: Annotated[int, Field("Files that would change (or changed, in write mode).", minimum=0)]
    unchanged: Count
    skipped: Annotated[
        int,
        Field(
            "Files with a `# neuron-migrate: skip-file` comment, and files that cannot be migrated (binary, "
            "undecodable, or of a kind neuron-migrate does not handle: see each file's skip_reason).",
            minimum=0,
        ),
    ]
    errors: Annotated[int, Field("Files that could not be read, parsed or migrated.", minimum=0)]
    todos: Annotated[int, Field("TODO comments needing manual work, over all files.", minimum=0)]
    rewrites: Rewrites


class Finding(TypedDict):
    """A TODO or a warning in one file."""

    rule: RuleId
    message: str
    line: Annotated[
        int | None, Field("1-based; within the cell for notebooks; null when the finding has no line.", minimum=1)
    ]
    cell: Annotated[int | None, Field("Notebooks: 1-based cell number over all cells; null otherwise.", minimum=1)]
    safety: NotRequired[Safety]
    safety_reason: NotRequired[SafetyReason]


class File(TypedDict):
    """One file of the run."""

    path: Annotated[str, Field("Relative to the working directory when inside it, '/'-separated.")]
    kind: Literal["python", "notebook", "yaml", "shell"]
    status: Literal["unchanged", "changed", "skipped", "error", "internal-error"]
    written: Annotated[bool, Field("True when this run wrote the file (write mode and status changed).")]
    rewrites: Rewrites
    todos: Annotated[list[Finding], Field("TODO(neuron-migrate NMxxx) comments in the (migrated) file.")]
    warnings: Annotated[
        list[Finding],
        Field("Report-only notes, e.g. a removed neuron_parallel_compile prefix or a notebook cell left unparsed."),
    ]
    error: Annotated[str | None, Field("`path:line[:col]: what went wrong`; the file was left unchanged.")]
    error_line: Annotated[int | None, Field(minimum=1)]
    skip_reason: NotRequired[
        Annotated[
            str | None,
            Field(
                "Why a skipped file was not migrated (binary, not decodable in its encoding, not a kind "
                "neuron-migrate handles); null for a `# neuron-migrate: skip-file` comment. Added in 0.1.0, optional."
            ),
        ]
    ]
    diff: Annotated[
        str,
        Field(
            "Unified diff (a/ and b/ prefixes) when status is changed, else empty. Notebook hunks compare cell "
            "sources and end their @@ line with `cell N`."
        ),
    ]


class RuleSafety(TypedDict):
    safety: Safety
    safety_reason: SafetyReason


class MigrateReport(TypedDict):
    """One document per run. Files are sorted by path; findings keep file order. Within schema_version 1 fields are
    only added, never removed or changed in meaning."""

    schema_version: Literal[1]
    tool: Tool
    mode: Annotated[
        Literal["diff", "check", "write"],
        Field(
            "diff: nothing written (the default); check: nothing written, exit 1 when a file would change; write: "
            "changes applied."
        ),
    ]
    summary: Summary
    files: list[File]
    rules: NotRequired[
        Annotated[
            dict[str, RuleSafety],
            Field(
                "Added in schema_version 1 (compatible): the fix safety of every registered rule that this report's "
                "rewrites, TODOs or warnings name, keys in id order.",
                key_pattern=RULE,
            ),
        ]
    ]


PUBLISHED = Published(
    MigrateReport,
    "docs/migrate.schema.json",
    "https://neuroncompat.invalid/schemas/neuron-migrate-report-1.json",
    "neuron-migrate --format json report, schema_version 1",
)
