"""CUDA API references that are not calls (an autocast passed as a value, `amp` attributes), NCCL gates and
f-string `cuda` devices follow the same rewrites as calls.
"""

from __future__ import annotations

from migrated import migrate

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
