"""`neuron-migrate --write` over a tree that another process edits, renames and deletes files in.

A generated tree of `--files` CUDA scripts (default 300, in folders of 10; each ends with a
`# end of <name>` line, so a truncated file shows) is migrated by `python -m migrate --write -j 2`
in a process of its own, while a second process (the "editor") works on it until the run exits:
every `--interval` seconds it takes a file nobody touched yet and appends a line (as an editor
saving in place), replaces it whole (as an editor's atomic save or a `git checkout`), renames it to
`<name>.moved`, or deletes it, and logs what it did.

Afterwards it asserts, and prints what it found:
- no edit lost: every edited file holds its edit (migrated or not);
- no file truncated: every `.py` and `.moved` file compiles and ends with its `# end of` line;
- no temp file (`*.neuron-migrate`) left in the tree;
- every file the run left unmigrated is named in its output (skipped as "changed during the run,
  not written", or an error "cannot read" when it was gone before being read), and a renamed or
  deleted file was never brought back at its old path;
- every file nobody touched was migrated.

Run: `python bench/bench_migrate_stress.py [--files 300] [--interval 0.1] [--seed 0] [--json]`.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from multiprocessing.synchronize import Event
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OPERATIONS = ("append", "replace", "rename", "delete")
DONE = {"append": "appended", "replace": "replaced", "rename": "renamed", "delete": "deleted"}


def script(name: str) -> str:
    """A CUDA training-step script big enough that migrating 300 takes seconds."""
    body = "".join(
        f"def step_{i}(model, batch):\n"
        f"    inputs = batch['input_ids'].cuda()\n"
        f"    with torch.autocast('cuda', dtype=torch.float16):\n"
        f"        loss = model(inputs).loss * {i + 1}\n"
        f"    torch.cuda.synchronize()\n"
        f"    return loss\n\n\n"
        for i in range(12)
    )
    return f"import torch\n\nDEVICE = torch.device('cuda')\n\n\n{body}# end of {name}\n"


def make_tree(root: Path, files: int) -> list[Path]:
    paths = []
    for i in range(files):
        folder = root / f"pkg{i // 10:02d}"
        folder.mkdir(exist_ok=True)
        path = folder / f"train_{i:03d}.py"
        path.write_text(script(path.name))
        paths.append(path)
    return paths


def editor(paths: list[str], log: str, interval: float, seed: int, share: float, started: Event, stop: Event) -> None:
    """Touch one untouched file per `interval` until `stop`, at most `share` of them; log each operation once done."""
    rng = random.Random(seed)
    order = list(paths)
    rng.shuffle(order)
    order = order[: int(len(order) * share)]
    started.wait()
    with open(log, "w") as out:
        for n, path in enumerate(order):
            if stop.wait(interval):
                return
            operation = OPERATIONS[n % len(OPERATIONS)]
            target = Path(path)
            marker = f"# edited by the stress editor, {n}\n"
            if operation == "append":
                with open(target, "a") as handle:
                    handle.write(marker)
            elif operation == "replace":
                text = target.read_text()
                fresh = target.with_name(f"{target.name}.editor-tmp")
                fresh.write_text(marker + text)
                os.replace(fresh, target)
            elif operation == "rename":
                os.rename(target, f"{path}.moved")
            else:
                os.unlink(target)
            out.write(json.dumps({"path": path, "op": operation, "marker": marker, "n": n}) + "\n")
            out.flush()


def scanned(err: str) -> int:
    """The `N files scanned` of the run's summary."""
    match = re.search(r"neuron-migrate: (\d+) files? scanned", err)
    return int(match.group(1)) if match else -1


def ends_whole(path: Path) -> bool:
    """Compiles and still ends with its own `# end of` line (a marker may follow it)."""
    text = path.read_text()
    name = path.name.removesuffix(".moved")
    try:
        compile(text, str(path), "exec")
    except SyntaxError:
        return False
    return f"# end of {name}\n" in text and text.endswith("\n")


