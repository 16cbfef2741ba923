"""NM501/NM502 (and the swaps of NM504-NM508): every Optimum Neuron training class is swapped for its
native transformers, TRL, accelerate or peft class, since optimum-neuron cannot be installed next to the native
stack; the import rewrite itself is `legacy_imports`'.
"""

from __future__ import annotations

from migrate.registry import Rule
from migrate.rules.legacy_names import swap

RULES: tuple[Rule, ...] = (
    Rule(
        id="NM501",
        name="optimum-trainer",
        safety="unsafe",
        safety_reason="transformers' own classes replace Optimum's, whose Neuron-specific steps and defaults no "
        "longer apply",
        summary="`NeuronTrainer`, `NeuronTrainingArguments`, `Seq2Seq*`, `NeuronHfArgumentParser` -> transformers.",
        rationale="Up to 0.3 these were thin subclasses of the transformers classes; from 0.4 they "
        "are standalone copies. transformers 5 runs on Neuron itself (`TrainingArguments` picks "
        "`neuron:0`, accelerate uses the `neuron` backend), so the native classes replace them, "
        "aliases included (`NeuronTrainer as Trainer`). Unused `optimum.neuron` imports go. "
        "Defaults that differ and are kept: `optim` (Optimum `adamw_torch`, native "
        "`adamw_torch_fused`) and `report_to`.",
        before="from optimum.neuron import NeuronTrainer, NeuronTrainingArguments\n"
        'args = NeuronTrainingArguments(output_dir="out")\ntrainer = NeuronTrainer(model=model, args=args)\n',
        after="from transformers import Trainer, TrainingArguments\n"
        'args = TrainingArguments(output_dir="out")\ntrainer = Trainer(model=model, args=args)\n',
    ),
    Rule(
        id="NM502",
        name="optimum-sft",
        safety="safe",
        summary="`NeuronSFTTrainer`/`NeuronSFTConfig` -> `trl.SFTTrainer`/`SFTConfig`, Optimum's defaults written out.",
        rationale="`NeuronSFTConfig` took four defaults from `NeuronTrainingArguments` that TRL 1.x "
        "sets differently (`learning_rate` 5e-5 vs 2e-5, `logging_steps` 500 vs 10, "
        "`gradient_checkpointing` False vs True, `bf16` False vs auto), so a bare rename would "
        "silently change training; the ones a call does not set are added. A call that spreads "
        "`**training_args.to_dict()` already carries them. `NeuronORPOTrainer`/`NeuronORPOConfig` "
        "-> `trl.experimental.orpo`.",
        before='from optimum.neuron import NeuronSFTConfig\nargs = NeuronSFTConfig(output_dir="out")\n',
        after='from trl import SFTConfig\nargs = SFTConfig(\n    output_dir="out",\n    learning_rate=5e-5,\n'
        "    logging_steps=500,\n    gradient_checkpointing=False,\n    bf16=False,\n)\n",
    ),
)

_ON = ("optimum.neuron",)
_TRAINING = ("optimum.neuron.models.training",)
for _old, _module, _new in (
    ("NeuronTrainer", "transformers", "Trainer"),
    ("NeuronTrainingArguments", "transformers", "TrainingArguments"),
    ("Seq2SeqNeuronTrainer", "transformers", "Seq2SeqTrainer"),
    ("Seq2SeqNeuronTrainingArguments", "transformers", "Seq2SeqTrainingArguments"),
    ("NeuronHfArgumentParser", "transformers", "HfArgumentParser"),
):
    swap(_ON, _old, _module, _new, "NM501")
for _old, _module, _new in (
    ("NeuronSFTTrainer", "trl", "SFTTrainer"),
    ("NeuronSFTConfig", "trl", "SFTConfig"),
    ("NeuronORPOTrainer", "trl.experimental.orpo", "ORPOTrainer"),
    ("NeuronORPOConfig", "trl.experimental.orpo", "ORPOConfig"),
):
    swap(_ON, _old, _module, _new, "NM502")
swap(_ON, "NeuronAccelerator", "accelerate", "Accelerator", "NM504")
swap(_ON, "NeuronPartialState", "accelerate", "PartialState", "NM504")
swap(_ON, "NeuronAcceleratorState", "accelerate.state", "AcceleratorState", "NM504")
swap(_ON, "TrainingNeuronConfig", "transformers.distributed", "DistributedConfig", "NM505")
swap(_ON, "ModelParallelismPlugin", "transformers.distributed", "DistributedConfig", "NM505")
swap(_TRAINING, "NeuronModelForCausalLM", "transformers", "AutoModelForCausalLM", "NM506")
swap(_TRAINING, "NeuronModel", "transformers", "AutoModel", "NM506")
for _arch in ("LlamaForCausalLM", "Qwen3ForCausalLM", "GraniteForCausalLM"):
    swap(_TRAINING, _arch, "transformers", _arch, "NM506")
swap(_ON, "lazy_load_for_parallelism", None, None, "NM507")
swap(_ON, "get_peft_model", "peft", "get_peft_model", "NM508")
swap(_ON, "NeuronPeftModel", "peft", "PeftModel", "NM508")
swap(_ON, "NeuronPeftModelForCausalLM", "peft", "PeftModelForCausalLM", "NM508")
for _helper in (
    "is_main_worker",
    "is_logging_process",
    "is_main_worker_for_metrics",
    "is_precompilation",
    "patch_transformers_for_neuron_sdk",
    "MixedPrecisionConfig",
):
    swap(_ON, _helper, None, None, "NM508")
