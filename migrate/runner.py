"""Run the migrators over many files: read, migrate (optionally in worker processes), write.

One bad file never stops the run: read errors, parse errors and internal errors become
per-file results; the CLI turns them into exit code 2. Nor does a worker process that dies
(a native parser crashing on a file no check foresaw): the pool breaks, the files it had
finished are kept, the rest go on in a new pool, and the file that kills its process is found
and named (`_in_pool`).

With `write`, a file is written only if it still holds the bytes that were migrated
(`migrate.writer.write_atomic`); one edited, replaced or deleted during the run is skipped with
`NOT_WRITTEN` as its reason, and the CLI exits 2.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from migrate.dispatch import migrate_file
from migrate.options import Options
from migrate.results import FileResult

if TYPE_CHECKING:  # the pool and the writer are imported where used: one file checked needs neither
    import multiprocessing.connection
    from concurrent.futures import Future

NOT_WRITTEN = "changed during the run, not written"
_CHUNK_MAX = 32  # files a worker task holds at most

# (the result, the digest of the bytes it was migrated from; None when nothing was read or nothing will be written)
_Outcome = tuple[FileResult, bytes | None]
# (path, options, whether the run writes: only then is the digest of a changed file needed)
_Work = tuple[str, Options, bool]


def _migrate_path(args: _Work) -> _Outcome:
    path, options, write = args
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        return FileResult(path, "error", error=f"{path}: cannot read: {exc.strerror or exc}"), None
    try:
        result = migrate_file(data, path, options)
        if result.new is None or not write:  # nothing to write: no digest (nor hashlib to compute one)
            return result, None
        from migrate.writer import digest

        return result, digest(data)
    except RecursionError:
        return FileResult(path, "error", error=f"{path}: too deeply nested for the parser; skipped"), None
    except Exception as exc:  # noqa: BLE001  (report and keep going; it's our bug)
        return FileResult(
            path, "internal-error", error=f"{path}: internal error: {type(exc).__name__}: {exc}; please report"
        ), None


def run(
    paths: Iterable[Path],
    options: Options,
    jobs: int,
    write: bool,
    progress: Callable[[int], None] | None = None,
) -> list[FileResult]:
    """Migrate every path; with `write`, apply changes. Results come back in input order.

    `progress` is called with the number of files done so far (`migrate.progress`).
    """
    work = [(str(p), options, write) for p in paths]
    report = progress or (lambda done: None)
    if jobs > 1 and len(work) > 1:
        outcomes = _in_pool(work, min(jobs, len(work)), report)
    else:
        outcomes = []
        for item in work:
            outcomes.append(_migrate_path(item))
            report(len(outcomes))
    if write:
        _write(outcomes)
    return [result for result, _ in outcomes]


def _write(outcomes: list[_Outcome]) -> None:
    """Write each changed file whose bytes are still the migrated ones; clean stale temp files first."""
    from migrate.writer import ChangedOnDisk, remove_stale_temps, write_atomic

    cleaned: set[str] = set()
    for result, read_digest in outcomes:
        if result.new is None:
            continue
        folder = os.path.dirname(os.path.realpath(result.path))
        if folder not in cleaned:
            cleaned.add(folder)
            remove_stale_temps(Path(folder))
        try:
            write_atomic(Path(result.path), result.new, expected=read_digest)
        except ChangedOnDisk:
            result.status = "skipped"
            result.skip_reason = NOT_WRITTEN
            result.new = None
        except OSError as exc:
            result.status = "error"
            result.error = f"{result.path}: cannot write: {exc}"


def _in_pool(work: list[_Work], jobs: int, report: Callable[[int], None]) -> list[_Outcome]:
    """Migrate `work` in `jobs` worker processes, surviving workers that die.

    Files go to the workers in chunks (one round trip per chunk, not per file). After a worker
    dies, the files left are handed out one at a time; if one dies again, the files that were in
    flight (the first unfinished ones in submission order: each worker holds one and the executor
    queues `jobs + 1` more) each run alone, so the file that kills its process is named. Every
    round after the first settles at least those, so the loop ends. Chunks hold at most `_CHUNK_MAX`
    files, so the progress line moves every few seconds on a large tree.

    `concurrent.futures` and `multiprocessing` are imported by the pool's functions, not with the
    module: a run over one file (a pre-commit hook) starts no pool, and the two cost a tenth of its
    start-up.
    """
    outcomes: dict[int, _Outcome] = {}
    remaining = list(range(len(work)))
    chunk = max(1, min(len(work) // (jobs * 4), _CHUNK_MAX))
    while remaining:
        broken = _pool_round(work, remaining, jobs, chunk, outcomes, report)
        remaining = [i for i in remaining if i not in outcomes]
        if not broken:
            break
        if chunk > 1:
            chunk = 1
            continue
        suspects, remaining = remaining[: 2 * jobs + 1], remaining[2 * jobs + 1 :]
        for i in suspects:
            outcomes[i] = _alone(work[i])
            report(len(outcomes))
    return [outcomes[i] for i in range(len(work))]


def _pool_round(
    work: list[_Work],
    indices: list[int],
    jobs: int,
    chunk: int,
    outcomes: dict[int, _Outcome],
    report: Callable[[int], None],
) -> bool:
    """Run `indices` in a fresh pool, `chunk` files a task, storing each outcome as its task ends; True
    when a worker died and broke the pool."""
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from concurrent.futures.process import BrokenProcessPool

    futures: dict[Future[list[_Outcome]], list[int]] = {}
    broken = False
    with ProcessPoolExecutor(max_workers=min(jobs, len(indices)), initializer=_leave_interrupts_to_the_parent) as pool:
        try:
            for start in range(0, len(indices), chunk):
                batch = indices[start : start + chunk]
                futures[pool.submit(_migrate_paths, [work[i] for i in batch])] = batch
        except BrokenProcessPool:  # a worker died before every file was handed out
            broken = True
        try:
            for future in as_completed(futures):
                try:
                    outcomes.update(zip(futures[future], future.result()))
                except BrokenProcessPool:
                    broken = True
                else:
                    report(len(outcomes))
        except KeyboardInterrupt:  # Ctrl-C: drop the files not started rather than migrate them all first
            pool.shutdown(wait=True, cancel_futures=True)
            raise
    return broken


def _leave_interrupts_to_the_parent() -> None:
    """A worker ignores Ctrl-C (its whole process group gets SIGINT): the parent stops the run and exits 130,
    rather than every worker printing a KeyboardInterrupt traceback."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _migrate_paths(batch: list[_Work]) -> list[_Outcome]:
    return [_migrate_path(args) for args in batch]


def _alone(args: _Work) -> _Outcome:
    """Migrate one file in a process of its own; a process that dies becomes an error naming the file."""
    import multiprocessing

    context = multiprocessing.get_context()
    receive, send = context.Pipe(duplex=False)
    process = context.Process(target=_send_outcome, args=(send, args), daemon=True)
    process.start()
    send.close()
    try:
        outcome: _Outcome = receive.recv()
    except EOFError:
        process.join()
        path = args[0]
        return FileResult(
            path,
            "internal-error",
            error=f"{path}: the process migrating this file died ({_death(process.exitcode)}); "
            "file left unchanged, the other files went on; please report this",
        ), None
    finally:
        receive.close()
    process.join()
    return outcome


def _send_outcome(send: multiprocessing.connection.Connection, args: _Work) -> None:
    send.send(_migrate_path(args))
    send.close()


def _death(exitcode: int | None) -> str:
    """`killed by SIGSEGV`, `exit status 3`."""
    if exitcode is not None and exitcode < 0:
        try:
            return f"killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"killed by signal {-exitcode}"
    return f"exit status {exitcode}"


def default_jobs() -> int:
    return os.cpu_count() or 1
