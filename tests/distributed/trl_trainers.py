"""TRL's GRPO, RLOO and Reward trainers, two steps each, on every rank of a 2-rank launch.

GRPO and RLOO gather each completion's reward (``[batch, 1]`` per rank) and the RewardTrainer
its metrics across ranks, so all three exercise gathers of non-flat tensors. The model is the
tiny local causal LM at ``argv[1]`` (built from a config); ``argv[2]`` is the output directory.
Each rank prints one JSON line with every loss each trainer logged, and its device.
"""

import json
import sys
from pathlib import Path

from datasets import Dataset
from transformers import AutoModelForSequenceClassification, AutoTokenizer
from trl import GRPOConfig, GRPOTrainer, RewardConfig, RewardTrainer, RLOOConfig, RLOOTrainer

import neuroncompat  # noqa: F401  (migrated scripts import it; each rank starts the simulator)

model_path, out = sys.argv[1], Path(sys.argv[2])
tokenizer = AutoTokenizer.from_pretrained(model_path)
words = ("a", "graph", "for", "every", "new", "shape", "so", "pad")
prompts = Dataset.from_list([{"prompt": f"the neuron core compiles {w}"} for w in words])
logging = dict(
    max_steps=2,
    per_device_train_batch_size=2,
    learning_rate=1e-3,
    report_to=[],
    logging_steps=1,
    save_strategy="no",
    seed=0,
)
common = dict(num_generations=2, max_completion_length=8, **logging)


def length_reward(completions: list[str], **kwargs: object) -> list[float]:
    return [float(len(c.split())) for c in completions]


def logged_losses(trainer: object) -> list[float]:
    return [float(row["loss"]) for row in trainer.state.log_history if "loss" in row]


result: dict[str, object] = {}
grpo = GRPOTrainer(
    model=model_path,
    reward_funcs=length_reward,
    args=GRPOConfig(output_dir=str(out / "grpo"), **common),
    train_dataset=prompts,
    processing_class=tokenizer,
)
grpo.train()
result.update(
    rank=grpo.accelerator.process_index,
    device=str(grpo.accelerator.device),
    grpo=logged_losses(grpo),
    param_device=str(next(grpo.model.parameters()).device),
)
rloo = RLOOTrainer(
    model=model_path,
    reward_funcs=length_reward,
    args=RLOOConfig(output_dir=str(out / "rloo"), **common),
    train_dataset=prompts,
    processing_class=tokenizer,
)
rloo.train()
result["rloo"] = logged_losses(rloo)
pairs = Dataset.from_list(
    [{"chosen": f"short answer {i}", "rejected": f"a much longer rejected answer number {i}"} for i in range(8)]
)
reward_model = AutoModelForSequenceClassification.from_pretrained(model_path, num_labels=1)
reward_model.config.pad_token_id = tokenizer.pad_token_id
reward = RewardTrainer(
    model=reward_model,
    args=RewardConfig(output_dir=str(out / "reward"), **logging),
    train_dataset=pairs,
    processing_class=tokenizer,
)
reward.train()
result["reward"] = logged_losses(reward)
result["steps"] = [grpo.state.global_step, rloo.state.global_step, reward.state.global_step]
print("RESULT " + json.dumps(result), flush=True)