def migrated(text: str) -> bool:
    return ".cuda()" not in text and "torch.device('cuda')" not in text


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=300)
    parser.add_argument("--interval", type=float, default=0.1, help="seconds between the editor's operations")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--share", type=float, default=0.5, help="the most of the files the editor touches")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "tree"
        tree.mkdir()
        paths = make_tree(tree, args.files)
        log = Path(tmp) / "editor.jsonl"
        context = multiprocessing.get_context("spawn")
        started, stop = context.Event(), context.Event()
        edit = context.Process(
            target=editor,
            args=([str(p) for p in paths], str(log), args.interval, args.seed, args.share, started, stop),
        )
        edit.start()
        begin = time.perf_counter()
        run = subprocess.Popen(
            [sys.executable, "-m", "migrate", "--write", "-j", "2", str(tree)],
            cwd=tmp,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        started.set()
        try:
            _, err = run.communicate(timeout=600)
        finally:
            stop.set()
            edit.join(timeout=60)
            if edit.is_alive():
                edit.kill()
        wall = time.perf_counter() - begin
        ops = {entry["path"]: entry for entry in map(json.loads, log.read_text().splitlines())}
        problems = check(tree, paths, ops, err)

    counts = {op: sum(1 for e in ops.values() if e["op"] == op) for op in OPERATIONS}
    report = {
        "files": args.files,
        "exit_status": run.returncode,
        "wall_s": round(wall, 1),
        "scanned": scanned(err),
        **{DONE[op]: n for op, n in counts.items()},
        "named_not_written": err.count("changed during the run, not written"),
        "named_cannot_read": err.count("cannot read"),
        "problems": problems,
    }
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        for key, value in report.items():
            if key != "problems":
                print(f"{key:>18}: {value}")
        print("problems:", *(problems or ["none"]), sep="\n  ")
    sys.exit(1 if problems else 0)


def check(tree: Path, paths: list[Path], ops: dict[str, dict[str, str]], err: str) -> list[str]:
    """Every way the run could have lost, truncated, left or hidden something; empty when none did."""
    problems = []
    # files renamed or deleted before the run's walk reached them: the run never saw them
    unseen = {e["path"] for e in sorted(ops.values(), key=lambda e: e["n"]) if e["op"] in ("rename", "delete")}
    unseen = set(sorted(unseen, key=lambda p: ops[p]["n"])[: len(paths) - scanned(err)])
    leftovers = [p.name for p in tree.rglob("*") if p.name.endswith(".neuron-migrate")]
    if leftovers:
        problems.append(f"temp files left: {leftovers}")
    for path in paths:
        entry = ops.get(str(path))
        shown = os.path.relpath(path, tree.parent)
        named = f"{shown}: changed during the run, not written" in err or f"{shown}: cannot read" in err
        if entry is None:
            if not (path.exists() and ends_whole(path) and migrated(path.read_text())):
                problems.append(f"{shown}: untouched, yet not migrated or not whole")
            continue
        op = entry["op"]
        if op in ("append", "replace"):
            if not path.exists() or entry["marker"] not in path.read_text():
                problems.append(f"{shown}: the editor's {op} was lost")
            elif not ends_whole(path):
                problems.append(f"{shown}: truncated")
            elif not migrated(path.read_text()) and not named:
                problems.append(f"{shown}: left unmigrated and not named in the output")
        else:
            if path.exists():
                problems.append(f"{shown}: {op}d by the editor, brought back by the run")
            moved = Path(f"{path}.moved")
            if op == "rename" and not (moved.exists() and ends_whole(moved)):
                problems.append(f"{shown}.moved: lost or truncated")
            if op == "rename" and not migrated(moved.read_text()) and not named and str(path) not in unseen:
                problems.append(f"{shown}: renamed before it was written and not named in the output")
    return problems


if __name__ == "__main__":
    main()
