"""CUDA-only code behind a device check: a device-type flag or guard over CUDA-only code (events,
DataParallel) keeps its CUDA test with NM903, portable code follows the rename, and xformers blocks leave no
empty `if` and no import.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from migrated import migrate, run_on_cores

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
    run_on_cores("ddp_timed_device_type", tmp_path)


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
