"""A transformers Trainer script: ``python trainer.py MODEL_DIR BATCH SEQ OUTPUT_DIR``.

tests/test_plan_script.py plans it with ``neuroncompat plan -- python trainer.py ...``; run for real it trains
the model it loads on a few random sequences.
"""

import sys

import torch
from transformers import AutoModelForCausalLM, Trainer, TrainingArguments


def main() -> None:
    model_dir, batch, seq, output_dir = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype="auto")
    vocab = model.config.vocab_size
    ids = torch.randint(0, vocab, (4 * batch, seq))
    dataset = [{"input_ids": row, "labels": row} for row in ids]
    args = TrainingArguments(
        output_dir=output_dir,
        per_device_train_batch_size=batch,
        max_steps=2,
        optim="adamw_torch",
        use_cpu=True,
        report_to=[],
        save_strategy="no",
        logging_steps=1,
    )
    Trainer(model=model, args=args, train_dataset=dataset).train()


if __name__ == "__main__":
    main()
