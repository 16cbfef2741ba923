"""The TRL Trainium guide's compile-count scenarios, as scripts to dry-run with a tiny local model.

The guide's two claims about Neuron compilations, made checkable on a laptop:

- **SFT**: varied-length data padded to multiples of 128 (TRL's "auto" on Neuron) compiles at
  most ``max_length / 128`` graphs; with ``pad_to_multiple_of=None`` every new length is a new
  graph ("130 s with the default, 260 s with None" for 20 steps on one NeuronCore).
- **GRPO**: generation with a static KV cache decodes in a fixed shape, so only a few sizes are
  compiled; with the default dynamic cache the decode input grows by one token per step, and
  every step is a new shape. TRL generates with ``disable_compile=True``, so these are eager
  shapes (compiled op by op on Neuron), which ``neuroncompat simulate`` counts too.

Run one under the simulator and read the report::

    neuroncompat simulate -- python -m neuroncompat.simulate.scenarios sft --pad-to-multiple-of 128
    neuroncompat simulate -- python -m neuroncompat.simulate.scenarios grpo --cache dynamic

They need a Neuron device (the trainers ask for bf16 on it): run directly where there is none, a
scenario stops at once with one line saying to run it under ``neuroncompat simulate``.

Each scenario prints one JSON line with what it ran (for SFT, the batch lengths trained on: what
the graph count should match). ``tests/test_simulate_scenarios.py`` asserts the counts and
``bench/bench_simulate_compiles.py`` reports them. The model is
``neuroncompat.testing.build_causal_lm`` (tiny qwen3) unless ``--model`` names a local one.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any, cast

from neuroncompat.detect import detect_torch_neuronx

SFT_MAX_LENGTH = 256
SFT_STEPS = 3
GRPO_STEPS = 2
GRPO_COMPLETION_LENGTH = 8


def sft(
    model: str | Path,
    output_dir: str | Path,
    pad_to_multiple_of: int | None,
    steps: int = SFT_STEPS,
    max_length: int = SFT_MAX_LENGTH,
) -> dict[str, Any]:
    """SFT with ``torch_compile=True``, batch 2, on sentences of 3 to about ``max_length`` words.

    Returns the distinct batch lengths the steps trained on (what the graph count should match).
    Keep ``steps`` within Dynamo's recompile limit (8) so that every shape is compiled rather than
    run eagerly. The data seed gives the default run batches in both 128-buckets of 256 tokens.
    """
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    from neuroncompat.testing import sentences

    args = SFTConfig(
        output_dir=str(output_dir),
        max_steps=steps,
        per_device_train_batch_size=2,
        max_length=max_length,
        pad_to_multiple_of=pad_to_multiple_of,
        torch_compile=True,
        report_to=[],
        save_strategy="no",
        seed=3,
    )
    data = Dataset.from_dict({"text": sentences(4 * steps, min_words=3, max_words=max_length - 16, seed=4)})
    trainer = SFTTrainer(model=str(model), args=args, train_dataset=data)
    trainer.train()
    lengths = set()
    for step, batch in enumerate(trainer.get_train_dataloader()):
        if step == steps:
            break
        lengths.add(batch["input_ids"].shape[1])
    return {
        "scenario": "sft",
        "pad_to_multiple_of": pad_to_multiple_of,
        "max_length": max_length,
        "steps": steps,
        "batch_lengths": sorted(lengths),
    }


def _reward_length(completions: list[str], **_: Any) -> list[float | None]:
    return [len(c) / 10 for c in completions]


def grpo(model: str | Path, output_dir: str | Path, cache: str, steps: int = GRPO_STEPS) -> dict[str, Any]:
    """GRPO, 2 generations of ``GRPO_COMPLETION_LENGTH`` tokens per prompt, with a static or dynamic cache.

    ``min_new_tokens`` makes every generation decode the full length, so the counts do not depend
    on when the random model happens to emit EOS.
    """
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from neuroncompat.testing import sentences

    args = GRPOConfig(
        output_dir=str(output_dir),
        max_steps=steps,
        per_device_train_batch_size=2,
        num_generations=2,
        max_completion_length=GRPO_COMPLETION_LENGTH,
        cache_implementation="static" if cache == "static" else None,
        generation_kwargs={"min_new_tokens": GRPO_COMPLETION_LENGTH},
        report_to=[],
        save_strategy="no",
        seed=3,
    )
    trainer = GRPOTrainer(
        model=str(model),
        reward_funcs=_reward_length,
        args=args,
        train_dataset=Dataset.from_dict({"prompt": sentences(8, 2, 6)}),
    )
    trainer.train()
    return {
        "scenario": "grpo",
        "cache": cache,
        "steps": steps,
        "max_completion_length": GRPO_COMPLETION_LENGTH,
        "pad_to_multiple_of": cast(GRPOConfig, trainer.args).pad_to_multiple_of,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m neuroncompat.simulate.scenarios", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--model", help="local causal LM directory (default: a tiny qwen3 built in a temporary directory)"
    )
    scenarios = parser.add_subparsers(dest="scenario", required=True)
    sft_parser = scenarios.add_parser("sft", help="SFT with torch_compile on varied-length data")
    sft_parser.add_argument("--pad-to-multiple-of", type=lambda v: None if v.lower() == "none" else int(v), default=128)
    sft_parser.add_argument("--steps", type=int, default=SFT_STEPS)
    sft_parser.add_argument("--max-length", type=int, default=SFT_MAX_LENGTH)
    grpo_parser = scenarios.add_parser("grpo", help="GRPO generation with a static or dynamic KV cache")
    grpo_parser.add_argument("--cache", choices=("static", "dynamic"), default="static")
    options = parser.parse_args(argv)
    if detect_torch_neuronx().kind not in ("native", "simulated"):
        parser.exit(
            2,
            (
                f"{parser.prog}: no Neuron device here; dry-run the scenario on the simulated one: "
                f"neuroncompat simulate -- python -m neuroncompat.simulate.scenarios {' '.join(argv or sys.argv[1:])}\n"
            ),
        )
    with tempfile.TemporaryDirectory(prefix="neuroncompat-scenario-") as scratch:
        model = options.model
        if model is None:
            from neuroncompat.testing import build_causal_lm

            model = build_causal_lm(Path(scratch) / "model")
        if options.scenario == "sft":
            result = sft(model, Path(scratch) / "out", options.pad_to_multiple_of, options.steps, options.max_length)
        else:
            result = grpo(model, Path(scratch) / "out", options.cache)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
