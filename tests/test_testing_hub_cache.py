"""The offline hub cache in ``neuroncompat.testing``: hub names resolve to the tiny stand-ins, offline.

Public example scripts (accelerate's NLP examples) load ``bert-base-cased`` and ``nyu-mll/glue`` ``mrpc`` by
name; the cache lets them run unmodified with ``HF_HUB_OFFLINE=1``. Each check runs in a fresh interpreter,
because the Hugging Face libraries read ``HF_HOME`` when they are imported.
"""

from __future__ import annotations

import importlib.util

import pytest

from neuroncompat.testing import build_glue_mrpc_cache
from tests.helpers import run_python


@pytest.mark.slow  # a fresh interpreter importing datasets and transformers
def test_hub_names_load_offline_from_the_cache(tmp_path):
    hf_home = build_glue_mrpc_cache(tmp_path / "hf", rows=8)
    loaded = run_python(
        """
        from datasets import load_dataset
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        data = load_dataset("nyu-mll/glue", "mrpc")
        tokenizer = AutoTokenizer.from_pretrained("bert-base-cased")
        model = AutoModelForSequenceClassification.from_pretrained("bert-base-cased")
        pair = tokenizer(data["train"][0]["sentence1"], data["train"][0]["sentence2"])
        print(data["train"].num_rows, data["validation"].num_rows, data["train"].features["label"].names)
        print(type(model).__name__, model.config.num_labels, tokenizer.unk_token_id not in pair["input_ids"])
        print(sorted(set(pair["token_type_ids"])))
        """,
        env={"HF_HOME": str(hf_home), "HF_HUB_OFFLINE": "1"},
    )
    assert loaded.returncode == 0, loaded.stderr[-2000:]
    lines = loaded.stdout.splitlines()
    assert lines[0] == "8 4 ['not_equivalent', 'equivalent']"
    assert lines[1] == "BertForSequenceClassification 2 True"  # every word is in the WordPiece vocabulary
    assert lines[2] == "[0, 1]"  # a sentence pair gets two segments, as with the real bert-base-cased


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("evaluate") is None, reason="needs evaluate (not a dependency)")
def test_glue_metric_loads_offline_and_scores(tmp_path):
    hf_home = build_glue_mrpc_cache(tmp_path / "hf", rows=8)
    scored = run_python(
        """
        import evaluate

        metric = evaluate.load("glue", "mrpc")
        metric.add_batch(predictions=[1, 0, 1, 1], references=[1, 0, 0, 1])
        print(metric.compute())
        """,
        env={"HF_HOME": str(hf_home), "HF_HUB_OFFLINE": "1"},
    )
    assert scored.returncode == 0, scored.stderr[-2000:]
    assert scored.stdout.strip() == "{'accuracy': 0.75, 'f1': 0.8}"
