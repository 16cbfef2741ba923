"""Public Hugging Face training scripts, run as a new user would, on the simulated Neuron device.

The scripts are not in this repository: they are read from snapshots of their public repositories
(``--snapshots DIR`` holds ``owner+name/repo``, a bare git directory as the ``fetch`` tool leaves it, or
``owner+name/`` with the files checked out). ``bench/real_scripts.json`` names each script (repo, commit,
path, arguments, and how its docs launch it on several processes). Each script's directory is extracted to a
temporary directory and run, with tiny local inputs built here (``neuroncompat.testing``: a causal LM and
tokenizer, JSON-lines data sets, and the offline hub cache that accelerate's NLP examples read by name;
``packages`` in an entry names the repository's own package directories the script imports, copied beside it
as an installed package would be):

- ``sim-1``: ``NEURONCOMPAT_SIMULATE=1 python -m neuroncompat script.py ...``, unmodified;
- ``sim-2``: the same under ``torchrun --nproc_per_node 2 -m neuroncompat`` or
  ``accelerate launch --num_processes 2 -m neuroncompat`` (``multi`` in the manifest);
- ``mig-1`` / ``mig-2``: after ``neuron-migrate --write`` on the extracted copy (which adds
  ``import neuroncompat``), run with plain ``python`` / the launcher;
- ``cpu-1``: the unmodified script without the simulator, as a reference;
- ``report``: ``neuroncompat simulate -- python script.py ...``, the dry-run report (its compile estimate is
  shown in the error column when the run succeeds).

Each run is reported with its exit code, wall time, the graphs the ``neuron`` compile backend was given
(summed over ranks), and the device its tensors lived on: a probe loaded at interpreter start
(``sitecustomize``) records, at exit, each simulated core's peak allocated bytes, so ``neuron:0,1`` means
both cores held tensors, ``cpu`` means the run never put a tensor on a NeuronCore (silently on CPU), and ``-``
that no process reached its exit (killed at the timeout).

``python bench/bench_real_scripts.py --snapshots SNAPSHOTS_DIR [--only trl-sft,...] [--variants sim-1,sim-2]
[--timeout 600] [--json out.json]``
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
MANIFEST = Path(__file__).with_name("real_scripts.json")
VARIANTS = ("sim-1", "sim-2", "mig-1", "mig-2")

# Loaded at interpreter start through PYTHONPATH; at exit it writes what the process put on the simulated
# cores. atexit runs handlers last-registered-first, so this one runs after the script's own.
PROBE = """
import atexit, json, os, sys


def _neuroncompat_bench_probe():
    torch = sys.modules.get("torch")
    if torch is None or not hasattr(torch, "neuron"):
        peaks, compiles = {}, 0
    else:
        try:
            count = torch.neuron.device_count()
            peaks = {i: torch.neuron.max_memory_allocated(i) for i in range(count)}
            from neuroncompat import simulator
            compiles = len(simulator.compiles())
        except Exception:
            peaks, compiles = {}, 0
    path = os.path.join(os.environ["NEURONCOMPAT_BENCH_PROBE"], f"{os.getpid()}.json")
    with open(path, "w") as f:
        json.dump({"peaks": peaks, "compiles": compiles, "argv": sys.argv}, f)


if os.environ.get("NEURONCOMPAT_BENCH_PROBE"):
    atexit.register(_neuroncompat_bench_probe)
