"""NM511: each `NeuronModelFor*` class is swapped for the transformers auto class of the same task
(and Optimum's `pipeline` for transformers'), since the native model loads the same checkpoint onto the NeuronCore.
"""

from __future__ import annotations

import libcst as cst

from migrate.context import FileContext
from migrate.registry import Rule
from migrate.rules.legacy_names import resolve, swap

RULES: tuple[Rule, ...] = (
    Rule(
        id="NM511",
        name="neuron-model-classes",
        safety="unsafe",
        safety_reason="export shapes and compiler options are dropped; the model runs in the export dtype on `neuron`",
        summary='Inference `NeuronModelForXxx.from_pretrained(..., export=True, ...)` -> `AutoModelForXxx` on `device_map="neuron"` in bf16.',
        rationale="Every traced or NxD Optimum model class has a transformers auto class that loads "
        "the same checkpoint; TorchNeuron compiles it on first use, so `export`, the export shapes "
        "and the compiler arguments (`num_cores`, `auto_cast`, `optlevel`, ...) are dropped. The "
        "dtype follows `auto_cast_type` (bf16 unless fp32 was asked for). A model split over "
        "`num_cores`/`tensor_parallel_size` > 1 runs however it is launched: under torchrun "
        "`distributed_config=DistributedConfig(tp_size=<WORLD_SIZE>)` shards it over the processes (one per "
        'core; the mesh must be the world size), under plain `python` it loads whole on `device_map="neuron"`; '
        "TODO NM917 says how to launch it over N cores. Resolved by import path: "
        "the training `NeuronModelForCausalLM` is NM506's.",
        before="import torch\nfrom optimum.neuron import NeuronModelForSequenceClassification\n"
        'model = NeuronModelForSequenceClassification.from_pretrained(model_id, export=True, auto_cast="matmul")\n',
        after="import torch\nfrom transformers import AutoModelForSequenceClassification\n"
        'model = AutoModelForSequenceClassification.from_pretrained(\n    model_id,\n    device_map="neuron",\n'
        "    dtype=torch.bfloat16,\n)\n",
    ),
)

# Optimum inference class -> (auto class, kind); kind decides how the export shapes survive.
_CLASSES: dict[str, tuple[str, str]] = {
    "NeuronModelForCausalLM": ("AutoModelForCausalLM", "decoder"),
    "NeuronModelForSeq2SeqLM": ("AutoModelForSeq2SeqLM", "seq2seq"),
    "NeuronModelForImageTextToText": ("AutoModelForImageTextToText", "seq2seq"),
    "NeuronWhisperForConditionalGeneration": ("AutoModelForSpeechSeq2Seq", "seq2seq"),
    "NeuronModelForFeatureExtraction": ("AutoModel", "encoder"),
    "NeuronModelForEmbedding": ("AutoModel", "encoder"),
    "NeuronBertModel": ("AutoModel", "encoder"),
    "NeuronModelForMaskedLM": ("AutoModelForMaskedLM", "encoder"),
    "NeuronBertForMaskedLM": ("AutoModelForMaskedLM", "encoder"),
    "NeuronModelForQuestionAnswering": ("AutoModelForQuestionAnswering", "encoder"),
    "NeuronBertForQuestionAnswering": ("AutoModelForQuestionAnswering", "encoder"),
    "NeuronModelForSequenceClassification": ("AutoModelForSequenceClassification", "encoder"),
    "NeuronBertForSequenceClassification": ("AutoModelForSequenceClassification", "encoder"),
    "NeuronModelForTokenClassification": ("AutoModelForTokenClassification", "encoder"),
    "NeuronBertForTokenClassification": ("AutoModelForTokenClassification", "encoder"),
    "NeuronModelForMultipleChoice": ("AutoModelForMultipleChoice", "encoder"),
    "NeuronBertForMultipleChoice": ("AutoModelForMultipleChoice", "encoder"),
    "NeuronCLIPModel": ("AutoModel", "vision"),
    "NeuronModelForImageClassification": ("AutoModelForImageClassification", "vision"),
    "NeuronCLIPForImageClassification": ("AutoModelForImageClassification", "vision"),
    "NeuronModelForSemanticSegmentation": ("AutoModelForSemanticSegmentation", "vision"),
    "NeuronModelForObjectDetection": ("AutoModelForObjectDetection", "vision"),
    "NeuronYolosForObjectDetection": ("AutoModelForObjectDetection", "vision"),
    "NeuronModelForCTC": ("AutoModelForCTC", "vision"),
    "NeuronModelForAudioClassification": ("AutoModelForAudioClassification", "vision"),
    "NeuronModelForAudioFrameClassification": ("AutoModelForAudioFrameClassification", "vision"),
    "NeuronModelForXVector": ("AutoModelForAudioXVector", "vision"),
}
for _old, (_auto, _kind) in _CLASSES.items():
    swap(("optimum.neuron",), _old, "transformers", _auto, "NM511")
swap(("optimum.neuron",), "pipeline", "transformers", "pipeline", "NM515")


def _model_class(node: cst.BaseExpression, ctx: FileContext) -> str | None:
    """The Optimum inference class `node` names (resolved by import path), or None."""
    qualified = ctx.qualify(node)
    found = resolve(qualified)
    if found is None or found.rule_id != "NM511":
        return None
    return qualified.rpartition(".")[2]  # type: ignore[union-attr]
