"""Local text for tiny models: a word list, sentences drawn from it and a word-level tokenizer.

Both ``neuroncompat.testing`` (causal LMs, datasets) and ``neuroncompat.tiny_pipelines`` (the T5
tokenizer of the tiny Flux pipeline) need the same tokenizer; it lives here so neither imports the
other. Nothing here touches the hub, so it works with ``HF_HUB_OFFLINE=1``.
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
