"""Small local models, tokenizers and datasets for dry runs and tests, with no hub access.

A dry run on the simulator checks placement, dtypes and graph counts, none of which needs real
weights: a model of the same architecture with a few layers of width 64 takes the same code
paths in transformers and TRL. Everything here is built from a config and saved to a local
directory, so it works with ``HF_HUB_OFFLINE=1``.
"""

from __future__ import annotations

import random
from pathlib import Path

# The tiny diffusion pipelines live in their own module; tests and dry runs import them from here too.
from neuroncompat.tiny_pipelines import (
    PIPELINE_KINDS as PIPELINE_KINDS,
)
from neuroncompat.tiny_pipelines import (
    build_clip_tokenizer as build_clip_tokenizer,
)
from neuroncompat.tiny_pipelines import (
    build_stable_diffusion as build_stable_diffusion,
)
from neuroncompat.tiny_pipelines import (
    build_tiny_pipeline as build_tiny_pipeline,
)
from neuroncompat.tiny_pipelines import (
    flux_pipeline as flux_pipeline,
)
from neuroncompat.tiny_pipelines import (
    qwenimage_pipeline as qwenimage_pipeline,
)
from neuroncompat.tiny_pipelines import (
    stable_diffusion_pipeline as stable_diffusion_pipeline,
)
from neuroncompat.tiny_pipelines import (
    stable_diffusion_xl_pipeline as stable_diffusion_xl_pipeline,
)
from neuroncompat.tiny_pipelines import (
    tiny_pipeline as tiny_pipeline,
)

# The word list, sentences and tokenizer live in tiny_text (tiny_pipelines needs them too).
from neuroncompat.tiny_text import _WORDS
from neuroncompat.tiny_text import CHAT_TEMPLATE as CHAT_TEMPLATE
from neuroncompat.tiny_text import SPECIAL_TOKENS as SPECIAL_TOKENS
from neuroncompat.tiny_text import build_tokenizer as build_tokenizer
from neuroncompat.tiny_text import sentences as sentences


def build_causal_lm(path: str | Path, arch: str = "qwen3", layers: int = 2, seed: int = 0, hidden: int = 64) -> Path:
    """Save a tokenizer and a randomly initialised causal LM (hidden 64 unless told) to ``path``.

    ``hidden`` sets the width (MLP twice as wide, 4 heads of ``hidden // 4``, 2 key/value heads):
    benchmarks use a wider model to see where per-op overhead stops mattering.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig, PreTrainedConfig, Qwen3Config

    path = Path(path)
    build_tokenizer(path)
    tokenizer = AutoTokenizer.from_pretrained(path)
    common = dict(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=2 * hidden,
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
        config = Qwen3Config(head_dim=hidden // 4, **common)
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


# --- An offline Hugging Face cache for scripts that hard-code hub names -------------------------------------------
#
# Public example scripts often name their model, data set and metric on the hub ("bert-base-cased",
# "nyu-mll/glue" "mrpc", evaluate's "glue"), so they cannot be pointed at a local path without editing them.
# Running them UNMODIFIED offline (HF_HUB_OFFLINE=1), as a new user would, needs those names already in the local
# Hugging Face cache. The helpers below put tiny stand-ins there under the hub names, in the cache's own layout,
# so tests and bench/bench_real_scripts.py can run such scripts as they are written.

_SNAPSHOT = "0" * 40  # the commit hash the stand-in snapshots are filed under


def cache_model(hf_home: str | Path, repo_id: str, source: str | Path) -> Path:
    """File the saved model/tokenizer directory ``source`` in ``hf_home``'s hub cache as ``repo_id``.

    With ``HF_HOME=hf_home`` and ``HF_HUB_OFFLINE=1``, ``from_pretrained(repo_id)`` then loads it, as it would a
    model downloaded earlier. Returns the snapshot directory.
    """
    import shutil

    repo = Path(hf_home) / "hub" / ("models--" + repo_id.replace("/", "--"))
    snapshot = repo / "snapshots" / _SNAPSHOT
    if snapshot.exists():
        shutil.rmtree(snapshot)
    shutil.copytree(source, snapshot)
    (repo / "refs").mkdir(parents=True, exist_ok=True)
    (repo / "refs" / "main").write_text(_SNAPSHOT)
    return snapshot


def _kernel_backend(variant: str) -> str:
    """The backend kernels' ``metadata.json`` names for a build variant directory."""
    if variant == "torch-universal":
        return "cuda"  # legacy universal builds are Triton, run on CUDA
    if variant.startswith("torch-") and "-" not in variant[len("torch-") :]:
        return variant[len("torch-") :]  # noarch: torch-neuron, torch-cpu, torch-xpu
    return "rocm" if "-rocm" in variant else "cuda"


