"""`neuroncompat plan`: how close its per-core peak is to the simulator's measured one, and what planning costs.

Accuracy: for each model (the tests' tiny Llama, a 4-layer hidden-256 Llama at 2 x 128 tokens, and the issue's
12-layer hidden-512 Llama at 1 x 512) and each setting (fp32, bf16 autocast; with and without gradient
checkpointing; AdamW), the plan's peak by the end of each phase (``neuroncompat.plan.trace``, fake tensors) next to
``torch.neuron.max_memory_allocated`` for the same step run for real on the simulated device
(``neuroncompat.plan.measure``, the same ``neuroncompat.plan.step`` code). Each row's error is the worst of its
three phases.

Speed: a Llama-3-8B-shaped config made locally from ``LlamaConfig`` (hidden 4096, 32 layers, 32 heads, 8 KV
heads, intermediate 14336, vocabulary 128256), full fine-tuning at batch 1 x 2048, bf16 parameters, AdamW: the
``neuroncompat plan`` command's wall time and the planning process's peak RSS (a fresh child process, read with
``getrusage(RUSAGE_CHILDREN)``). Targets (issue #42): under 90 s and 4 GiB.

Layout table (``--only table``): the same 8B-shaped step with ``--layouts`` on trn2 (every TP x FSDP by core
count, without and with gradient checkpointing, up to the smallest that fits) in ``--jobs 2`` worker processes:
wall and CPU seconds (the workers' included) and the table. Target (issue #42): under 10 minutes on 2 cores.

TP accuracy (``--only tp``): the 4-layer hidden-256 Llama at 2 x 128 with TP=2, planned (rank 0, fake process
group) and run for real under ``torchrun`` on two simulated cores (``bench/plan_rank.py``, the plan's own step
code sharded by transformers' TP plan); each rank's measured peak by the end of each phase against the plan's.
FSDP accuracy (``--only fsdp``): the same for FSDP 2 (transformers' FSDP plan, FSDP2), on the tiny Llama at 2 x 32
and the 12-layer hidden-512 Llama at 1 x 512.

Script (``--only script``): the same 8B-shaped step written as a user's plain training loop and planned with
``neuroncompat plan -- python loop.py`` (the script's ``from_pretrained`` builds the model from the config on fake
tensors): wall and CPU seconds, peak RSS, and its peak against ``plan MODEL``'s for the same settings.

Graphs (``--only graphs``): the same 8B-shaped step with ``--graphs`` (Dynamo traces ``torch.compile(model)`` on
fake inputs with the dry run's neuron backend): wall and CPU seconds, peak RSS, the graph count.

Run: ``python bench/bench_plan.py [--only accuracy|speed|table|tp|fsdp|script|graphs] [--json]``
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from typing import Any

LLAMA_8B = {
    "hidden_size": 4096,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "intermediate_size": 14336,
    "vocab_size": 128256,
    "max_position_embeddings": 8192,
}
MODELS = {
    "tiny (2 layers, h64), 2x32": ({"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
                                    "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 256}, 2, 32),
    "4 layers, h256, 2x128": ({"hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 4,
                               "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 1000}, 2, 128),
    "12 layers, h512, 1x512": ({"hidden_size": 512, "intermediate_size": 1408, "num_hidden_layers": 12,
                                "num_attention_heads": 8, "num_key_value_heads": 8, "vocab_size": 32000}, 1, 512),
}  # fmt: skip


def accuracy() -> list[dict[str, Any]]:
    """One row per (model, setting): the plan's and the simulator's peak per phase, and the worst error."""
    from transformers import LlamaConfig

    from neuroncompat import simulator
    from neuroncompat.plan.measure import measure
    from neuroncompat.plan.settings import PlanSettings
    from neuroncompat.plan.trace import trace

    simulator.enable(cores=1, shim=False)  # the device alone: the plan is of the device, not the patches
    rows = []
    for name, (shape, batch, seq) in MODELS.items():
        config = LlamaConfig(**shape)
        for autocast in (None, "bf16"):
            for checkpointing in (False, True):
                settings = PlanSettings(
                    batch_size=batch, seq_len=seq, autocast=autocast, gradient_checkpointing=checkpointing
                )
                planned = trace(config, settings).phase_peaks
                measured = measure(config, settings)
                error = max(abs(planned[p] - measured[p]) / measured[p] for p in measured)
                rows.append(
                    {"model": name, "autocast": autocast or "-", "checkpointing": checkpointing,
                     "planned": planned, "measured": measured, "worst_error": error}
                )  # fmt: skip
    return rows


# the 8B-shaped step as a user's plain loop (``--only script``): the model directory is its first argument
LOOP = """import sys
import torch
from transformers import AutoModelForCausalLM
model = AutoModelForCausalLM.from_pretrained(sys.argv[1], dtype=torch.bfloat16)
model.train()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
ids = torch.randint(0, model.config.vocab_size, (1, 2048))
model(input_ids=ids, labels=ids).loss.backward()
optimizer.step()
"""


def _plan_8b(options: list[str], timeout: int, script: bool = False) -> tuple[dict[str, Any], dict[str, Any]]:
    """`neuroncompat plan` of the 8B-shaped config (bf16, sequence 2048) with ``options``, in a fresh process:
    its JSON report, and what the process took (wall and CPU seconds, peak RSS, exit status). With ``script``,
    the :data:`LOOP` script is planned instead (``plan -- python loop.py MODEL_DIR``)."""
    from transformers import LlamaConfig

    with tempfile.TemporaryDirectory() as folder:
        LlamaConfig(**LLAMA_8B).save_pretrained(folder)
        argv = ["plan", folder, "--dtype", "bf16", "--seq-len", "2048", *options, "--format", "json"]
        if script:
            loop = f"{folder}/loop.py"
            with open(loop, "w") as file:
                file.write(LOOP)
            argv = ["plan", "--format", "json", "--", "python", loop, folder]
        command = [sys.executable, "-c", "from neuroncompat.cli import main; main()", *argv]  # the command, fresh
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        seconds = time.perf_counter() - start
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    took = {
        "seconds": seconds,
        "cpu_seconds": usage.ru_utime + usage.ru_stime - before.ru_utime - before.ru_stime,
        "peak_rss_bytes": usage.ru_maxrss * 1024,  # the largest child so far: the plan, unless a larger ran first
        "exit_code": done.returncode,
    }
    return json.loads(done.stdout), took


def speed() -> dict[str, Any]:
    """Plan the 8B-shaped config in a fresh process: wall seconds, peak RSS, and what it planned."""
    report, took = _plan_8b(["--batch-size", "1"], timeout=900)
    return {**took, "per_core": report["per_core"]}


def table() -> dict[str, Any]:
    """The 8B-shaped layout table on trn2 in a fresh process with two trace workers: seconds, and the table."""
    report, took = _plan_8b(["--layouts", "--jobs", "2"], timeout=1800)
    took.pop("peak_rss_bytes")
    return {**took, "layout": report["layout"], "per_core": report["per_core"], "layouts": report["layouts"]}


def script() -> dict[str, Any]:
    """The 8B-shaped step as a plain loop, planned from the script, beside ``plan MODEL``'s peak for it."""
    report, took = _plan_8b([], timeout=900, script=True)
    model, _ = _plan_8b(["--batch-size", "1"], timeout=900)
    return {**took, "per_core": report["per_core"], "plan_model_peak_bytes": model["per_core"]["peak_bytes"]}


