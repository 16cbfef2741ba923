"""Codemod CPU time against libcst's own parse+render floor, measured side by side in one run.

Two ratios, each the median over interleaved rounds (so machine load moves both sides alike), in CPU
seconds of child processes (`resource.getrusage(RUSAGE_CHILDREN)`: user + system), never wall time:

- whole tree: `neuron-migrate --check --jobs 1 <files>` against a process that runs
  `libcst.parse_module(data).bytes` on the same files (what any libcst tool pays). The prefilter skips
  most files of a library; the files it lets through are parsed, visited and, when changed, migrated a
  second time to confirm the fixed point.
- one file: the same two commands on one script (`examples/finetune_cuda.py`), where start-up (imports)
  dominates both.

Both sides run as a user's do: with compiled bytecode. pip compiles libcst's modules at install; this project's
are compiled on first import, unless `PYTHONDONTWRITEBYTECODE` is set (as on the machines this bench was first run
on), which would charge the codemod a recompile of all its modules on every run and libcst none. So the children
run without that variable, and each command runs once before the rounds, uncounted.

The tree is an argument (for the issue's figure, every 6th file of transformers' `src/transformers/models`);
without one, the project's own Python sources are the sample. `--max-ratio X` exits 1 when the whole-tree
ratio is above X: `.ci/run` uses it on the project's own sources so a several-fold slowdown fails CI.

    python bench/bench_migrate.py [TREE] [--every N] [--rounds R] [--one-file-rounds R] [--max-ratio X]
    python bench/bench_migrate.py --memory LINES

`--memory LINES` instead measures one generated CUDA script of about LINES lines (functions moving tensors to
`"cuda"`, so every one is rewritten): the peak RSS and CPU seconds of a process that parses and renders it with
libcst against one that runs `neuron-migrate --check` on it, each in a fresh interpreter reporting its own
`getrusage` (peak RSS includes the interpreter and its imports on both sides).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OWN = ("migrate", "neuroncompat", "bench", "tests", "examples", "fixtures")  # the default sample: our own sources
ONE_FILE = ROOT / "examples" / "finetune_cuda.py"
ENV = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}
FLOOR = "import sys, libcst\nfor path in sys.argv[1:]:\n    libcst.parse_module(open(path, 'rb').read()).bytes\n"


# a process that does one side's work on a file, then writes its own peak RSS and CPU seconds to a file
MEASURE = """
import json, resource, sys
side, path, out = sys.argv[1:4]
if side == "libcst":
    import libcst
    libcst.parse_module(open(path, "rb").read()).bytes
else:
    import runpy
    sys.argv = ["neuron-migrate", "--check", path]
    try:
        runpy.run_module("migrate", run_name="__main__", alter_sys=True)
    except SystemExit:
        pass
usage = resource.getrusage(resource.RUSAGE_SELF)
with open(out, "w") as f:
    json.dump({"peak_mib": usage.ru_maxrss / 1024, "cpu_s": usage.ru_utime + usage.ru_stime}, f)
"""
BLOCK = """

def step_{i}(model, batch, optimizer):
    inputs = batch["input_ids"].to("cuda")
    labels = batch["labels"].cuda()
    with torch.autocast("cuda", dtype=torch.float16):
        loss = model(inputs, labels=labels).loss
    loss.backward()
    optimizer.step()
    torch.cuda.synchronize()
    return loss.item()
