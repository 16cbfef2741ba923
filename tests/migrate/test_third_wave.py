"""Issue #41's codemod classes, on snippets and fixtures written here: each rewrite keeps what the script
relies on later (a device's index, the branch a device-type flag picks) and leaves a diff a reviewer accepts.

The fixtures' migrations also run under torchrun on 1 and 2 simulated cores (marked slow): each rank reads
its own stdout from torchrun's per-rank logs (`launch.run_ranks`), never a stdout the ranks share.
"""

from __future__ import annotations

import ast
import math
import re
from pathlib import Path

import pytest

from migrate.dispatch import migrate_file
from migrate.options import Options

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "cuda"


def migrate(src: str, name: str = "train.py") -> str:
    """The migrated text, which must parse and be a fixed point."""
    result = migrate_file(src.encode(), name, Options())
    assert result.error is None, result.error
    out = result.new.decode() if result.new is not None else src
    ast.parse(out)
    assert migrate_file(out.encode(), name, Options()).new is None, "a second run changed the output"
    return out


def _rank_lines(stdout: str, what: str) -> dict[int, list[str]]:
    """`rank N <what> ...` lines of each rank's own log, by rank."""
    found: dict[int, list[str]] = {}
    for rank, rest in re.findall(rf"^rank (\d+) {what} (.*)$", stdout, re.M):
        found.setdefault(int(rank), []).append(rest)
    return found


def _run_on_cores(name: str, tmp_path: Path) -> None:
    """The fixture's migration under torchrun on 1 and 2 simulated cores: every rank trains with finite losses
    on its own core (the simulator shows a rank all cores, its own current)."""
    pytest.importorskip("torch", reason="runs the migrated script on the simulator: needs torch")
    from launch import torchrun

    for nproc in (1, 2):
        result = torchrun(FIXTURES / f"{name}.expected.py", ["--steps", "3"], tmp_path, nproc=nproc)
        steps = _rank_lines(result.stdout, "step")
        assert sorted(steps) == list(range(nproc)), result.stdout[-3000:]
        for lines in steps.values():
            assert len(lines) == 3 and all(math.isfinite(float(line.split()[-1])) for line in lines)
        devices = {
            rank: lines[-1].split()[-1] for rank, lines in _rank_lines(result.stdout, "(?:device|trained)").items()
        }
        assert devices == {rank: f"neuron:{rank}" for rank in range(nproc)}, result.stdout[-3000:]


# Class 1: a rewrite that drops a rank index the script reads later ----------------------------------------

READS_INDEX = (
    "import os\nimport torch\nimport torch.distributed as dist\n\n"
    'if __name__ == "__main__":\n'
    '    local_rank = int(os.environ["LOCAL_RANK"])\n'
    "    {device}\n"
    "    torch.cuda.set_device(device.index)\n"
    "    dist.barrier(device_ids=[device.index])\n"
)


@pytest.mark.parametrize(
    "device",
    [
        'device = torch.device("cuda", local_rank)',
        'device = torch.device(f"cuda:{local_rank}")',
        'device = torch.device("cuda:{}".format(local_rank))',
        'device = torch.device("cuda", index=local_rank)',
    ],
)
def test_a_rank_index_the_script_reads_stays_the_ranks_own_core(device: str):
    out = migrate(READS_INDEX.format(device=device))
    keyword = "index=" if "index=" in device else ""
    assert f'device = torch.device("neuron", {keyword}local_rank % torch.neuron.device_count())' in out
    assert "torch.neuron.set_device(device.index)" in out and "dist.barrier(device_ids=[device.index])" in out


def test_a_rank_index_nobody_reads_is_still_dropped():
    out = migrate(READS_INDEX.format(device='device = torch.device("cuda", local_rank)').replace(".index", ""))
    assert 'device = torch.device("neuron")' in out


def test_an_index_method_call_is_no_read_of_a_device_index():
    src = READS_INDEX.format(device='device = torch.device("cuda", local_rank)').split("    torch.cuda.set_device")[0]
    out = migrate(src + '    print("abc".index("b"), device)\n')
    assert 'device = torch.device("neuron")' in out


def test_the_device_index_fixture_keeps_the_index():
    out = (FIXTURES / "ddp_device_index.expected.py").read_text()
    assert 'device = torch.device("neuron", local_rank % torch.neuron.device_count())' in out
    assert '.to(f"neuron:{device.index}")' in out


@pytest.mark.slow
@pytest.mark.ranks
def test_the_migrated_device_index_script_runs_on_one_and_two_cores(tmp_path: Path):
    """Before #41 `device.index` was None: `dist.barrier(device_ids=[None])` raised a TypeError."""
    _run_on_cores("ddp_device_index", tmp_path)


