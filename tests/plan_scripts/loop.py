"""A plain PyTorch training loop, as a user writes one: ``python loop.py MODEL_DIR BATCH SEQ [--autocast]
[--read-loss]``.

tests/test_plan_script.py plans it with ``neuroncompat plan -- python loop.py ...``; run for real it trains the
model it loads. ``--autocast`` runs the forward under bf16 autocast; ``--read-loss`` reads the loss's value before
backward to decide what to do, which the plan cannot follow.
"""

import sys

import torch
from transformers import AutoModelForCausalLM


def main() -> None:
    model_dir, batch, seq = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    model.to("cpu")
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for step in range(3):
        ids = torch.randint(0, model.config.vocab_size, (batch, seq))
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled="--autocast" in sys.argv):
            loss = model(input_ids=ids, labels=ids).loss
        if "--read-loss" in sys.argv and loss.item() > 100:
            continue
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        print(f"step {step}: loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
