"""What a migration leaves for a reviewer: no import whose last use a rewrite removed, no `if` it emptied, one
branch where it made two identical, no comment over removed code, comments and print labels that follow a
rename (the `tidy` family and NM-rules that remove names).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from migrated import FIXTURES, migrate

# C1: a rule that replaces the last use of a removed name removes its import ------------------------


def test_c1_int8_preparation_drops_the_import_peft_removed():
    src = (
        "import torch\n"
        "from peft import LoraConfig, get_peft_model, prepare_model_for_int8_training\n"
        "from transformers import AutoModelForCausalLM\n\n"
        'if __name__ == "__main__":\n'
        '    model = AutoModelForCausalLM.from_pretrained("m", load_in_8bit=True)\n'
        "    model = prepare_model_for_int8_training(model)\n"
    )
    out = migrate(src)
    assert "from peft import LoraConfig, get_peft_model\n" in out
    assert "prepare_model_for_int8_training" not in out
    assert "model.enable_input_require_grads()" in out


def test_c1_an_import_still_read_elsewhere_stays():
    src = (
        "from peft import prepare_model_for_kbit_training\n\n"
        "def a(model):\n    model = prepare_model_for_kbit_training(model)\n    return model\n\n"
        "def b(model):\n    return prepare_model_for_kbit_training(model) if model else None\n"
    )
    assert "from peft import prepare_model_for_kbit_training\n" in migrate(src)


def test_c1_trl_trainers_moved_to_experimental_are_imported_from_there():
    """C1's class (a migrated script that dies at import): TRL 1.x moved ORPO/CPO/GKD/Online DPO out of `trl`."""
    src = (
        'import trl\nfrom trl import KTOConfig, ORPOConfig as OC, ORPOTrainer\n\ncpo = trl.CPOConfig(output_dir="o")\n'
    )
    out = migrate(src, "lib.py")
    assert "from trl import KTOConfig\nfrom trl.experimental.orpo import ORPOConfig as OC, ORPOTrainer\n" in out
    assert "from trl.experimental.cpo import CPOConfig\n" in out and 'cpo = CPOConfig(output_dir="o")' in out


def test_c1_the_moved_trl_names_are_where_the_installed_trl_has_them(monkeypatch):
    trl = pytest.importorskip("trl")
    import importlib

    from migrate.rules.trl_moved import MOVED

    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    for name, module in MOVED.items():
        assert not hasattr(trl, name), name
        assert hasattr(importlib.import_module(module), name), (module, name)


# Class 8: diffs a reviewer would send back ---------------------------------------------------------------

QUANTIZED = (
    "import torch\nfrom transformers import AutoModelForCausalLM, BitsAndBytesConfig\n\n\n"
    "def load(args, model_kwargs):\n"
    "    quantization_config = BitsAndBytesConfig(load_in_4bit=True) if args.q else None\n"
    "    if quantization_config is not None:\n"
    "{inside}"
    '    return AutoModelForCausalLM.from_pretrained("m", **model_kwargs)\n'
)


@pytest.mark.parametrize("comment", ["", "        # the quantized load needs its config\n"])
def test_an_if_the_migration_emptied_goes(comment: str):
    out = migrate(
        QUANTIZED.format(inside=comment + '        model_kwargs["quantization_config"] = quantization_config\n')
    )
    assert "if quantization_config is not None" not in out and "pass" not in out
    assert "the quantized load needs" not in out  # a comment about the removed line goes with it


def test_an_empty_if_the_script_had_stays():
    out = migrate(QUANTIZED.format(inside="        pass\n"))
    assert "    if quantization_config is not None:\n        pass\n" in out


def test_an_emptied_if_whose_test_calls_something_stays():
    src = QUANTIZED.format(inside='        model_kwargs["quantization_config"] = quantization_config\n')
    out = migrate(src.replace("if quantization_config is not None:", "if check(quantization_config):"))
    assert "if check(quantization_config):\n        pass\n" in out


OPTIMIZER = (
    "import bitsandbytes as bnb\nimport torch\n\n\n"
    "def optimizer_for(model, args):\n"
    "    if {test}:\n"
    "        optimizer_class = bnb.optim.AdamW8bit\n"
    "    else:\n"
    "        optimizer_class = torch.optim.AdamW\n"
    "    return optimizer_class(model.parameters())\n"
)


