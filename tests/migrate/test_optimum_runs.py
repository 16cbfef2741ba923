"""Migrated Optimum Neuron fixtures run on the simulated Neuron device and behave as on CPU.

The originals cannot run anywhere here (optimum-neuron needs transformers 4.57 and torch_xla),
so the reference is the same tiny model run with plain transformers on CPU: inference must give
the same greedy tokens (or classifier logits) in the same dtype; training must log finite losses
and save a checkpoint that loads on CPU and differs from the starting weights. Every run goes
through the shim on the simulator with a probe that fails a run which never used the device
(`fixture_runs.run_script`).

The five scripts are separate Python processes; they start together and run two at a time
(the machine has two cores), so the module costs about half of running them one by one.
"""

from __future__ import annotations

import json
import math
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="runs migrated scripts on the simulator: needs torch")

from fixture_runs import (  # noqa: E402  (imported after the torch skip)
    assert_adapter_trained_on_cpu,
    assert_trained_on_cpu,
    losses,
    run_script,
)

# five migrated scripts run in fresh processes, started together by one module fixture: one pytest worker runs them
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("optimum_runs")]

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "optimum"
NEW_TOKENS = 8


def _prompt(workdir: Path) -> str:
    return " ".join((workdir / "train.txt").read_text().split()[:5])


def _arguments(workdir: Path) -> dict[str, list[str]]:
    """Command lines per fixture, as `fixtures/optimum/README.md` documents them."""
    prompt = _prompt(workdir)
    return {
        "generate_export": [
            "--model",
            "model",
            "--prompt",
            prompt,
            "--sequence_length",
            "256",
            "--max_new_tokens",
            str(NEW_TOKENS),
            "--output_file",
            "optimum-tokens.txt",
        ],
        "text_classification": ["--model", "classifier", "--text", prompt, "--output_file", "optimum-labels.json"],
        "run_clm": [
            "--model_name_or_path",
            "model",
            "--train_file",
            "train.txt",
            "--output_dir",
            "optimum-clm",
            "--do_train",
            "--max_steps",
            "2",
            "--per_device_train_batch_size",
            "2",
            "--block_size",
            "32",
            "--logging_steps",
            "1",
            "--save_strategy",
            "no",
        ],
        "finetune_qwen3_sft": [
            "--model_id",
            "model",
            "--dataset",
            "train.jsonl",
            "--output_dir",
            "optimum-sft",
            "--max_steps",
            "2",
            "--per_device_train_batch_size",
            "2",
            "--max_seq_length",
            "64",
            "--logging_steps",
            "1",
            "--bf16",
            "--save_strategy",
            "no",
        ],
        "accelerate_loop": [
            "--model_name_or_path",
            "model",
            "--train_file",
            "train.txt",
            "--output_dir",
            "optimum-loop",
            "--max_steps",
            "2",
            "--batch_size",
            "2",
            "--block_size",
            "32",
        ],
    }


@pytest.fixture(scope="module")
def runs(run_workdir: Path) -> dict[str, Future[str]]:
    """Start every migrated fixture on the simulator; each test waits for its own run's stdout."""
    from transformers import AutoModelForSequenceClassification

    # A classification head saved once, so the simulator run and the CPU reference share its weights.
    torch.manual_seed(0)
    AutoModelForSequenceClassification.from_pretrained(run_workdir / "model").save_pretrained(
        run_workdir / "classifier"
    )
    (run_workdir / "classifier").joinpath("tokenizer.json").write_bytes(
        (run_workdir / "model" / "tokenizer.json").read_bytes()
    )
    (run_workdir / "classifier").joinpath("tokenizer_config.json").write_bytes(
        (run_workdir / "model" / "tokenizer_config.json").read_bytes()
    )
    pool = ThreadPoolExecutor(max_workers=2)
    futures = {
        name: pool.submit(run_script, FIXTURES / f"{name}.expected.py", args, run_workdir, True)
        for name, args in _arguments(run_workdir).items()
    }
    pool.shutdown(wait=False)
    return futures


def _cpu_greedy(model_dir: Path, prompt: str) -> list[int]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.bfloat16)
    inputs = tokenizer(prompt, return_tensors="pt")
    out = model.generate(**inputs, max_new_tokens=NEW_TOKENS, do_sample=False)
    return out[0, inputs.input_ids.shape[1] :].tolist()


def test_export_inference_gives_the_cpu_tokens(runs: dict[str, Future[str]], run_workdir: Path) -> None:
    runs["generate_export"].result()
    tokens = [int(t) for t in (run_workdir / "optimum-tokens.txt").read_text().split()]
    assert tokens == _cpu_greedy(run_workdir / "model", _prompt(run_workdir))


def test_encoder_classification_matches_cpu(runs: dict[str, Future[str]], run_workdir: Path) -> None:
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    runs["text_classification"].result()
    [result] = json.loads((run_workdir / "optimum-labels.json").read_text())
    tokenizer = AutoTokenizer.from_pretrained(run_workdir / "classifier")
    model = AutoModelForSequenceClassification.from_pretrained(run_workdir / "classifier", dtype=torch.bfloat16)
    inputs = tokenizer(result["text"], return_tensors="pt", padding="max_length", max_length=128, truncation=True)
    with torch.no_grad():
        logits = model(**inputs).logits[0].float()
    assert result["label"] == model.config.id2label[int(logits.argmax())]
    torch.testing.assert_close(torch.tensor(result["logits"]), logits, atol=2e-2, rtol=2e-2)


@pytest.mark.parametrize("name, output", [("run_clm", "optimum-clm"), ("accelerate_loop", "optimum-loop")])
def test_training_saves_a_cpu_loadable_checkpoint(
    runs: dict[str, Future[str]], run_workdir: Path, name: str, output: str
) -> None:
    found = losses(runs[name].result())
    assert found and all(math.isfinite(loss) for loss in found)
    assert_trained_on_cpu(run_workdir / output, run_workdir / "model")


def test_sft_saves_a_cpu_loadable_adapter(runs: dict[str, Future[str]], run_workdir: Path) -> None:
    found = losses(runs["finetune_qwen3_sft"].result())
    assert found and all(math.isfinite(loss) for loss in found)
    assert_adapter_trained_on_cpu(run_workdir / "optimum-sft", run_workdir / "model")
