"""Issue 27's neuron-migrate items (C1-C11) and issue 23 item 8, one test per item, on scripts written here.

Each migrated file must parse and be a fixed point (`migrate` checks both). Where the bug showed only when
the migrated script ran (C7's memory queries, the per-rank devices of item 8), a slow test runs it on the
simulator; Optimum's `num_cores` launch is run in `test_cluster_runs.py`.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

from migrate.dispatch import migrate_file
from migrate.imports import SHIM_LINE
from migrate.options import Options


def migrate(src: str, name: str = "train.py") -> str:
    result = migrate_file(src.encode(), name, Options())
    assert result.error is None, result.error
    out = result.new.decode() if result.new is not None else src
    ast.parse(out)
    again = migrate_file(out.encode(), name, Options())
    assert again.new is None, "a second run changed the output"
    return out


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


# C2: group_by_length=<expr> carries its value ------------------------------------------------------


def test_c2_group_by_length_expression_is_carried_not_switched_on():
    src = (
        "import transformers\n\n"
        "def train(group_by_length: bool = False):\n"
        '    return transformers.TrainingArguments(output_dir="o", group_by_length=group_by_length)\n'
    )
    out = migrate(src)
    assert 'train_sampling_strategy="group_by_length" if group_by_length else "random"' in out
    literal = migrate('import transformers\na = transformers.TrainingArguments(output_dir="o", group_by_length=True)\n')
    assert 'train_sampling_strategy="group_by_length")' in literal


def test_c2_the_else_value_is_transformers_default():
    import dataclasses

    transformers = pytest.importorskip("transformers")
    fields = {f.name: f for f in dataclasses.fields(transformers.TrainingArguments)}
    assert fields["train_sampling_strategy"].default == "random"


# C3: only an integer ordinal is an index ---------------------------------------------------------


def test_c3_cuda_with_a_device_object_is_to_that_device():
    src = (
        "import torch\n\n"
        'if __name__ == "__main__":\n'
        "    device = torch.accelerator.current_accelerator()\n"
        "    model = torch.nn.Linear(2, 2)\n"
        "    model.cuda(device)\n"
        '    model.cuda("cuda:0")\n'
        "    model.cuda(1)\n"
        "    model.cuda(device=device, non_blocking=True)\n"
    )
    out = migrate(src)
    assert "model.to(device)\n" in out
    assert 'model.to("neuron:0")\n' in out
    assert 'model.to("neuron:1")\n' in out
    assert "model.to(device, non_blocking=True)\n" in out
    assert "neuron:{" not in out


# C4: guards by device type get the block check; DataParallel is CUDA-only --------------------------


def test_c4_device_type_guard_of_a_data_parallel_block_keeps_its_cuda_test():
    src = (
        "import torch\n\n"
        'if __name__ == "__main__":\n'
        "    device = torch.accelerator.current_accelerator()\n"
        "    model = torch.nn.Linear(4, 2)\n"
        '    if device.type == "cuda":\n'
        "        model = torch.nn.DataParallel(model).cuda()\n"
        "    else:\n"
        "        model.to(device)\n"
    )
    out = migrate(src)
    assert 'if device.type == "cuda":' in out  # False on Neuron: the script's own Neuron path runs
    assert "NM926" in out
    count = migrate(
        "import torch\nmodel = torch.nn.Linear(2, 2)\nif torch.cuda.device_count() > 1:\n"
        "    model = torch.nn.DataParallel(model)\n"
    )
    assert "if torch.cuda.device_count() > 1:" in count and "NM926" in count


def test_c4_a_device_type_guard_of_portable_code_still_follows_the_rename():
    out = migrate('import torch\nif device.type == "cuda":\n    torch.cuda.empty_cache()\n')
    assert 'if device.type == "neuron":\n    torch.neuron.empty_cache()' in out


TIMED = (
    "import time\nimport torch\n\n"
    'if __name__ == "__main__":\n'
    "    if torch.cuda.is_available():\n"
    "        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)\n"
    "        start.record()\n"
    "    work()\n"
    "    if torch.cuda.is_available():\n"
    "        end.record()\n"
    "        torch.cuda.synchronize()\n"
    "        print(start.elapsed_time(end))\n"
    "    if torch.cuda.is_available():\n"
    "        end = time.perf_counter()\n"
    "        print(torch.cuda.max_memory_allocated(), end)\n"
)


def test_c4_a_guarded_block_reading_what_a_cuda_only_block_set_keeps_its_cuda_test():
    """The class of C4: a guard renamed to Neuron must not make reachable code that reads names (CUDA events)
    only a block kept behind its CUDA check binds: `end.record()` would be a NameError on Neuron."""
    out = migrate(TIMED)
    blocks = out.split("    work()\n")[1].split("    if torch.")
    assert blocks[1].startswith("cuda.is_available():\n        end.record()")
    assert "this block uses end, start, set only in a block above" in out
    assert blocks[2].startswith("neuron.is_available():\n        end = time.perf_counter()")  # binds its own end


# C5: module-level parse_args is an entry script --------------------------------------------------


def test_c5_module_level_argparse_script_training_from_a_try_gets_the_shim():
    src = (
        "import argparse\nimport torch\n\n"
        "parser = argparse.ArgumentParser()\n"
        'parser.add_argument("--cuda", action="store_true")\n'
        "args = parser.parse_args()\n"
        'device = torch.device("cuda" if args.cuda else "cpu")\n'
        "model = torch.nn.Linear(2, 2).to(device)\n\n"
        "def train():\n    model(torch.randn(4, 2, device=device)).sum().backward()\n\n"
        "try:\n    for epoch in range(2):\n        train()\nexcept KeyboardInterrupt:\n    print('stop')\n"
    )
    assert migrate(src).startswith("import argparse\n" + SHIM_LINE + "import torch\n")


# C6: no drop_last beside **kwargs ------------------------------------------------------------


def test_c6_drop_last_is_not_added_beside_kwargs_that_may_carry_a_batch_sampler():
    src = (
        "import torch\n\n"
        'if __name__ == "__main__":\n'
        '    kw = {"batch_sampler": sampler}\n'
        "    train_dl = torch.utils.data.DataLoader(train_ds, num_workers=0, **kw)\n"
        "    train_dl2 = torch.utils.data.DataLoader(train_ds, shuffle=True)\n"
    )
    out = migrate(src)
    assert "DataLoader(train_ds, num_workers=0, **kw)\n" in out
    assert "DataLoader(train_ds, shuffle=True, drop_last=True)" in out


def test_c6_no_keyword_added_beside_kwargs_anywhere():
    """The same class in the other rules that add a keyword: collators, torch.compile, tokenizers, autocast."""
    src = (
        "import torch\n\n"
        "collator = DataCollatorWithPadding(tokenizer, **collate_kwargs)\n"
        "model = torch.compile(model, **compile_kwargs)\n"
        'with torch.autocast("cuda", **amp_kwargs):\n    pass\n'
    )
    out = migrate(src)
    assert "pad_to_multiple_of" not in out
    assert "torch.compile(model, **compile_kwargs)" in out
    assert 'torch.autocast("neuron", **amp_kwargs)' in out


# C7: CUDA memory queries: right on hardware and in the dry run -------------------------------------

MEMORY_SCRIPT = (
    "import torch\n\n"
    'if __name__ == "__main__":\n'
    '    x = torch.ones(1024, device="cuda")\n'
    "    torch.cuda.reset_max_memory_allocated()\n"
    "    stats = torch.cuda.memory_stats()\n"
    "    torch.cuda.synchronize()\n"
    '    print("PEAK", stats.get("allocated_bytes.all.peak"), torch.cuda.max_memory_reserved(), torch.cuda.memory_reserved())\n'
)


def test_c7_memory_statistics_are_torch_neurons():
    out = migrate(MEMORY_SCRIPT)
    for name in ("reset_peak_memory_stats", "memory_stats", "max_memory_reserved", "memory_reserved"):
        assert f"torch.neuron.{name}()" in out
    assert "torch.accelerator.synchronize()" in out


def test_c7_memory_summary_and_snapshot_are_torch_neurons_too():
    """TorchNeuron's caching allocator has them (memory-profiling guide); a CUDA guard around them now runs."""
    src = "import torch\nif torch.cuda.is_available():\n    print(torch.cuda.memory_summary(), torch.cuda.memory_snapshot())\n"
    out = migrate(src)
    assert (
        "if torch.neuron.is_available():\n    print(torch.neuron.memory_summary(), torch.neuron.memory_snapshot())"
        in out
    )
    assert "NM903" not in out