# Class 2: a device-type flag that guards CUDA-only code keeps its CUDA test -------------------------------

FLAGGED = (
    "import time\nimport torch\n\n"
    'if __name__ == "__main__":\n'
    '    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
    '    use_cuda = device.type == "cuda"\n'
    "    if use_cuda:\n"
    "        {guarded}\n"
    "    else:\n"
    "        t0 = time.time()\n"
)


def test_a_flag_guarding_cuda_events_stays_a_cuda_test():
    out = migrate(FLAGGED.format(guarded="start = torch.cuda.Event(enable_timing=True)"))
    assert 'use_cuda = device.type == "cuda"\n' in out  # False on Neuron: the time.time() branch runs, as off CUDA
    assert 'torch.device("neuron" if torch.neuron.is_available() else "cpu")' in out
    assert "this block calls torch.cuda.Event (no Neuron equivalent), so it stays behind the CUDA check" in out


def test_a_flag_guarding_portable_code_follows_the_rename():
    out = migrate(FLAGGED.format(guarded="torch.cuda.empty_cache()"))
    assert 'use_cuda = device.type == "neuron"\n' in out and "torch.neuron.empty_cache()" in out


def test_an_is_available_flag_guarding_cuda_events_stays_cudas():
    src = FLAGGED.format(guarded="start = torch.cuda.Event(enable_timing=True)")
    out = migrate(src.replace('device.type == "cuda"', "torch.cuda.is_available()"))
    assert "use_cuda = torch.cuda.is_available()\n" in out


@pytest.mark.slow
@pytest.mark.ranks
def test_the_migrated_timed_script_takes_its_non_cuda_timer_on_one_and_two_cores(tmp_path: Path):
    """Before #41 `use_cuda` became `device.type == "neuron"` and the migration crashed at `torch.cuda.Event`."""
    _run_on_cores("ddp_timed_device_type", tmp_path)


# Class 3: free-memory queries of a device module picked at run time ----------------------------------------

GENERIC = "import torch\n\ndevice_type = torch.accelerator.current_accelerator().type\n\n\ndef free():\n    {call}\n"


@pytest.mark.parametrize(
    "call, after",
    [
        ("return getattr(torch, device_type, torch.cuda).mem_get_info()", "torch.accelerator.get_memory_info()"),
        ("return getattr(torch, device_type).mem_get_info(0)", "torch.accelerator.get_memory_info(0)"),
        ("return torch.get_device_module().mem_get_info(device=1)", "torch.accelerator.get_memory_info(1)"),
        (
            "return torch.get_device_module(torch.accelerator.current_accelerator().type).mem_get_info()",
            "torch.accelerator.get_memory_info()",
        ),
    ],
)
def test_the_current_accelerators_module_asks_torch_accelerator(call: str, after: str):
    out = migrate(GENERIC.format(call=call))
    assert f"    return {after}\n" in out and "NM935" not in out


@pytest.mark.parametrize(
    "call",
    [
        "return getattr(torch, args.device_type, torch.cuda).mem_get_info()",
        "return torch.get_device_module(name).mem_get_info()",
    ],
)
def test_a_device_type_not_tied_to_the_accelerator_gets_a_todo(call: str):
    out = migrate(GENERIC.format(call=call))
    assert "# TODO(neuron-migrate NM935): torch.neuron has no mem_get_info" in out
    assert call in out


def test_a_device_type_bound_to_something_else_too_gets_a_todo():
    src = GENERIC.format(call="return getattr(torch, device_type).mem_get_info()") + 'device_type = "cuda"\n'
    assert "NM935" in migrate(src)


def test_a_file_whose_only_cuda_token_is_the_generic_query_is_migrated():
    out = migrate("import torch\n\nfree, total = torch.get_device_module().mem_get_info()\n")
    assert "free, total = torch.accelerator.get_memory_info()" in out


@pytest.mark.slow
def test_the_migrated_memory_budget_script_runs_on_the_simulator(tmp_path: Path):
    """Before #41 the migration failed as the original does: `torch.neuron` has no `mem_get_info`."""
    pytest.importorskip("torch", reason="runs the migrated script on the simulator: needs torch")
    from fixture_runs import run_script

    out = run_script(FIXTURES / "memory_budget_generic.expected.py", [], tmp_path, on_neuron=True)
    free, total = map(int, re.search(r"free (\d+) of (\d+) bytes", out).groups())  # type: ignore[union-attr]
    assert 0 < free <= total
    assert "batch 64 on neuron:0" in out


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
