"""`neuron-migrate -`: a Python script on stdin, the migrated script on stdout, as `ruff` and `black` do.

Editors and shell pipelines hand a buffer over stdin and replace it with stdout, so stdout carries
the source alone (unchanged when nothing applies) and everything else goes to stderr: an error as
`-:LINE:COL: ...` (exit 2, nothing on stdout), and the TODOs and notes the migration leaves. With
`--check`, stdout stays empty and the exit status says whether the script needs migrating (1) or not (0).
"""

from __future__ import annotations

import sys

from migrate.engine import Options, migrate_source

NAME = "-"  # how messages name the script, as ruff names stdin


def run(options: Options, check: bool) -> int:
    """Migrate stdin to stdout (or only judge it, with `check`); the exit status."""
    data = sys.stdin.buffer.read()
    result = migrate_source(data, NAME, options)
    if result.error:
        print(f"neuron-migrate: {result.error}", file=sys.stderr)
        return 2
    for finding in result.warnings:
        print(f"neuron-migrate: {NAME}: {finding.rule}: {finding.message}", file=sys.stderr)
    changed = result.status == "changed"
    if check:
        return 1 if changed else 0
    sys.stdout.buffer.write(result.new if changed and result.new is not None else data)
    sys.stdout.buffer.flush()
    return 0