def build_kernel_repo(path: str | Path, name: str, builds: dict[str, dict[str, str]]) -> Path:
    """Write a Hub kernel repo at ``path``: ``builds`` maps a build variant (``torch-neuron``,
    ``torch-universal``, ``torch29-cxx11-cu128-x86_64-linux``) to its files (name -> source).

    Each build gets the ``metadata.json`` kernels reads (``name`` in kernels' spelling, e.g.
    ``rmsnorm-neuron``; the backend follows the variant; a ``torch-neuron`` build depends on ``nki``,
    as Neuron builds do). The repo works as a local kernel (``get_local_kernel``,
    ``LocalLayerRepository``, ``KernelConfig(use_local_kernel=True)``) and, filed with
    :func:`cache_kernel`, as a Hub kernel offline.
    """
    import json

    root = Path(path)
    for variant, files in builds.items():
        build = root / "build" / variant
        build.mkdir(parents=True, exist_ok=True)
        for file, source in files.items():
            (build / file).write_text(source)
        backend = _kernel_backend(variant)
        metadata = {
            "name": name,
            "id": f"{name}_{variant}".replace("-", "_"),
            "version": 1,
            "license": "Apache-2.0",
            "backend": {"type": backend},
            "python-depends": ["nki"] if backend == "neuron" else [],
        }
        (build / "metadata.json").write_text(json.dumps(metadata))
    return root


def cache_kernel(hf_home: str | Path, repo_id: str, source: str | Path, version: int = 1) -> Path:
    """File the kernel repo ``source`` (:func:`build_kernel_repo`) in ``hf_home``'s hub cache as version
    ``version`` of ``repo_id``, so that ``get_kernel(repo_id, version=version)`` and ``has_kernel`` find it
    with ``HF_HUB_OFFLINE=1`` as a kernel downloaded earlier. Returns the snapshot directory."""
    import shutil

    repo = Path(hf_home) / "hub" / ("kernels--" + repo_id.replace("/", "--"))
    snapshot = repo / "snapshots" / _SNAPSHOT
    if snapshot.exists():
        shutil.rmtree(snapshot)
    shutil.copytree(source, snapshot)
    (repo / "refs").mkdir(parents=True, exist_ok=True)
    (repo / "refs" / f"v{version}").write_text(_SNAPSHOT)
    return snapshot


def build_bert_classifier(path: str | Path, seed: int = 0) -> Path:
    """Save a WordPiece BERT tokenizer and a tiny randomly initialised ``BertForSequenceClassification`` (2 labels).

    The stand-in for ``bert-base-cased`` in accelerate's examples: same architecture and tokenizer class
    (``token_type_ids`` for sentence pairs), hidden size 64, two layers.
    """
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizer

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    words = sorted(set(_WORDS) | set(".,?!0123456789"))
    vocab = {token: index for index, token in enumerate(specials + words)}
    tokenizer = BertTokenizer(vocab=vocab, do_lower_case=False)  # the tokenizers-backed class in transformers 5
    tokenizer.save_pretrained(path)
    config = BertConfig(
        vocab_size=len(specials) + len(words),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        max_position_embeddings=512,
    )
    config.num_labels = 2
    torch.manual_seed(seed)
    BertForSequenceClassification(config).save_pretrained(path)
    return path


def cache_dataset(
    hf_home: str | Path, repo_id: str, config_name: str, splits: dict[str, dict[str, list]], features=None
) -> Path:
    """File ``splits`` (split -> column -> values) in ``hf_home``'s datasets cache as ``repo_id``/``config_name``.

    With ``HF_HOME=hf_home`` and ``HF_HUB_OFFLINE=1``, ``datasets.load_dataset(repo_id, config_name)`` finds it
    as a data set prepared earlier (the ``cache`` builder's layout: ``dataset_info.json`` and one Arrow stream
    file per split). Returns the cache directory.
    """
    from datasets import Dataset, DatasetInfo, SplitDict, SplitInfo
    from datasets.arrow_writer import ArrowWriter
    from datasets.naming import camelcase_to_snakecase

    parts = repo_id.split("/")
    parts[-1] = camelcase_to_snakecase(parts[-1])
    directory = Path(hf_home) / "datasets" / "___".join(parts) / config_name / "0.0.0" / _SNAPSHOT[:16]
    directory.mkdir(parents=True, exist_ok=True)
    split_dict = SplitDict()
    for split, columns in splits.items():
        table = Dataset.from_dict(columns, features=features)
        features = table.features
        with ArrowWriter(path=str(directory / f"{parts[-1]}-{split}.arrow")) as writer:
            writer.write_table(table.data.table)
            rows, size = writer.finalize()
        split_dict.add(SplitInfo(name=split, num_bytes=size, num_examples=rows))
    info = DatasetInfo(features=features, config_name=config_name, dataset_name=parts[-1], splits=split_dict)
    info.write_to_directory(str(directory))
    return directory


