"""NM212 and NM928: Hub kernels (`get_kernel`, `use_kernels=True`, `KernelConfig`) in scripts."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from migrate.cli import main
from migrate.engine import migrate_source
from migrate.imports import SHIM_LINE
from migrate.kernel_repos import todo_message
from migrate.markers import TODO_PREFIX
from migrate.options import Options
from migrate.results import FileResult
from migrate.rules.hub_kernels import USE_KERNELS_NOTE

NEURON_RMSNORM = "acme/rmsnorm-nki:NeuronRMSNorm"


def _migrate(src: str, shim: bool = False, **kernels: str) -> FileResult:
    result = migrate_source(src.encode(), "t.py", Options(shim=shim, neuron_kernels=tuple(kernels.items())))
    assert result.error is None
    return result


def _text(result: FileResult, src: str) -> str:
    return result.new.decode() if result.new else src


def test_get_kernel_of_a_cuda_only_repo_gets_the_todo() -> None:
    src = (
        "import kernels as K\n"
        "from kernels import get_kernel\n"
        'act = get_kernel("kernels-community/activation", version=1)\n'
        'flash = K.get_kernel(repo_id="kernels-community/flash-attn2", version=1)\n'
        'mine = get_kernel("acme/conv2d-neuron-kernels", version=1)\n'
        "other = get_kernel(name, version=1)\n"
    )
    out = _text(_migrate(src), src)
    assert out == (
        "import kernels as K\n"
        "from kernels import get_kernel\n"
        f"{TODO_PREFIX}NM928): {todo_message('kernels-community/activation')}\n"
        'act = get_kernel("kernels-community/activation", version=1)\n'
        f"{TODO_PREFIX}NM928): {todo_message('kernels-community/flash-attn2')}\n"
        'flash = K.get_kernel(repo_id="kernels-community/flash-attn2", version=1)\n'
        'mine = get_kernel("acme/conv2d-neuron-kernels", version=1)\n'
        "other = get_kernel(name, version=1)\n"
    )
    assert "torch.nn.functional.scaled_dot_product_attention" in todo_message("kernels-community/flash-attn2")


def test_transformers_get_kernel_is_recognised() -> None:
    src = (
        "from transformers.integrations.hub_kernels import get_kernel\n"
        'norm = get_kernel(kernel_name="kernels-community/rmsnorm")\n'
    )
    assert f"{TODO_PREFIX}NM928): {todo_message('kernels-community/rmsnorm')}" in _text(_migrate(src), src)


def test_use_kernels_is_kept_with_a_note() -> None:
    """Notes come with a migrated file: here the entry script's ``import neuroncompat``."""
    src = (
        "from transformers import AutoModelForCausalLM\nm = AutoModelForCausalLM.from_pretrained(p, use_kernels=True)\n"
    )
    result = _migrate(src, shim=True)
    assert _text(result, src) == SHIM_LINE + src
    assert [(w.rule, w.message) for w in result.warnings] == [("NM212", USE_KERNELS_NOTE)]


def test_kernel_config_entries_are_kept_without_a_neuron_repo() -> None:
    src = (
        "from transformers import AutoModelForCausalLM, KernelConfig\n"
        'config = KernelConfig({"RMSNorm": {"cuda": "kernels-community/layer_norm:LlamaRMSNorm"}})\n'
        "model = AutoModelForCausalLM.from_pretrained(path, kernel_config=config)\n"
    )
    result = _migrate(src, shim=True)
    assert _text(result, src) == SHIM_LINE + src
    assert [w.message for w in result.warnings] == [
        "KernelConfig maps no Neuron kernel for RMSNorm: on Neuron those layers keep their own forward; name a "
        "Neuron kernel repo per layer in [tool.neuron-migrate] neuron-kernels to add one"
    ]


def test_a_configured_neuron_repo_is_added_to_each_form_of_entry() -> None:
    src = (
        "import transformers\n"
        "config = transformers.KernelConfig(\n"
        "    kernel_mapping={\n"
        "        'RMSNorm': {\n"
        "            'cuda': 'kernels-community/layer_norm:LlamaRMSNorm',\n"
        "            'rocm': 'kernels-community/layer_norm:LlamaRMSNorm',\n"
        "        },\n"
        '        "SiLU": ("kernels-community/activation:Silu", {"version": 1}),\n'
        '        "MLP": {"cuda": "kernels-community/megablocks:MegaBlocksMoeMLP", "neuron": "acme/moe:MoE"},\n'
        "    }\n"
        ")\n"
    )
    result = _migrate(src, RMSNorm=NEURON_RMSNORM, SiLU="acme/act-nki:Silu", MLP="acme/other:X")
    out = _text(result, src)
    assert out == (
        "import transformers\n"
        "config = transformers.KernelConfig(\n"
        "    kernel_mapping={\n"
        "        'RMSNorm': {\n"
        "            'cuda': 'kernels-community/layer_norm:LlamaRMSNorm',\n"
        "            'rocm': 'kernels-community/layer_norm:LlamaRMSNorm',\n"
        f"            'neuron': '{NEURON_RMSNORM}',\n"
        "        },\n"
        '        "SiLU": {"cuda": ("kernels-community/activation:Silu", {"version": 1}), "neuron": "acme/act-nki:Silu"},\n'
        '        "MLP": {"cuda": "kernels-community/megablocks:MegaBlocksMoeMLP", "neuron": "acme/moe:MoE"},\n'
        "    }\n"
        ")\n"
    )
    assert result.hits["NM212"] == 1 and not result.warnings
    again = migrate_source(out.encode(), "t.py", Options(shim=False, neuron_kernels=(("RMSNorm", NEURON_RMSNORM),)))
    assert again.status == "unchanged"


def test_the_cli_option_and_pyproject_name_the_neuron_repos(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(
        'from transformers import KernelConfig\nconfig = KernelConfig({"RMSNorm": "kernels-community/rmsnorm:RMSNorm"})\n'
    )
    runner = CliRunner()
    shown = runner.invoke(main, [str(script), "--no-shim", "--neuron-kernel", f"RMSNorm={NEURON_RMSNORM}"])
    assert shown.exit_code == 0, shown.output
    assert f'"neuron": "{NEURON_RMSNORM}"' in shown.stdout
    bad = runner.invoke(main, [str(script), "--neuron-kernel", "RMSNorm=acme-rmsnorm"])
    assert bad.exit_code == 2 and 'expected "org/repo:LayerName"' in bad.output
    (tmp_path / "pyproject.toml").write_text(f'[tool.neuron-migrate.neuron-kernels]\nRMSNorm = "{NEURON_RMSNORM}"\n')
    configured = runner.invoke(main, [str(script), "--no-shim"])
    assert configured.exit_code == 0 and f'"neuron": "{NEURON_RMSNORM}"' in configured.stdout
    (tmp_path / "pyproject.toml").write_text('[tool.neuron-migrate.neuron-kernels]\nRMSNorm = "nope"\n')
    invalid = runner.invoke(main, [str(script)])
    assert invalid.exit_code == 2 and "[tool.neuron-migrate].neuron-kernels.RMSNorm" in invalid.output