def graphs() -> dict[str, Any]:
    """The 8B-shaped step with ``--graphs``: seconds, peak RSS, and the graphs counted."""
    report, took = _plan_8b(["--batch-size", "1", "--graphs"], timeout=900)
    return {**took, "graphs": report["graphs"]}


def _sharded_run(spec: dict[str, Any]) -> list[dict[str, int]]:
    """Each rank's measured peak by the end of each phase: ``spec``'s step under ``torchrun`` on ``tp x fsdp``
    simulated cores (``bench/plan_rank.py``)."""
    import os
    import socket
    from pathlib import Path

    ranks = spec["tp"] * spec["fsdp"]
    with tempfile.TemporaryDirectory() as folder, socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = str(free.getsockname()[1])
        free.close()
        prefix = str(Path(folder) / "rank")
        rank_script = str(Path(__file__).with_name("plan_rank.py"))
        command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(ranks), "--master_port",
                   port, rank_script, prefix, json.dumps(spec)]  # fmt: skip
        env = {**os.environ, "NEURONCOMPAT_SIMULATE": "1", "HF_HUB_OFFLINE": "1"}
        subprocess.run(command, check=True, capture_output=True, env=env, timeout=900)
        return [json.loads(Path(f"{prefix}.{rank}.json").read_text()) for rank in range(ranks)]


def _worst(planned: dict[str, int], measured: list[dict[str, int]]) -> float:
    """The largest relative error of the planned peaks against any rank's measured ones, over the phases."""
    return max(abs(planned[p] - m[p]) / m[p] for m in measured for p in m)


