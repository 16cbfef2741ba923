"""Codemod throughput against libcst's own parse+render floor, on real Python files.

Corpus: the installed transformers `models/` tree, copied to a temp dir. In one run, on the
same files, serially in this process (files per CPU-second, `time.process_time`):

- floor:      `libcst.parse_module(data).bytes` for every file (what any libcst tool pays)
- whole tree: `migrate_source` on every file (the prefilter skips most of them)
- rewriting:  both, restricted to the files the codemod actually changes
- one script: wall time of `python -m migrate train.py` in a fresh process (median of 5)

Targets (issue 5): whole tree <= 0.5x the floor's time; rewriting files <= 3x the floor;
one script < 0.5 s. Run: `python bench/bench_migrate.py [--limit N]`.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import libcst as cst

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from migrate.engine import migrate_source  # noqa: E402


def cpu(fn, items) -> float:
    start = time.process_time()
    for item in items:
        fn(item)
    return time.process_time() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--limit", type=int, default=0, help="use only the first N files (0: all)")
    args = parser.parse_args()

    import transformers

    source = Path(transformers.__file__).parent / "models"
    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "models"
        shutil.copytree(source, corpus, ignore=shutil.ignore_patterns("__pycache__"))
        files = sorted(corpus.rglob("*.py"))
        if args.limit:
            files = files[: args.limit]
        blobs = [(str(p), p.read_bytes()) for p in files]
        lines = sum(b.count(b"\n") for _, b in blobs)

        floor = cpu(lambda item: cst.parse_module(item[1]).bytes, blobs)
        results = {}
        tool = cpu(lambda item: results.__setitem__(item[0], migrate_source(item[1], item[0])), blobs)
        changed = [item for item in blobs if results[item[0]].status == "changed"]
        floor_changed = cpu(lambda item: cst.parse_module(item[1]).bytes, changed)
        tool_changed = cpu(lambda item: migrate_source(item[1], item[0]), changed)

        script = ROOT / "fixtures" / "cuda" / "ddp_train_loop.py"
        train = Path(tmp) / "train.py"
        train.write_bytes(script.read_bytes())
        walls = []
        for _ in range(5):
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-m", "migrate", str(train)], cwd=ROOT, capture_output=True, check=False)
            walls.append(time.perf_counter() - t0)

    n, k = len(blobs), len(changed)
    print(f"corpus: transformers {transformers.__version__} models/, {n} files, {lines} lines")
    print(f"{'run':<34}{'files':>7}{'CPU s':>9}{'files/CPU-s':>13}{'x floor':>9}")
    print(f"{'libcst parse+render (floor)':<34}{n:>7}{floor:>9.2f}{n / floor:>13.1f}{1:>9.2f}")
    print(f"{'neuron-migrate, whole tree':<34}{n:>7}{tool:>9.2f}{n / tool:>13.1f}{tool / floor:>9.2f}")
    if k:
        print(f"{'floor, files that get rewritten':<34}{k:>7}{floor_changed:>9.2f}{k / floor_changed:>13.1f}{1:>9.2f}")
        print(
            f"{'neuron-migrate, those files':<34}{k:>7}{tool_changed:>9.2f}{k / tool_changed:>13.1f}{tool_changed / floor_changed:>9.2f}"
        )
    print(f"one script (`python -m migrate train.py`, {script.name}): median {statistics.median(walls):.3f} s wall")
    ok = tool <= 0.5 * floor and (not k or tool_changed <= 3 * floor_changed) and statistics.median(walls) < 0.5
    print("targets met" if ok else "TARGETS MISSED")


if __name__ == "__main__":
    main()
