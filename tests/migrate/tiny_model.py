"""Build a tiny local Llama + fast tokenizer for running fixtures offline (no hub access)."""

from __future__ import annotations

from pathlib import Path

WORDS = "hello world the a cat dog sat on mat runs fast slow big small red blue".split()


def build_tiny_llama(path: Path) -> Path:
    """Save a 2-layer, 64-wide Llama and a word-level tokenizer to `path`; return `path`."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    vocab = {tok: i for i, tok in enumerate(["<pad>", "<s>", "</s>", "<unk>", *WORDS])}
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend, bos_token="<s>", eos_token="</s>", unk_token="<unk>", pad_token="<pad>"
    )
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(vocab), hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, intermediate_size=128, max_position_embeddings=256,
        pad_token_id=0, bos_token_id=1, eos_token_id=2,
    )
    LlamaForCausalLM(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def write_data(directory: Path) -> tuple[Path, Path]:
    """A text file (one sample per line) and a JSONL file with a "text" field."""
    import json
    import random

    rng = random.Random(0)
    lines = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 20))) for _ in range(32)]
    text = directory / "train.txt"
    text.write_text("\n".join(lines) + "\n")
    jsonl = directory / "train.jsonl"
    jsonl.write_text("".join(json.dumps({"text": line}) + "\n" for line in lines))
    return text, jsonl
