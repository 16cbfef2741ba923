"""Device indices through a migration: a rank's index the script reads stays its own core (`.index`,
`barrier(device_ids=...)`), only an integer ordinal is an index, and index-less devices are each rank's own core
under either reading of per-rank visibility. Snippets and fixtures written here; the fixtures also run under
torchrun on 1 and 2 simulated cores (slow).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from migrated import FIXTURES, migrate, run_on_cores

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
    run_on_cores("ddp_device_index", tmp_path)


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
