"""bitsandbytes and quantization configs through a migration: the removal is whole (imports, optimizers,
layer lookups, TODOs naming what was quantized) and a conditional quantization config keeps its default
path's dtype.
"""

from __future__ import annotations

import pytest
from migrated import migrate

from migrate.dispatch import migrate_file

# C8: bitsandbytes removal done whole -------------------------------------------------------------


def test_c8_an_8bit_optimizer_leaves_no_bitsandbytes_import_nor_a_model_memory_todo():
    src = (
        "import torch\n\n"
        'if __name__ == "__main__":\n'
        "    use_8bit_adam = False\n"
        "    if use_8bit_adam:\n"
        "        try:\n"
        "            import bitsandbytes as bnb\n"
        "        except ImportError:\n"
        '            raise ImportError("Please install bitsandbytes to use 8-bit Adam")\n'
        "        optimizer_cls = bnb.optim.AdamW8bit\n"
        "    else:\n"
        "        optimizer_cls = torch.optim.AdamW\n"
    )
    out = migrate(src)
    assert "bitsandbytes" not in out and "bnb" not in out
    assert "NM908" not in out
    assert "    if use_8bit_adam:\n        optimizer_cls = torch.optim.AdamW\n" in out


def test_c8_quantized_layer_lookups_find_torch_linear_layers():
    src = (
        "import bitsandbytes as bnb\nimport torch\n\n\n"
        "def find_all_linear_names(bits, model):\n"
        "    cls = bnb.nn.Linear4bit if bits == 4 else (bnb.nn.Linear8bitLt if bits == 8 else torch.nn.Linear)\n"
        "    return [n for n, m in model.named_modules() if isinstance(m, cls)]\n"
    )
    out = migrate(src)
    assert "bnb" not in out and "bitsandbytes" not in out
    assert "cls = torch.nn.Linear if bits == 4 else (torch.nn.Linear if bits == 8 else torch.nn.Linear)" in out


def test_c8_what_is_left_of_bitsandbytes_gets_a_todo_about_bitsandbytes():
    src = "import bitsandbytes as bnb\n\nlayer = bnb.nn.Linear8bitLt(4, 4, has_fp16_weights=False)\n"
    out = migrate(src)
    assert "bnb.nn.Linear8bitLt(4, 4, has_fp16_weights=False)" in out  # its arguments are bitsandbytes'
    assert "loads in bf16" not in out
    assert out.count("NM908): bitsandbytes is CUDA-only and is not installed") == 2


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ('model = AutoModelForCausalLM.from_pretrained("m", load_in_8bit=True)\n', "(~2x the 8-bit memory)"),
        ('model = AutoModelForCausalLM.from_pretrained("m", load_in_4bit=True)\n', "(~4x the 4-bit memory)"),
        ("q = BitsAndBytesConfig(load_in_8bit=True)\n", "(~2x the 8-bit memory)"),
        ('q = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4")\n', "(~4x the 4-bit memory)"),
        ('q = GPTQConfig(bits=4, dataset="c4")\n', "GPTQConfig quantization runs CUDA kernels"),
    ],
)
def test_c8_a_quantization_todo_names_what_was_quantized(line: str, says: str):
    """The class of C8's wrong TODO text: an 8-bit load is not '~4x the 4-bit memory', GPTQ is not bitsandbytes."""
    out = migrate(
        "import torch\nfrom transformers import AutoModelForCausalLM, BitsAndBytesConfig, GPTQConfig\n" + line
    )
    todo = next(text for text in out.splitlines() if "NM908" in text)
    assert says in todo


def test_c8_a_recipes_8bit_load_todo_names_8_bits():
    result = migrate_file(b"model_name_or_path: m\nload_in_8bit: true\nlearning_rate: 1.0e-4\n", "recipe.yaml")
    out = result.new.decode()
    assert "\nload_in_8bit: false\n" in out
    assert "(~2x the 8-bit memory)" in out


# C9: a conditional quantization config keeps the default path's dtype ------------------------------


def test_c9_conditional_quantization_keeps_the_default_dtype():
    src = (
        "import torch\nfrom transformers import AutoModelForCausalLM, BitsAndBytesConfig\n\n"
        "def main(use_bnb=False):\n"
        "    bnb_config = None\n"
        "    if use_bnb:\n"
        "        bnb_config = BitsAndBytesConfig(load_in_4bit=True)\n"
        '    return AutoModelForCausalLM.from_pretrained("m", quantization_config=bnb_config)\n'
    )
    out = migrate(src)
    assert 'dtype=torch.bfloat16 if bnb_config is not None else "auto"' in out
    always = migrate(
        "import torch\nbnb_config = BitsAndBytesConfig(load_in_4bit=True)\n"
        'm = AutoModelForCausalLM.from_pretrained("m", quantization_config=bnb_config)\n'
    )
    assert 'from_pretrained("m", dtype=torch.bfloat16)' in always


def test_c9_trl_quantization_config_is_none_by_default():
    src = (
        "import torch\nfrom trl import get_quantization_config\n\n"
        "q = get_quantization_config(model_args)\n"
        'm = AutoModelForCausalLM.from_pretrained("m", quantization_config=q)\n'
    )
    assert 'dtype=torch.bfloat16 if q is not None else "auto"' in migrate(src)
