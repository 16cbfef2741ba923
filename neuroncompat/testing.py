"""Small local models, tokenizers and datasets for dry runs and tests, with no hub access.

A dry run on the simulator checks placement, dtypes and graph counts, none of which needs real
weights: a model of the same architecture with a few layers of width 64 takes the same code
paths in transformers and TRL. Everything here is built from a config and saved to a local
directory, so it works with ``HF_HUB_OFFLINE=1``.
"""

from __future__ import annotations

import random
from pathlib import Path

_WORDS = (
    "the neuron core compiles a graph for every new shape so pad your batches to a multiple "
    "of one hundred twenty eight and keep the cache static while the model learns to answer "
    "short questions about trainium training inference tokens loss steps and checkpoints"
).split()

SPECIAL_TOKENS = {"pad_token": "<pad>", "eos_token": "</s>", "bos_token": "<s>", "unk_token": "<unk>"}

# Qwen3-style chat template, enough for TRL's conversational datasets.
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def sentences(count: int, min_words: int = 3, max_words: int = 40, seed: int = 0) -> list[str]:
    """``count`` sentences with lengths spread over ``min_words..max_words``."""
    rng = random.Random(seed)
    return [" ".join(rng.choice(_WORDS) for _ in range(rng.randint(min_words, max_words))) for _ in range(count)]


def build_tokenizer(path: str | Path) -> Path:
    """Train a small word-level tokenizer and save it as a ``PreTrainedTokenizerFast``."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel(unk_token=SPECIAL_TOKENS["unk_token"]))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    specials = list(SPECIAL_TOKENS.values()) + ["<|im_start|>", "<|im_end|>"]
    trainer = trainers.WordLevelTrainer(special_tokens=specials)
    corpus = sentences(200) + ["user assistant system : ? ! . , 0 1 2 3 4 5 6 7 8 9"]
    tok.train_from_iterator(corpus, trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, **SPECIAL_TOKENS)
    fast.chat_template = CHAT_TEMPLATE
    path = Path(path)
    fast.save_pretrained(path)
    return path


def build_causal_lm(path: str | Path, arch: str = "qwen3", layers: int = 2, seed: int = 0) -> Path:
    """Save a tokenizer and a randomly initialised causal LM (hidden 64) to ``path``."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig, PreTrainedConfig, Qwen3Config

    path = Path(path)
    build_tokenizer(path)
    tokenizer = AutoTokenizer.from_pretrained(path)
    common = dict(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=tokenizer.bos_token_id,
        tie_word_embeddings=False,
    )
    config: PreTrainedConfig
    if arch == "qwen3":
        config = Qwen3Config(head_dim=16, **common)
    elif arch == "llama":
        config = LlamaConfig(**common)
    else:
        raise ValueError(f"unknown arch {arch!r}: expected 'qwen3' or 'llama'")
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(path)
    return path


def fit_causal_lm(path: str | Path, texts: list[str], steps: int = 60, lr: float = 3e-3, seed: int = 0) -> Path:
    """Train the model saved at ``path`` on ``texts`` until it has memorised them; save it back.

    A randomly initialised model's next-token logits are nearly tied, so greedy decoding flips
    under any change of precision (fp32 on CPU vs bf16 on Neuron) and no comparison of tokens
    means anything. A model that has memorised its texts continues a prefix of one of them with
    wide logit margins, and gives the same greedy tokens in fp32 and bf16.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = Path(path)
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path)
    batch = tokenizer(texts, return_tensors="pt", padding=True)
    labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
    torch.manual_seed(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    model.train()
    for _ in range(steps):
        loss = model(**batch, labels=labels).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    model.save_pretrained(path)
    return path