"""


def big_script(lines: int) -> str:
    """A CUDA training script of about `lines` lines: the same step function under numbered names."""
    head = "import torch\n"
    return head + "".join(BLOCK.format(i=i) for i in range(max(1, lines // BLOCK.count("\n"))))


def memory(lines: int) -> None:
    """Peak RSS and CPU seconds of libcst's parse+render and of neuron-migrate --check, on one big script."""
    with tempfile.TemporaryDirectory() as folder:
        script = Path(folder) / "train_big.py"
        script.write_text(big_script(lines))
        print(f"one generated script: {script.read_text().count(chr(10))} lines, {script.stat().st_size // 1024} KiB")
        print(f"{'':<24}{'peak RSS MiB':>14}{'CPU s':>10}")
        found = {}
        for side in ("libcst", "neuron-migrate"):
            out = Path(folder) / f"{side}.json"
            subprocess.run(
                [sys.executable, "-c", MEASURE, side, str(script), str(out)],
                cwd=ROOT,
                env=ENV,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                check=True,
            )
            found[side] = json.loads(out.read_text())
            print(f"{side:<24}{found[side]['peak_mib']:>14.0f}{found[side]['cpu_s']:>10.1f}")
        ratio = found["neuron-migrate"]["peak_mib"] / found["libcst"]["peak_mib"]
        print(
            f"peak RSS ratio {ratio:.2f} (target 3), CPU ratio {found['neuron-migrate']['cpu_s'] / found['libcst']['cpu_s']:.2f}"
        )


def child_cpu(command: Sequence[str]) -> float:
    """CPU seconds (user + system) the command's process used."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(command, cwd=ROOT, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def interleaved(files: Sequence[str], rounds: int) -> list[tuple[float, float]]:
    """(floor, codemod) CPU seconds per round, the two run back to back on the same files."""
    floor = [sys.executable, "-c", FLOOR, *files]
    tool = [sys.executable, "-m", "migrate", "--check", "--jobs", "1", *files]
    child_cpu(floor), child_cpu(tool)  # uncounted: both sides' bytecode is written and the files are in the page cache
    return [(child_cpu(floor), child_cpu(tool)) for _ in range(rounds)]


def sample(tree: Path | None, every: int) -> list[str]:
    if tree is None:
        found = sorted(p for folder in OWN for p in (ROOT / folder).rglob("*.py") if "__pycache__" not in p.parts)
    else:
        found = sorted(p for p in tree.rglob("*.py") if "__pycache__" not in p.parts)
    return [str(p) for p in found[::every]]


def report(name: str, pairs: list[tuple[float, float]]) -> float:
    ratio = statistics.median(tool / floor for floor, tool in pairs)
    floor = statistics.median(f for f, _ in pairs)
    tool = statistics.median(t for _, t in pairs)
    print(f"{name:<44}{floor:>10.2f}{tool:>16.2f}{ratio:>9.2f}   ({len(pairs)} interleaved rounds)")
    return ratio


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("tree", nargs="?", type=Path, help="a folder of Python files (default: this project's own)")
    parser.add_argument("--every", type=int, default=1, help="take every Nth file, sorted by path (default: all)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved whole-tree rounds (default 3; 0: skip)")
    parser.add_argument("--one-file-rounds", type=int, default=7, help="interleaved one-file rounds (0: skip)")
    parser.add_argument("--max-ratio", type=float, help="exit 1 when the whole-tree ratio is above this")
    parser.add_argument("--memory", type=int, metavar="LINES", help="peak RSS on one generated script of LINES lines")
    args = parser.parse_args()
    if args.memory:
        memory(args.memory)
        return 0
    if args.tree is not None and not args.tree.is_dir():
        parser.error(f"{args.tree}: not a folder")
    files = sample(args.tree, args.every)
    if not files:
        parser.error(f"{args.tree}: no Python files")
    lines = sum(Path(f).read_bytes().count(b"\n") for f in files)
    print(
        f"sample: {args.tree or 'this project: ' + ' '.join(OWN)}, every {args.every}: {len(files)} files, {lines} lines"
    )
    print(f"{'CPU seconds, median':<44}{'libcst':>10}{'neuron-migrate':>16}{'ratio':>9}")
    ratio = report("whole tree (--check --jobs 1)", interleaved(files, args.rounds)) if args.rounds else 0.0
    if args.one_file_rounds:
        report(f"one file ({ONE_FILE.relative_to(ROOT)})", interleaved([str(ONE_FILE)], args.one_file_rounds))
    if args.max_ratio is not None and ratio > args.max_ratio:
        print(f"FAILED: whole-tree ratio {ratio:.2f} is above {args.max_ratio}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
