"""A LoRA fine-tuning loop, as a user writes one with peft: ``python lora.py MODEL_DIR BATCH SEQ``.

tests/test_plan_script.py plans it with ``neuroncompat plan -- python lora.py ...``; run for real it trains rank-8
adapters on q_proj and v_proj over the frozen model it loads.
"""

import sys

import torch
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM


def main() -> None:
    model_dir, batch, seq = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    model = get_peft_model(model, LoraConfig(r=8, target_modules=["q_proj", "v_proj"]))
    model.print_trainable_parameters()
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for step in range(3):
        ids = torch.randint(0, model.config.vocab_size, (batch, seq))
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        print(f"step {step}: loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