def sharded_accuracy(models: list[str], tp: int, fsdp: int) -> list[dict[str, Any]]:
    """One row per (model, setting): the plan's rank-0 peak per phase for ``tp x fsdp`` (fake process group) and
    each rank's measured one under torchrun."""
    from transformers import LlamaConfig

    from neuroncompat.plan.parallel import Layout
    from neuroncompat.plan.settings import PlanSettings
    from neuroncompat.plan.trace import trace

    rows = []
    for name in models:
        shape, batch, seq = MODELS[name]
        for autocast in (None, "bf16"):
            for checkpointing in (False, True):
                settings = PlanSettings(
                    batch_size=batch, seq_len=seq, autocast=autocast, gradient_checkpointing=checkpointing
                )
                planned = trace(LlamaConfig(**shape), settings, Layout(tp=tp, fsdp=fsdp)).phase_peaks
                spec = {"shape": shape, "batch": batch, "seq": seq, "autocast": autocast,
                        "checkpointing": checkpointing, "tp": tp, "fsdp": fsdp}  # fmt: skip
                measured = _sharded_run(spec)
                row = {"layout": f"TP={tp}" if fsdp == 1 else f"FSDP={fsdp}", "model": name,
                       "autocast": autocast or "-", "checkpointing": checkpointing, "planned": planned,
                       "measured": measured, "worst_error": _worst(planned, measured)}  # fmt: skip
                # and again without the simulator keeping the last collective's tensors alive (bench/plan_rank.py)
                released = _sharded_run({**spec, "release_collectives": True})
                rows.append(row | {"measured_released": released, "worst_error_released": _worst(planned, released)})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=["accuracy", "speed", "table", "tp", "fsdp", "script", "graphs"])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result: dict[str, Any] = {}
    if args.only in (None, "speed"):
        result["speed"] = speed()
    if args.only in (None, "table"):
        result["table"] = table()
    if args.only in (None, "accuracy"):
        result["accuracy"] = accuracy()
    if args.only in (None, "tp"):
        result["tp"] = sharded_accuracy(["4 layers, h256, 2x128"], tp=2, fsdp=1)
    if args.only in (None, "fsdp"):
        result["fsdp"] = sharded_accuracy(["tiny (2 layers, h64), 2x32", "12 layers, h512, 1x512"], tp=1, fsdp=2)
    if args.only in (None, "script"):
        result["script"] = script()
    if args.only in (None, "graphs"):
        result["graphs"] = graphs()
    if args.json:
        print(json.dumps(result, indent=2))
        return
    mib = 1 << 20
    if "speed" in result:
        s = result["speed"]
        print(f"8B-shaped, 1 x 2048, bf16, AdamW: {s['seconds']:.1f} s ({s['cpu_seconds']:.1f} s CPU), peak RSS {s['peak_rss_bytes'] / (1 << 30):.2f} GiB, "
              f"planned peak {s['per_core']['peak_bytes'] / (1 << 30):.1f} GiB in {s['per_core']['phase']}")  # fmt: skip
        print({k: round(v / (1 << 30), 2) for k, v in s["per_core"]["categories"].items()})
    if "table" in result:
        t = result["table"]
        print(
            f"8B-shaped layout table on trn2: {t['seconds']:.1f} s ({t['cpu_seconds']:.1f} s CPU), exit {t['exit_code']}"
        )
        for row in t["layouts"]["rows"]:
            plain, ckpt = row["plain"], row["checkpointed"]
            print(f"| {row['tp']} | {row['fsdp']} | {row['cores']} | {plain['peak_bytes'] / (1 << 30):.2f} ({plain['phase']}) | "
                  f"{ckpt['peak_bytes'] / (1 << 30):.2f} ({ckpt['phase']}) |")  # fmt: skip
        print("smallest:", t["layouts"]["smallest"], "checkpointed:", t["layouts"]["smallest_checkpointed"])
    for name in ("script", "graphs"):
        if name in result:
            r = result[name]
            figures = (
                f"planned peak {r['per_core']['peak_bytes'] / (1 << 30):.2f} GiB (plan MODEL: "
                f"{r['plan_model_peak_bytes'] / (1 << 30):.2f} GiB)"
                if name == "script"
                else f"{r['graphs']['count']} graph(s), ops {[g['ops'] for g in r['graphs']['graphs']]}"
            )
            print(f"8B-shaped {name}: {r['seconds']:.1f} s ({r['cpu_seconds']:.1f} s CPU), peak RSS "
                  f"{r['peak_rss_bytes'] / (1 << 30):.2f} GiB, exit {r['exit_code']}, {figures}")  # fmt: skip
    for row in [*result.get("tp", []), *result.get("fsdp", [])]:
        cells = " | ".join(
            f"{row['planned'][p] / mib:.2f} / {' , '.join(f'{m[p] / mib:.2f}' for m in row['measured'])}"
            for p in ("forward", "backward", "optimizer")
        )
        released = f" ({100 * row['worst_error_released']:.2f}% released)"
        print(f"| {row['layout']} | {row['model']} | {row['autocast']} | {'on' if row['checkpointing'] else 'off'} | "
              f"{cells} | {100 * row['worst_error']:.2f}%{released} |")  # fmt: skip
    for row in result.get("accuracy", []):
        cells = " | ".join(
            f"{row['planned'][p] / mib:.1f} / {row['measured'][p] / mib:.1f}"
            for p in ("forward", "backward", "optimizer")
        )
        print(f"| {row['model']} | {row['autocast']} | {'on' if row['checkpointing'] else 'off'} | {cells} | "
              f"{100 * row['worst_error']:.2f}% |")  # fmt: skip


if __name__ == "__main__":
    main()
