"""Fine-tune a causal LM for a few steps on CUDA, then sample from it (a typical CUDA-era script)."""

import argparse

import torch
from torch.utils.data import DataLoader
from transformers import AutoModelForCausalLM, AutoTokenizer, DataCollatorForLanguageModeling

parser = argparse.ArgumentParser()
parser.add_argument("--model_name_or_path", required=True)
parser.add_argument("--device", default="cuda")
parser.add_argument("--steps", type=int, default=4)
parser.add_argument("--output_dir", default="finetuned")
args = parser.parse_args()

device = torch.device(args.device if torch.cuda.is_available() else "cpu")
tokenizer = AutoTokenizer.from_pretrained(args.model_name_or_path)
model = AutoModelForCausalLM.from_pretrained(args.model_name_or_path).to(device)

texts = [
    "the neuron core compiles a graph for every new shape",
    "pad your batches to a multiple of one hundred twenty eight",
    "keep the cache static while the model learns",
    "short questions about trainium training",
] * 4
features = [tokenizer(t) for t in texts]
loader = DataLoader(
    features, batch_size=2, shuffle=True, collate_fn=DataCollatorForLanguageModeling(tokenizer, mlm=False)
)

optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
scaler = torch.cuda.amp.GradScaler()
model.train()
for step, batch in enumerate(loader):
    if step == args.steps:
        break
    batch = {k: v.to(device) for k, v in batch.items()}
    with torch.autocast("cuda", dtype=torch.float16):
        loss = model(**batch).loss
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad()
    print(f"step {step} loss {loss.item():.4f} on {loss.device}")

model.eval()
inputs = tokenizer(["the neuron core"], return_tensors="pt").to(device)
with torch.no_grad():
    out = model.generate(**inputs, max_new_tokens=8, do_sample=False)
print("sample:", tokenizer.decode(out[0], skip_special_tokens=True))
model.save_pretrained(args.output_dir)
print("saved to", args.output_dir, "| max memory", torch.cuda.max_memory_allocated() // 2**20, "MiB")