@pytest.mark.slow
def test_c7_the_migrated_memory_script_passes_its_dry_run(tmp_path: Path):
    pytest.importorskip("torch", reason="runs the migrated script on the simulator: needs torch")
    from launch import simulated_env

    script = tmp_path / "memory.py"
    script.write_text(migrate(MEMORY_SCRIPT))
    result = subprocess.run(
        [sys.executable, str(script)], env=simulated_env(), capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr[-3000:]
    peak, max_reserved, reserved = (int(v) for v in result.stdout.split("PEAK")[1].split())
    assert peak >= 4096 and max_reserved >= 4096 and reserved >= 4096


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


# C10: references, NCCL gates, f"cuda" --------------------------------------------------------


def test_c10_an_autocast_reference_is_rewritten_like_a_call():
    src = (
        "import torch\nfrom contextlib import nullcontext\n\n"
        'if __name__ == "__main__":\n'
        "    autocast = torch.cuda.amp.autocast if fp16 else nullcontext\n"
        "    make_scaler = torch.cuda.amp.GradScaler\n"
        "    with autocast():\n        pass\n"
    )
    out = migrate(src)
    assert (
        'autocast = functools.partial(torch.autocast, "neuron", dtype=torch.bfloat16) if fp16 else nullcontext' in out
    )
    assert 'make_scaler = functools.partial(torch.amp.GradScaler, "neuron", enabled=False)' in out
    assert "import functools\n" in out


def test_c10_a_called_amp_attribute_needs_no_functools():
    out = migrate("import torch\nwith torch.cuda.amp.autocast():\n    pass\n")
    assert "functools" not in out


def test_c10_cuda_api_references_follow_their_calls():
    out = migrate(
        "import atexit\nimport torch\natexit.register(torch.cuda.empty_cache)\nsync = torch.cuda.synchronize\n"
    )
    assert "atexit.register(torch.neuron.empty_cache)" in out
    assert "sync = torch.accelerator.synchronize" in out


def test_c10_an_nccl_gated_bf16_check_is_the_bf16_check():
    src = (
        "import torch\nimport torch.cuda.nccl as nccl\nimport torch.distributed as dist\nfrom packaging import version\n\n"
        'if __name__ == "__main__":\n'
        "    bf16_ready = (\n"
        "        torch.version.cuda\n"
        "        and torch.cuda.is_bf16_supported()\n"
        "        and version.parse(torch.version.cuda).release >= (11, 0)\n"
        "        and dist.is_nccl_available()\n"
        "        and nccl.version() >= (2, 10)\n"
        "    )\n"
    )
    out = migrate(src)
    assert "bf16_ready = (\n        torch.neuron.is_bf16_supported()\n    )" in out
    assert "nccl" not in out and "NM903" not in out


def test_c10_an_nccl_call_elsewhere_gets_a_todo_about_nccl():
    out = migrate("import torch\nimport torch.cuda.nccl as nccl\nv = nccl.version()\n")
    assert "NCCL is CUDA's collective library" in out
    assert "perf_counter" not in out


def test_c10_f_string_cuda_is_a_device_string():
    out = migrate('mesh_device = f"cuda"\ndevice = f"cuda:{idx}"\n')
    assert 'mesh_device = "neuron"' in out
    assert 'device = f"neuron:{idx}"' in out


# C11: xformers leaves no empty `if` and no import ----------------------------------------------


def test_c11_xformers_blocks_and_imports_go():
    src = (
        "import torch\nimport xformers\nfrom diffusers.utils.import_utils import is_xformers_available\n\n"
        'if __name__ == "__main__":\n'
        "    if args.enable_xformers_memory_efficient_attention:\n"
        "        if is_xformers_available():\n"
        "            xformers_version = xformers.__version__\n"
        "            unet.enable_xformers_memory_efficient_attention()\n"
        "        else:\n"
        '            raise ValueError("xformers is not available")\n'
        "    if use_xformers:\n"
        "        pipe.enable_xformers_memory_efficient_attention()\n"
        "    unet.train()\n"
    )
    out = migrate(src)
    assert "xformers" not in out
    assert "pass" not in out
    assert '__main__":\n    unet.train()\n' in out


def test_c11_the_else_branch_is_the_path_without_xformers():
    src = (
        "import torch\nif is_xformers_available():\n    unet.enable_xformers_memory_efficient_attention()\n"
        "else:\n    unet.set_attn_processor(AttnProcessor2_0())\n"
        'if mode == "a":\n    x = 1\nelif args.use_xformers:\n    x = 2\nelse:\n    x = 3\n'
    )
    out = migrate(src)
    assert out.startswith("import torch\nunet.set_attn_processor(AttnProcessor2_0())\n")
    assert 'if mode == "a":\n    x = 1\nelse:\n    x = 3\n' in out


def test_c11_an_else_that_raises_for_a_missing_xformers_goes_with_its_if():
    """Without an outer `if args.enable_xformers...:` the error branch must not become the script's path."""
    src = (
        "import torch\nfrom diffusers.utils.import_utils import is_xformers_available\n\n"
        'if __name__ == "__main__":\n'
        "    if is_xformers_available():\n        unet.enable_xformers_memory_efficient_attention()\n"
        '    else:\n        logger.warning("no xformers")\n        raise ValueError("xformers is not available")\n'
        "    if is_xformers_available():\n        unet.enable_xformers_memory_efficient_attention()\n"
        '    else: raise ValueError("xformers is not available")\n'
        "    unet.train()\n"
    )
    out = migrate(src)
    assert "raise" not in out and "xformers" not in out
    assert out.endswith('if __name__ == "__main__":\n    unet.train()\n')


# #23 item 8: index-less devices, right under either reading of per-rank visibility ------------------


def test_23_8_rank_indices_become_the_ranks_own_core():
    src = (
        "import os\nimport torch\nimport torch.distributed as dist\n"
        "from torch.nn.parallel import DistributedDataParallel as DDP\n\n"
        'if __name__ == "__main__":\n'
        '    local_rank = int(os.environ["LOCAL_RANK"])\n'
        "    torch.cuda.set_device(local_rank)\n"
        '    dist.init_process_group("nccl")\n'
        '    device = torch.device("cuda", local_rank)\n'
        '    ddp_device = f"cuda:{local_rank}"\n'
        "    model = torch.nn.Linear(2, 2).cuda(local_rank)\n"
        "    model = DDP(model, device_ids=[local_rank], output_device=local_rank)\n"
        "    x = torch.ones(2).to(local_rank)\n"
        "    y = torch.ones(2).to(f\"cuda:{os.environ['LOCAL_RANK']}\")\n"
        '    m = AutoModelForCausalLM.from_pretrained("m", device_map={"": local_rank})\n'
        '    n = AutoModelForCausalLM.from_pretrained("m", device_map="auto")\n'
    )
    out = migrate(src)
    assert "neuron:{" not in out and "neuron:0" not in out
    assert "torch.neuron.set_device(local_rank % torch.neuron.device_count())" in out
    assert 'device = torch.device("neuron")' in out
    assert 'ddp_device = "neuron"' in out
    assert 'torch.nn.Linear(2, 2).to("neuron")' in out
    assert "DDP(model, device_ids=[torch.neuron.current_device()], output_device=torch.neuron.current_device())" in out
    assert 'x = torch.ones(2).to("neuron")' in out and 'y = torch.ones(2).to("neuron")' in out
    assert out.count('device_map="neuron"') == 2


def test_23_8_xla_devices_are_index_less_per_rank():
    src = (
        "import torch_xla.core.xla_model as xm\nimport torch.distributed as dist\n\n"
        "def _mp_fn(index):\n"
        '    dist.init_process_group("xla", init_method="xla://")\n'
        "    device = xm.xla_device()\n"
    )
    out = migrate(src)
    assert 'device = torch.device("neuron")' in out
    assert "LOCAL_RANK" not in out.split("device = ")[1]


def test_23_8_literal_indices_stay():
    out = migrate('import torch\nx = torch.zeros(1, device="cuda:1")\ny = torch.zeros(1).cuda(1)\n')
    assert 'device="neuron:1"' in out and '.to("neuron:1")' in out


@pytest.mark.slow
@pytest.mark.ranks
def test_23_8_index_less_devices_are_each_ranks_own_core_under_torchrun(tmp_path: Path):
    """On the simulator a rank sees all cores with its own current: the migrated script's tensors land on
    `neuron:<rank>`, as they land on `neuron:0` where a rank sees only its own (the other reading)."""
    pytest.importorskip("torch", reason="runs the migrated script on the simulator: needs torch")
    from launch import torchrun

    src = (
        "import os\nimport torch\nimport torch.distributed as dist\n"
        "from torch.nn.parallel import DistributedDataParallel as DDP\n\n"
        'if __name__ == "__main__":\n'
        '    local_rank = int(os.environ["LOCAL_RANK"])\n'
        "    torch.cuda.set_device(local_rank)\n"
        '    dist.init_process_group("nccl")\n'
        "    model = DDP(torch.nn.Linear(2, 2).cuda(local_rank), device_ids=[local_rank])\n"
        "    x = torch.ones(3, 2).to(local_rank)\n"
        "    model(x).sum().backward()\n"
        '    line = f"RANK_DEVICE {local_rank} {next(model.parameters()).device} {x.device}\\n"\n'
        "    os.write(1, line.encode())\n"
        "    dist.destroy_process_group()\n"
    )
    script = tmp_path / "ddp.py"
    script.write_text(migrate(src))
    result = torchrun(script, [], tmp_path)
    # the ranks share one stdout: each writes its line in one os.write (atomic on a pipe), print() writes per argument
    lines = sorted(re.findall(r"RANK_DEVICE (\d+) (\S+) (\S+)", result.stdout))
    assert lines == [("0", "neuron:0", "neuron:0"), ("1", "neuron:1", "neuron:1")], result.stdout[-2000:]


# YAML recipes' torch_dtype -> dtype (NM818): the script's readers follow ------------------------------

MODEL_UTILS = (
    "import torch\nfrom trl import ModelConfig\n\n\n"
    "def get_dtype(model_args: ModelConfig):\n"
    '    return model_args.torch_dtype if model_args.torch_dtype in ["auto", None] else getattr(torch, model_args.torch_dtype)\n\n\n'
    "def get_dtype_unannotated(model_args, training_args):\n"
    "    return model_args.torch_dtype\n"
)


def test_readers_of_trl_model_config_torch_dtype_follow_the_recipe_rename():
    out = migrate(MODEL_UTILS, "model_utils.py")
    assert "torch_dtype" not in out.replace("import torch", "")
    assert "model_args.dtype if model_args.dtype in" in out
    assert "return model_args.dtype\n" in out


def test_a_migrated_recipe_and_its_migrated_reader_agree(tmp_path: Path):
    trl = pytest.importorskip("trl")
    recipe = tmp_path / "recipe.yaml"
    recipe.write_bytes(migrate_file(b"model_name_or_path: m\ntorch_dtype: bfloat16\n", "recipe.yaml").new)
    (model_args,) = trl.TrlParser((trl.ModelConfig,)).parse_yaml_file(str(recipe))
    namespace: dict = {}
    exec(compile(migrate(MODEL_UTILS, "model_utils.py"), "model_utils.py", "exec"), namespace)
    import torch

    assert namespace["get_dtype"](model_args) is torch.bfloat16
    assert namespace["get_dtype_unannotated"](model_args, None) == "bfloat16"


def test_a_scripts_own_torch_dtype_field_read_from_recipes_gets_a_todo():
    own = (
        "from dataclasses import dataclass\nfrom transformers import HfArgumentParser\n\n\n"
        "@dataclass\nclass ModelArguments:\n    torch_dtype: str = 'auto'\n\n\n"
        "(model_args,) = HfArgumentParser(ModelArguments).parse_yaml_file('recipe.yaml')\n"
        "dtype = model_args.torch_dtype\n"
    )
    out = migrate(own)
    assert "NM927" in out
    assert "dtype = model_args.torch_dtype\n" in out  # its own field: the read stays
    cli = own.replace("parse_yaml_file('recipe.yaml')", "parse_args_into_dataclasses()")
    assert "NM927" not in migrate(cli)