def test_branches_the_migration_made_identical_become_one():
    out = migrate(OPTIMIZER.format(test="args.use_8bit_adam"))
    assert "def optimizer_for(model, args):\n    optimizer_class = torch.optim.AdamW\n    return" in out
    assert "bitsandbytes" not in out


def test_identical_branches_behind_a_call_keep_the_call():
    out = migrate(OPTIMIZER.format(test="use_bnb(args)"))
    assert "if use_bnb(args):" in out


def test_branches_identical_before_the_migration_stay():
    src = "def f(a):\n    if a.flag:\n        x = 1\n    else:\n        x = 1\n    return x\n"
    assert migrate("import torch\n" + src + "torch.cuda.empty_cache()\n").count("x = 1") == 2


TF32 = (
    "import torch\nfrom diffusers import DiffusionPipeline\nfrom packaging import version\n\n\n"
    "def setup():\n"
    "    {comment}\n"
    '    if version.parse(torch.__version__) >= version.parse("1.12"):\n'
    "        torch.backends.cuda.matmul.allow_tf32 = True\n"
    "{after}"
    '    return DiffusionPipeline.from_pretrained("p", torch_dtype=torch.float32)\n'
)


def test_a_removed_paragraph_takes_its_comment_and_the_import_only_it_read():
    out = migrate(TF32.format(comment="# TF32 is faster on Ampere", after="\n"))
    assert "TF32" not in out and "packaging" not in out
    assert "def setup():\n    return DiffusionPipeline" in out


def test_a_comment_over_a_removed_line_and_kept_code_stays():
    out = migrate(TF32.format(comment="# Set up the backends and the pipeline", after=""))
    assert "    # Set up the backends and the pipeline\n    return DiffusionPipeline" in out


def test_an_import_the_script_never_used_stays():
    out = migrate(
        TF32.format(comment="# TF32", after="\n").replace(
            "from packaging import version\n", "import os\nfrom packaging import version\n"
        )
    )
    assert "import os\n" in out


OPTIMUM = (
    "from optimum.neuron import NeuronTrainer, NeuronTrainingArguments\n\n"
    "# Build the NeuronTrainingArguments here, not in NeuronTrainerX\n"
    "args = NeuronTrainingArguments(output_dir='out')  # NeuronTrainingArguments: bf16 by default\n"
    "trainer = NeuronTrainer(model=model, args=args)\n"
)


def test_comments_naming_a_renamed_optimum_class_name_its_replacement():
    out = migrate(OPTIMUM)
    assert "# Build the TrainingArguments here, not in NeuronTrainerX\n" in out  # whole words only
    assert "args = TrainingArguments(output_dir='out')  # TrainingArguments: bf16 by default\n" in out


def test_the_optimum_comments_fixture_names_the_transformers_classes():
    out = (FIXTURES.parent / "optimum" / "trainer_comments.expected.py").read_text()
    comments = [line.split("#", 1)[1] for line in out.splitlines() if "#" in line]
    assert not [c for c in comments if "NeuronTrainer" in c]  # the docstring is prose, and stays
    assert "# The TrainingArguments come from the command line" in out


LABELS = (
    "import torch\n\n"
    'print("CUDA available:", torch.cuda.is_available())\n'
    'print(f"GPU count: {torch.cuda.device_count()}, GPUs busy: {busy}")\n'
    'print("CUDA available:", have_cuda)\n'
    'print("Use CUDA_VISIBLE_DEVICES to pick GPUs")\n'
)


def test_a_label_next_to_a_rewritten_value_names_neuron():
    out = migrate(LABELS).splitlines()
    assert out[-4] == 'print("Neuron available:", torch.neuron.is_available())'
    assert out[-3] == 'print(f"NeuronCore count: {torch.neuron.device_count()}, GPUs busy: {busy}")'
    assert out[-2:] == ['print("CUDA available:", have_cuda)', 'print("Use CUDA_VISIBLE_DEVICES to pick GPUs")']


@pytest.mark.slow
def test_the_migrated_device_report_says_neuron_on_the_simulator(tmp_path: Path):
    pytest.importorskip("torch", reason="runs the migrated script on the simulator: needs torch")
    from fixture_runs import run_script

    out = run_script(FIXTURES / "device_report_labels.expected.py", [], tmp_path, on_neuron=True)
    assert "Neuron available: True" in out and "CUDA available" not in out
