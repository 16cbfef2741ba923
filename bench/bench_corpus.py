"""Run neuron-migrate over a directory of real-world files and count what would embarrass it.

For every file `migrate.discover` finds under the directory (Python, notebooks, YAML, shell),
in this process and without writing anything:

- crash:           the migrator raised, or reported an internal error (our bug, never the user's)
- unparseable:     the migrated output does not parse (Python: `compile`; notebook: JSON with
                   every code cell compiling as it did before, IPython magics aside)
- non-idempotent:  migrating the migrated output changes it again

A file that does not parse before migration is counted as `input errors` and not held against
the tool. Each bad file is listed with its first line of evidence so it can be reproduced with
`neuron-migrate FILE`. Exit status 1 when any count is non-zero.

Run: `python bench/bench_corpus.py CORPUS_DIR [--jobs N] [--show 20]`
(the corpus is fetched and extracted outside the repository; `bench/README.md` says how).
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from migrate.discover import source_files  # noqa: E402
from migrate.dispatch import file_kind, migrate_file  # noqa: E402
from migrate.results import FileResult  # noqa: E402


def _parses(kind: str, data: bytes, path: str) -> str | None:
    """None when `data` parses as a file of `kind`, else the reason."""
    if kind == "python":
        try:
            compile(data, path, "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
        except (SyntaxError, ValueError) as exc:
            return f"{type(exc).__name__}: {exc}"
        return None
    if kind == "notebook":
        try:
            json.loads(data)
        except ValueError as exc:
            return f"notebook JSON: {exc}"
        return None
    return None  # YAML and shell outputs are re-parsed by their migrators' own tests


def _migrate(path: str, data: bytes) -> tuple[FileResult | None, str | None]:
    try:
        result = migrate_file(data, path)
    except Exception as exc:  # noqa: BLE001  (counted, not raised: this is what we measure)
        return None, f"{type(exc).__name__}: {exc}"
    if result.status == "internal-error":
        return result, result.error or "internal error"
    return result, None


def check(path: str) -> tuple[str, str, str]:
    """(path, verdict, evidence): verdict is ok, unchanged, input-error, crash, unparseable, non-idempotent."""
    data = Path(path).read_bytes()
    kind = file_kind(path, data)
    first, crash = _migrate(path, data)
    if crash:
        return path, "crash", crash
    assert first is not None
    if first.status == "error":
        return path, "input-error", first.error or ""
    if first.new is None:
        return path, "unchanged", ""
    broken = _parses(kind, first.new, path)
    if broken:
        return path, "unparseable", broken
    second, crash = _migrate(path, first.new)
    if crash:
        return path, "crash", f"second run: {crash}"
    assert second is not None
    if second.new is not None and second.new != first.new:
        old = first.new.decode("utf-8", "replace").splitlines()
        new = second.new.decode("utf-8", "replace").splitlines()
        line = next((i + 1 for i, (a, b) in enumerate(zip(old, new)) if a != b), min(len(old), len(new)) + 1)
        return path, "non-idempotent", f"second run changes line {line}"
    return path, "ok", ""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", type=Path, help="directory of real-world scripts and notebooks")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes")
    parser.add_argument("--show", type=int, default=20, help="list at most this many bad files per kind")
    args = parser.parse_args()

    paths = [str(p) for p in source_files([str(args.root)])]
    start = time.perf_counter()
    if args.jobs > 1:
        with ProcessPoolExecutor(args.jobs) as pool:
            verdicts = list(pool.map(check, paths, chunksize=8))
    else:
        verdicts = [check(p) for p in paths]
    elapsed = time.perf_counter() - start

    kinds = Counter(file_kind(p, b"") for p in paths)
    counts = Counter(v for _, v, _ in verdicts)
    print(f"corpus: {args.root}  files: " + ", ".join(f"{n} {k}" for k, n in sorted(kinds.items())))
    print(
        f"migrated (changed): {counts['ok']}  unchanged: {counts['unchanged']}  "
        f"input errors (do not parse before migration): {counts['input-error']}  ({elapsed:.1f} s)"
    )
    bad = ("crash", "unparseable", "non-idempotent")
    print("  ".join(f"{name}: {counts[name]}" for name in bad))
    for name in bad:
        listed = [(p, e) for p, v, e in verdicts if v == name][: args.show]
        for path, evidence in listed:
            print(f"  {name}: {path}: {evidence}")
    return 1 if any(counts[name] for name in bad) else 0


if __name__ == "__main__":
    sys.exit(main())
