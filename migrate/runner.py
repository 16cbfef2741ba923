"""Run the migrators over many files: read, migrate (optionally in worker processes), write.

One bad file never stops the run: read errors, parse errors and internal errors become
per-file results; the CLI turns them into exit code 2.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from migrate.dispatch import migrate_file
from migrate.engine import FileResult, Options
from migrate.writer import write_atomic


def _migrate_path(args: tuple[str, Options]) -> FileResult:
    path, options = args
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        return FileResult(path, "error", error=f"{path}: cannot read: {exc.strerror or exc}")
    try:
        return migrate_file(data, path, options)
    except RecursionError:
        return FileResult(path, "error", error=f"{path}: too deeply nested for the parser; skipped")
    except Exception as exc:  # noqa: BLE001  (report and keep going; it's our bug)
        return FileResult(
            path, "internal-error", error=f"{path}: internal error: {type(exc).__name__}: {exc}; please report"
        )


def run(paths: Iterable[Path], options: Options, jobs: int, write: bool) -> list[FileResult]:
    """Migrate every path; with `write`, apply changes. Results come back in input order."""
    work = [(str(p), options) for p in paths]
    if jobs > 1 and len(work) > 1:
        with ProcessPoolExecutor(max_workers=min(jobs, len(work))) as pool:
            results = list(pool.map(_migrate_path, work, chunksize=max(1, len(work) // (jobs * 4))))
    else:
        results = [_migrate_path(w) for w in work]
    if write:
        for result in results:
            if result.new is not None:
                try:
                    write_atomic(Path(result.path), result.new)
                except OSError as exc:
                    result.status = "error"
                    result.error = f"{result.path}: cannot write: {exc}"
    return results


def default_jobs() -> int:
    return os.cpu_count() or 1