# A classification metric module in evaluate's format: accuracy and F1 of integer labels, what evaluate's "glue"
# metric reports for MRPC. Written for the offline cache; evaluate imports it by the name it is filed under.
_CLASSIFICATION_METRIC = '''"""Accuracy and F1 of integer class labels (the offline stand-in filed by neuroncompat.testing)."""
import datasets
import evaluate


class Classification(evaluate.Metric):
    def _info(self):
        features = datasets.Features({"predictions": datasets.Value("int64"), "references": datasets.Value("int64")})
        return evaluate.MetricInfo(description=__doc__, citation="", inputs_description="", features=features)

    def _compute(self, predictions, references):
        pairs = list(zip(predictions, references))
        true_pos = sum(1 for p, r in pairs if p == 1 and r == 1)
        predicted, actual = sum(1 for p, _ in pairs if p == 1), sum(1 for _, r in pairs if r == 1)
        f1 = 2 * true_pos / (predicted + actual) if predicted + actual else 0.0
        return {"accuracy": sum(1 for p, r in pairs if p == r) / max(len(pairs), 1), "f1": f1}
'''


def cache_metric(hf_home: str | Path, name: str) -> Path:
    """File an accuracy/F1 classification metric in ``hf_home``'s evaluate module cache as ``name``.

    With ``HF_HOME=hf_home`` and ``HF_HUB_OFFLINE=1``, ``evaluate.load(name, config)`` (e.g. ``"glue"``,
    ``"mrpc"``) imports it as a metric script fetched earlier. Returns the module file.
    """
    root = Path(hf_home) / "modules" / "evaluate_modules"
    directory = root / "metrics" / f"evaluate-metric--{name}" / ("0" * 64)
    directory.mkdir(parents=True, exist_ok=True)
    for package in (root, root / "metrics", directory.parent, directory):
        (package / "__init__.py").touch()
    module = directory / f"{name}.py"
    module.write_text(_CLASSIFICATION_METRIC)
    return module


def build_glue_mrpc_cache(hf_home: str | Path, rows: int = 64, seed: int = 0) -> Path:
    """Fill ``hf_home`` with what accelerate's NLP examples load by hub name, tiny and offline.

    ``bert-base-cased`` (a tiny BERT classifier and its tokenizer), ``nyu-mll/glue`` ``mrpc`` (``rows`` train and
    ``rows // 2`` validation sentence pairs with labels and ``idx``) and evaluate's ``glue`` metric. Run the
    scripts with ``HF_HOME=hf_home HF_HUB_OFFLINE=1``. Returns ``hf_home``.
    """
    import tempfile

    from datasets import ClassLabel, Features, Value

    hf_home = Path(hf_home)
    with tempfile.TemporaryDirectory() as source:
        cache_model(hf_home, "bert-base-cased", build_bert_classifier(source, seed=seed))
    rng = random.Random(seed)

    def pairs(count: int, offset: int) -> dict[str, list]:
        first = sentences(count, 4, 24, seed=seed + offset)
        second = sentences(count, 4, 24, seed=seed + offset + 1)
        labels = [rng.randint(0, 1) for _ in range(count)]
        return {"sentence1": first, "sentence2": second, "label": labels, "idx": list(range(count))}

    features = Features(
        {
            "sentence1": Value("string"),
            "sentence2": Value("string"),
            "label": ClassLabel(names=["not_equivalent", "equivalent"]),
            "idx": Value("int32"),
        }
    )
    cache_dataset(
        hf_home, "nyu-mll/glue", "mrpc", {"train": pairs(rows, 0), "validation": pairs(rows // 2, 10)}, features
    )
    cache_metric(hf_home, "glue")
    return hf_home
