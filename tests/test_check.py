"""``neuroncompat check``: the preflight on configs a user would hand it (Llama, Qwen3-MoE, Gemma 3, Mamba).

Each config is the architecture's transformers default (the sizes of a real checkpoint), saved as a user's
model directory holds it; the command shrinks it itself. The assertions are what a user reads: which stages
pass, where a failing one fails, how many graphs each compiled.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

transformers = pytest.importorskip("transformers")

import ci_subset  # noqa: E402

from neuroncompat.check import report as check_report  # noqa: E402
from neuroncompat.check.tiny import tiny_config  # noqa: E402

SCHEMA = json.loads((Path(__file__).resolve().parents[1] / "neuroncompat/check/report.schema.json").read_text())


def _validate(document: dict) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.Draft202012Validator(SCHEMA).validate(document)


def _save(tmp_path: Path, config: object) -> Path:
    config.save_pretrained(tmp_path)  # type: ignore[attr-defined]
    return tmp_path


def _check(model: Path, fmt: str = "json", *options: str) -> tuple[int, str]:
    done = subprocess.run(
        [sys.executable, "-m", "neuroncompat.cli", "check", "--format", fmt, *options, str(model)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    return done.returncode, done.stdout + done.stderr


def _stages(output: str) -> dict[str, dict]:
    return {stage["stage"]: stage for stage in json.loads(output)["stages"]}


def test_the_tiny_model_keeps_every_kind_of_layer_and_the_head_layout():
    gemma = tiny_config(transformers.Gemma3TextConfig())
    assert gemma.layer_types == ["sliding_attention"] * 5 + ["full_attention"]
    assert (gemma.hidden_size, gemma.num_attention_heads, gemma.num_key_value_heads, gemma.head_dim) == (64, 4, 2, 16)
    assert gemma.sliding_window == 8
    llama = tiny_config(transformers.LlamaConfig())  # multi-head: as many key/value heads as query heads
    assert (llama.num_attention_heads, llama.num_key_value_heads, llama.num_hidden_layers) == (4, 4, 2)
    moe = tiny_config(transformers.Qwen3MoeConfig())
    assert (moe.num_experts, moe.num_experts_per_tok, moe.moe_intermediate_size) == (4, 2, 32)
    jamba = tiny_config(transformers.JambaConfig())  # attention every 2nd layer from layer 1: both kinds in 2 layers
    assert (jamba.num_hidden_layers, jamba.attn_layer_period, jamba.attn_layer_offset) == (2, 2, 1)
    mamba = tiny_config(transformers.MambaConfig())
    assert mamba.intermediate_size == mamba.expand * mamba.hidden_size == 128
    mamba2 = tiny_config(transformers.Mamba2Config())  # SSM heads x head_dim span the inner width
    assert mamba2.num_heads * mamba2.head_dim == mamba2.expand * mamba2.hidden_size
    gpt2 = tiny_config(transformers.GPT2Config())  # `n_head`, and dropout off (the losses are compared)
    assert (gpt2.n_head, gpt2.resid_pdrop, gpt2.attn_pdrop, gpt2.embd_pdrop) == (4, 0.0, 0.0, 0.0)
    falcon_h1 = tiny_config(transformers.FalconH1Config())  # Mamba heads x head width = the inner width
    assert falcon_h1.mamba_n_heads * falcon_h1.mamba_d_head == falcon_h1.mamba_expand * falcon_h1.hidden_size
    bailing = tiny_config(transformers.BailingHybridConfig())  # every per-layer list cut alike
    assert len(bailing.layer_types) == len(bailing.mlp_layer_types) == bailing.num_hidden_layers
    assert set(bailing.mlp_layer_types) == set(transformers.BailingHybridConfig().mlp_layer_types)
    deepseek = tiny_config(transformers.DeepseekV3Config())  # MLA: rotary head_dim follows qk_rope_head_dim
    assert deepseek.head_dim == deepseek.qk_rope_head_dim and deepseek.qk_head_dim == 16
    assert deepseek.n_routed_experts // deepseek.n_group == 2  # grouped routing keeps 2 experts per group


def test_per_layer_values_follow_the_cut_and_other_size_names_shrink():
    gemma3n = tiny_config(transformers.Gemma3nTextConfig())  # an MLP width per layer: as many as layers are kept
    assert gemma3n.num_hidden_layers == len(gemma3n.intermediate_size) == len(gemma3n.activation_sparsity_pattern)
    assert set(gemma3n.intermediate_size) == {128}
    # its last layers reuse the cache of earlier ones: 4 sliding + 1 full fill it, as many reuse it
    assert gemma3n.layer_types == 2 * (["sliding_attention"] * 4 + ["full_attention"])
    assert gemma3n.num_kv_shared_layers == 5
    laguna = tiny_config(transformers.LagunaConfig())  # heads per layer, cut and shrunk alike
    assert laguna.num_attention_heads_per_layer == [4] * laguna.num_hidden_layers
    gemma4 = tiny_config(transformers.Gemma4TextConfig()).to_dict()  # the full-attention layer's wider heads stay wider
    assert gemma4["layer_types"][-1] == "full_attention" and gemma4["num_hidden_layers"] == 6
    assert gemma4["per_layer_config"] == {"5": {"head_dim": 2 * gemma4["head_dim"]}}
    for config in (transformers.PLBartConfig(), transformers.WhisperConfig()):  # encoder/decoder names
        tiny = tiny_config(config)
        assert (tiny.d_model, tiny.decoder_attention_heads, tiny.decoder_layers, tiny.decoder_ffn_dim) == (
            64,
            4,
            2,
            128,
        )
    xlnet = tiny_config(transformers.XLNetConfig())
    assert xlnet.d_head * xlnet.n_head == xlnet.d_model and xlnet.n_layer == 2
    zamba = tiny_config(transformers.ZambaConfig(), repeats=2)  # its hybrid layers share a block: two of them
    assert zamba.layers_block_type.count("hybrid") == 2 and len(zamba.layers_block_type) == zamba.num_hidden_layers
    gpt_neo = tiny_config(transformers.GPTNeoConfig())  # [[kinds, times]] expands to a kind per layer: each once
    assert (gpt_neo.num_layers, gpt_neo.attention_layers) == (2, ["global", "local"])
    dots3 = tiny_config(transformers.Dots3NoteConfig())  # each adapter joins its encoder to the language model
    assert dots3.vision_config.adapter_in_dim == dots3.vision_config.hidden_size == 64
    assert dots3.vision_config.adapter_out_dim == dots3.text_config.hidden_size == 64
    gptj = tiny_config(transformers.GPTJConfig())  # a rotary part of each head stays a part
    assert gptj.rotary_dim == 8 < gptj.n_embd // gptj.n_head
    rwkv, zamba = tiny_config(transformers.RwkvConfig()), tiny_config(transformers.ZambaConfig())
    assert (rwkv.attention_hidden_size, zamba.attention_hidden_size) == (64, 128)  # the width's multiple is kept
    zamba2 = tiny_config(transformers.Zamba2Config())  # its Mamba-2 heads span the inner width
    assert zamba2.n_mamba_heads * zamba2.mamba_headdim == zamba2.mamba_expand * zamba2.hidden_size
    assert tiny_config(transformers.MarianConfig()).decoder_vocab_size == 256


@pytest.fixture(scope="module")
def llama_cli(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, str]:
    """``neuroncompat check --format json --tensor-parallel`` on Llama's default config, once for the tests that
    read it (they share the ``check_llama`` xdist group, so one pytest worker runs them all)."""
    config = transformers.LlamaConfig(architectures=["LlamaForCausalLM"])
    return _check(_save(tmp_path_factory.mktemp("llama"), config), "json", "--tensor-parallel")


@pytest.mark.slow  # every stage and the 2-rank tensor-parallel one
@pytest.mark.ranks
@pytest.mark.xdist_group("check_llama")
def test_llama_passes_every_stage_with_one_graph_each_compiled_stage(llama_cli):
    code, output = llama_cli
    assert code == 0, output
    _validate(json.loads(output))
    stages = _stages(output)
    assert [s["status"] for s in stages.values()] == ["pass"] * 5
    # Llama's plan splits the attention and MLP projections (16 of the tiny model's 21 parameters) over 2 ranks
    assert stages["tensor-parallel"]["detail"].startswith(
        "2 ranks, 16 of 21 parameters sharded; 6 greedy tokens equal the CPU's; loss "
    )
    assert stages["load"]["detail"].endswith("on neuron:0")
    assert stages["generate"]["detail"] == "6 greedy tokens equal the CPU's"
    assert stages["generate"]["graphs"] == 1  # transformers compiles the static-cache decode step
    assert stages["generate"]["recompiles"] == []  # one decode graph for every token
    assert stages["train-eager"]["graphs"] == 0 and stages["train-compiled"]["graphs"] == 1


@pytest.mark.slow  # 6 layers, a graph per decode length: the longest check here
@pytest.mark.xdist_group("ci_subset")
def test_gemma3_sliding_and_full_attention_layers_pass():
    document = ci_subset.report("gemma3_text")  # Gemma3TextConfig's defaults, architectures=["Gemma3ForCausalLM"]
    assert document["exit_code"] == 0, document
    _validate(document)
    assert document["layers"] == 6
    # its sliding layers' static cache keeps a Python int of its length: a decode graph per token (window 8 > 6)
    generate = {stage["stage"]: stage for stage in document["stages"]}["generate"]
    assert generate["graphs"] == 5
    [recompile] = generate["recompiles"]
    assert recompile["guard"] == "kwargs['past_key_values'].layers[0].cumulative_length_int"
    assert recompile["count"] == 4  # 5 graphs: the first and 4 recompiles
    assert recompile["site"].startswith("transformers/cache_utils.py:") and recompile["site"].endswith(" in update")
    assert recompile["cause"].startswith("transformers' sliding-window static cache keeps its length as a Python int")


@pytest.mark.slow  # reads the CI subset's check (tests/ci_subset.py)
@pytest.mark.xdist_group("ci_subset")
def test_mamba_passes_on_the_reference_scan():
    document = ci_subset.report("mamba")  # MambaConfig's defaults, architectures=["MambaForCausalLM"]
    assert document["exit_code"] == 0, document
    _validate(document)
    stages = {stage["stage"]: stage for stage in document["stages"]}
    assert stages["train-compiled"]["status"] == "pass"


@pytest.mark.slow  # reads the CI subset's check (tests/ci_subset.py)
@pytest.mark.xdist_group("ci_subset")
def test_a_moe_model_passes_through_transformers_grouped_experts():
    """transformers' grouped_mm experts count tokens per expert with an int32 torch.histc on every device but the
    CPU and MPS (integrations/moe.py); the simulator runs it as CUDA does (neuroncompat/simulator/integer_histc.py)."""
    document = ci_subset.report("qwen3_moe")  # Qwen3MoeConfig's defaults, architectures=["Qwen3MoeForCausalLM"]
    assert document["exit_code"] == 0, document
    stages = {stage["stage"]: stage for stage in document["stages"]}
    assert stages["generate"]["detail"] == "6 greedy tokens equal the CPU's"
    assert stages["train-compiled"]["status"] == "pass"


@pytest.mark.slow  # renders the Llama check above
@pytest.mark.xdist_group("check_llama")
def test_text_report_of_a_passing_model(llama_cli):
    code, output = llama_cli
    assert code == 0, output
    text = check_report.RENDERERS["text"](json.loads(output))  # what `--format text` prints for the same result
    assert "LlamaForCausalLM (llama, float32) runs on the simulated Neuron device" in text
    assert "train-compiled  ok" in text


def test_a_clear_error_for_a_missing_config(tmp_path):
    code, output = _check(tmp_path, "text")
    assert code == 2 and "no config.json in this directory" in output


def test_a_training_step_that_draws_random_numbers_draws_the_same_on_the_cpu_reference(neuron):
    """Phi-MoE samples its experts in training (sparsemixer: Gumbel noise, ``rand_like``); the device's generator is
    not the CPU's, so the check's CPU reference draws on the device: same seed, same numbers, same loss. Its other
    seeded ops (the CPU's fused attention) keep the CPU's values and move the device's generator on as the device
    step does."""
    import torch

    from neuroncompat.check.worker import _DrawsOnDevice

    def step(x: torch.Tensor) -> torch.Tensor:
        noise = torch.empty_like(x).exponential_().log()
        attention = torch.nn.functional.scaled_dot_product_attention(x, x, x, is_causal=True)
        return attention + noise + torch.rand_like(x)

    x = torch.randn(1, 2, 8, 4)
    draws = _DrawsOnDevice()
    torch.manual_seed(0)
    with draws:
        cpu = step(x)
    torch.manual_seed(0)
    device = step(x.to("neuron")).cpu()
    assert draws.draws == 2
    torch.testing.assert_close(device, cpu, rtol=0, atol=1e-6)
    torch.manual_seed(0)
    assert not torch.allclose(step(x), cpu)  # the CPU's own draws are other numbers


def test_a_compiled_stage_names_the_error_dynamo_wrapped():
    """Dynamo reports an op that fails on fake tensors as "RuntimeError when making fake tensor call": the check's
    error line names the op's own error too (docs/architectures.md, inkling_text)."""
    import torch

    from neuroncompat.check.worker import _message

    def step(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.mm(a, b) + 1

    with pytest.raises(Exception) as raised:
        torch.compile(step, backend="eager", fullgraph=True)(torch.ones(2, 3), torch.ones(4, 5))
    message = _message(raised.value)
    assert message.startswith("RuntimeError when making fake tensor call (RuntimeError: ")
    assert "must have same reduction dim" in message


def test_the_json_report_of_failing_stages_validates_against_its_schema(tmp_path):
    """The schema ships in the package (neuroncompat/check/report.schema.json); a passing report is validated above.
    Bamba's tiny model fails on the CPU too from generate on (``cpu-fails``: no Neuron verdict), and Reformer's default
    config builds no model in transformers at all (its load is ``cpu-fails``), printed from a worker process as the
    CLI prints it. (No architecture of the pinned transformers fails on the device only since the
    SDPA mask fix, tests/test_simulator_sdpa_mask_grad.py, so a ``fail`` stage has no real model to come from here.)"""
    from importlib.resources import files

    from neuroncompat.check import check_many
    from neuroncompat.check.report import render_json

    assert json.loads((files("neuroncompat.check") / "report.schema.json").read_text()) == SCHEMA
    models = [
        _save(tmp_path / "bamba", transformers.BambaConfig(architectures=["BambaForCausalLM"])),
        # transformers' own default: no decoder flag, so the causal-LM class refuses it at any size
        _save(tmp_path / "reformer", transformers.ReformerConfig(architectures=["ReformerModelWithLMHead"])),
    ]
    # --tensor-parallel: neither config has a plan to split, so the stage is skipped and says why
    documents = [json.loads(render_json(r)) for r in check_many([str(m) for m in models], tensor_parallel=True)]
    for document in documents:
        _validate(document)
    bamba = {stage["stage"]: stage for stage in documents[0]["stages"]}
    assert documents[0]["schema"] == "neuroncompat.check/1" and documents[0]["exit_code"] == 1
    assert bamba["generate"]["status"] == "cpu-fails"
    assert bamba["generate"]["error"].startswith("the CPU fails too: ValueError: `get_seq_length`")
    assert bamba["tensor-parallel"]["status"] == "skipped"
    assert bamba["tensor-parallel"]["detail"] == "no tensor-parallel plan in the config (base_model_tp_plan)"
    reformer = {stage["stage"]: stage for stage in documents[1]["stages"]}  # not the tool's failure, not Neuron's
    assert reformer["load"]["status"] == "cpu-fails" and reformer["generate"]["status"] == "skipped"
    assert reformer["load"]["error"].startswith(
        "the CPU fails too: the model does not build from its config: AssertionError: If you want to use "
        "`ReformerModelWithLMHead` make sure that `is_decoder=True`."
    )
    assert (documents[1]["layers"], documents[1]["parameters"]) == (None, 0)