"""


def build_inputs(root: Path) -> dict[str, str]:
    """The tiny model, the data sets and the offline hub cache every manifest entry reads."""
    from neuroncompat.testing import build_causal_lm, build_glue_mrpc_cache, sentences

    model = build_causal_lm(root / "model")
    data = root / "data"
    first, second, third = (sentences(64, 4, 30, seed=s) for s in (1, 2, 3))
    tables = {
        "text": [{"text": a} for a in first],
        "messages": [
            {"messages": [{"role": "user", "content": a}, {"role": "assistant", "content": b}]}
            for a, b in zip(first, second)
        ],
        "pref": [{"prompt": a, "chosen": b, "rejected": c} for a, b, c in zip(first, second, third)],
        "kto": [{"prompt": a, "completion": b, "label": i % 2 == 0} for i, (a, b) in enumerate(zip(first, second))],
        "alpaca": [{"instruction": a, "input": "", "output": b} for a, b in zip(first, second)],
        "prompt": [{"prompt": [{"role": "user", "content": a}]} for a in first],
    }
    for name, rows in tables.items():
        (data / name).mkdir(parents=True, exist_ok=True)
        (data / name / "train.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    # Scripts that json.load one file (Alpaca's and FastChat's train.py) read a JSON list, not JSON lines.
    sharegpt = [
        {"id": str(i), "conversations": [{"from": "human", "value": a}, {"from": "gpt", "value": b}]}
        for i, (a, b) in enumerate(zip(first, second))
    ]
    (data / "alpaca.json").write_text(json.dumps(tables["alpaca"]))
    (data / "sharegpt.json").write_text(json.dumps(sharegpt))
    # philschmid's R1 GRPO script selects 50,000 Countdown rows (numbers and a target) before it trains.
    (data / "countdown").mkdir()
    countdown = ({"nums": [i % 7 + 1, i % 5 + 2, i % 3 + 3], "target": i % 20 + 1} for i in range(50_000))
    (data / "countdown" / "train.jsonl").write_text("".join(json.dumps(row) + "\n" for row in countdown))
    # philschmid's FSDP QLoRA script reads train_dataset.json and test_dataset.json from one directory.
    (data / "qlora").mkdir()
    for name in ("train_dataset.json", "test_dataset.json"):
        (data / "qlora" / name).write_text((data / "messages" / "train.jsonl").read_text())
    # nanoGPT's train.py reads `data/<dataset>/{train,val}.bin` (uint16 token ids, np.memmap) and its vocabulary size
    # from meta.pkl, as its data/shakespeare_char/prepare.py writes them; `--dataset=<absolute path>` points it here.
    (data / "nanogpt").mkdir()
    for name, count in (("train", 4096), ("val", 1024)):
        (data / "nanogpt" / f"{name}.bin").write_bytes(
            b"".join(((i * 7919) % 65).to_bytes(2, "little") for i in range(count))
        )
    (data / "nanogpt" / "meta.pkl").write_bytes(pickle.dumps({"vocab_size": 65}))
    hf_home = build_glue_mrpc_cache(root / "hf_home")
    return {"model": str(model), "data": str(data), "hf_home": str(hf_home)}


def extract(snapshots: Path, entry: dict, dest: Path) -> Path:
    """Copy the script's directory at the manifest's commit to ``dest``; return the script's path there."""
    owner_name = entry["repo"].replace("/", "+")
    folder = str(Path(entry["path"]).parent)
    git_dir = snapshots / owner_name / "repo"
    if git_dir.is_dir():
        commit = entry["commit"]
        known = subprocess.run(["git", f"--git-dir={git_dir}", "cat-file", "-e", commit], capture_output=True)
        if known.returncode != 0:
            raise SystemExit(f"{git_dir}: commit {commit} of {entry['repo']} is not in this snapshot")
        names = subprocess.run(
            ["git", f"--git-dir={git_dir}", "ls-tree", "--name-only", commit, folder + "/"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        for name in names:
            if name.endswith(".py"):
                blob = subprocess.run(["git", f"--git-dir={git_dir}", "show", f"{commit}:{name}"], capture_output=True)
                (dest / Path(name).name).write_bytes(blob.stdout)
        for package in entry.get("packages", []):
            files = subprocess.run(
                ["git", f"--git-dir={git_dir}", "ls-tree", "-r", "--name-only", commit, package + "/"],
                capture_output=True,
                text=True,
                check=True,
            ).stdout.split()
            for name in files:
                if name.endswith(".py"):
                    target = dest / Path(package).name / Path(name).relative_to(package)
                    target.parent.mkdir(parents=True, exist_ok=True)
                    blob = subprocess.run(
                        ["git", f"--git-dir={git_dir}", "show", f"{commit}:{name}"], capture_output=True
                    )
                    target.write_bytes(blob.stdout)
    else:
        tree = snapshots / owner_name / folder
        if not tree.is_dir():
            raise SystemExit(f"{snapshots}: neither {git_dir} nor {tree} exists for {entry['repo']}")
        for source in tree.glob("*.py"):
            shutil.copy(source, dest / source.name)
    return dest / Path(entry["path"]).name


def command(entry: dict, variant: str, script: Path, args: list[str]) -> list[str]:
    """The command line a user types for this variant."""
    if variant == "report":
        simulate = [sys.executable, "-c", "from neuroncompat.cli import main; main()", "simulate", "--"]
        return [*simulate, sys.executable, str(script), *args]
    shim = [] if variant.startswith("mig") or variant == "cpu-1" else ["-m", "neuroncompat"]
    if variant.endswith("-1"):
        return [sys.executable, *shim, str(script), *args]
    if entry["multi"] == "torchrun":
        launcher = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2"]
    else:
        launcher = [sys.executable, "-m", "accelerate.commands.launch", "--num_processes", "2"]
    return [*launcher, *shim, str(script), *args]


def run_one(entry: dict, variant: str, snapshots: Path, inputs: dict[str, str], timeout: int) -> dict:
    """Extract, optionally migrate, and run one script in one variant; return its outcome row."""
    work = Path(tempfile.mkdtemp(prefix=f"{entry['id']}-{variant}-"))
    probe_dir, site, out = work / "probe", work / "site", work / "out"
    for folder in (probe_dir, site, out, work / "src"):
        folder.mkdir()
    (site / "sitecustomize.py").write_text(PROBE)
    script = extract(snapshots, entry, work / "src")
    row = {"id": entry["id"], "variant": variant, "migrate": ""}
    env = dict(os.environ, HF_HOME=inputs["hf_home"], HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    env["PYTHONPATH"] = os.pathsep.join([str(site), str(REPO_ROOT), env.get("PYTHONPATH", "")])
    env["NEURONCOMPAT_BENCH_PROBE"] = str(probe_dir)
    if variant != "cpu-1":
        env["NEURONCOMPAT_SIMULATE"] = "1"
    if variant.startswith("mig"):
        before = script.read_text().splitlines()
        # The repository's own packages are migrated with the script, as `neuron-migrate --write .` would.
        packages = [str(script.parent / Path(package).name) for package in entry.get("packages", [])]
        migrated = subprocess.run(
            [sys.executable, "-m", "migrate", "--write", str(script), *packages],
            env=env,
            capture_output=True,
            text=True,
        )
        after = script.read_text().splitlines()
        (work / "migrate.txt").write_text(migrated.stdout + migrated.stderr)
        row["migrate"] = f"+{len(set(after) - set(before))}/-{len(set(before) - set(after))} lines"
        if migrated.returncode != 0:
            row.update(rc="migrate", seconds=0.0, compiles=0, device="-", tail=migrated.stderr.strip()[-200:])
            return row
    args = [a.format(out=out, **inputs) for a in entry["args"]]
    cmd = command(entry, variant, script, args)
    started = time.monotonic()
    # Its own process group, so a hang is ended with every rank the launcher started.
    process = subprocess.Popen(
        cmd,
        cwd=work / "src",
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        log, _ = process.communicate(timeout=timeout)
        rc = str(process.returncode)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        log, _ = process.communicate()
        rc = "timeout"
    row["seconds"] = round(time.monotonic() - started, 1)
    row["rc"] = rc
    compiles, cores, reports = 0, set(), list(probe_dir.glob("*.json"))
    for report in reports:
        data = json.loads(report.read_text())
        compiles += data["compiles"]
        cores |= {int(core) for core, peak in data["peaks"].items() if peak > 0}
    row["compiles"] = compiles
    row["device"] = "neuron:" + ",".join(map(str, sorted(cores))) if cores else "cpu" if reports else "-"
    errors = [line for line in log.splitlines() if "Error" in line or "error:" in line]
    row["tail"] = (errors[-1] if errors and rc != "0" else "").strip()[:200]
    if variant == "report":  # the dry-run report's verdict (its compile estimate), in place of an error line
        estimate = [line for line in log.splitlines() if line.startswith("verdict: ")]
        row["tail"] = row["tail"] or (estimate[-1] if estimate else "no report printed")
    (work / "log.txt").write_text(log)
    row["log"] = str(work / "log.txt")
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--snapshots", type=Path, required=True, help="directory of fetched repository snapshots")
    parser.add_argument("--only", default="", help="comma-separated manifest ids (default: all)")
    parser.add_argument("--variants", default=",".join(VARIANTS), help=f"comma-separated, of {VARIANTS}, cpu-1, report")
    parser.add_argument("--timeout", type=int, default=600, help="seconds per run before it counts as a hang")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    options = parser.parse_args()
    entries = json.loads(MANIFEST.read_text())["scripts"]
    if options.only:
        wanted = set(options.only.split(","))
        entries = [e for e in entries if e["id"] in wanted]
    inputs = build_inputs(Path(tempfile.mkdtemp(prefix="real-scripts-inputs-")))
    rows = []
    print(f"{'script':34} {'variant':7} {'exit':>7} {'secs':>6} {'graphs':>6} {'device':10} {'migrate':12} error")
    for entry in entries:
        for variant in options.variants.split(","):
            row = run_one(entry, variant, options.snapshots, inputs, options.timeout)
            rows.append(row)
            print(
                f"{row['id']:34} {variant:7} {row['rc']:>7} {row['seconds']:6.1f} {row['compiles']:6d} "
                f"{row['device']:10} {row['migrate']:12} {row['tail']}",
                flush=True,
            )
    if options.json:
        options.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
