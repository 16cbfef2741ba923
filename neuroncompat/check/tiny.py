"""A tiny random model of the same architecture as a user's config: what ``neuroncompat check`` runs.

Whether an architecture runs on Neuron depends on its code paths (layer classes, attention variants,
routing, state-space scans, cache kinds), not on its width or depth. So the user's config is kept
whole (class, ``model_type``, activation, rope and its scaling, attention variants, dtype, ``tp_plan``)
and only its sizes shrink: width 64 (4 heads of 16, key/value heads kept in proportion: MHA stays MHA,
MQA stays MQA, GQA gets 2), MLPs 128 wide, 4 experts of which at most 2 per token, a 256-token
vocabulary, sliding windows of 8 tokens (so a 16-token check crosses them). Depth is the smallest that
keeps every kind of layer the full model has: a ``layer_types`` list is cut to its shortest prefix that
holds each type once (Gemma 3's 5 sliding + 1 full: 6 layers; Qwen3-Next's 3 linear + 1 full: 4), a
period/offset layout (Jamba's attention and expert layers) becomes period 2, offset 1; otherwise 2 layers.

Dropout probabilities become 0: the device's generator is not the CPU's, and the training stages compare
losses with the CPU's (the dropout layers still run).

The config is rebuilt through its own class so that values derived in ``__init__`` (Mamba's inner width
from ``expand``) follow the new sizes.
"""

from __future__ import annotations

from typing import Any

WIDTH = 64
HEADS = 4
HEAD_DIM = WIDTH // HEADS
VOCAB = 256
MAX_LAYERS = 8

# size keys -> their tiny value, where the config has them (names differ across transformers' configs)
_SIZES: dict[str, int] = {
    "hidden_size": WIDTH,
    "d_model": WIDTH,
    "n_embd": WIDTH,
    "intermediate_size": 2 * WIDTH,
    "ffn_dim": 2 * WIDTH,
    "moe_intermediate_size": WIDTH // 2,
    "shared_expert_intermediate_size": WIDTH // 2,
    "num_attention_heads": HEADS,
    "n_head": HEADS,
    "head_dim": HEAD_DIM,
    "vocab_size": VOCAB,
    "max_position_embeddings": 256,
    "state_size": 16,
    "d_state": 16,
    "mamba_d_state": 16,
    "time_step_rank": 8,
    "linear_num_key_heads": 2,
    "linear_num_value_heads": 4,
    "linear_key_head_dim": HEAD_DIM,
    "linear_value_head_dim": HEAD_DIM,
    "kv_lora_rank": 32,
    "q_lora_rank": 32,
    "qk_rope_head_dim": 8,
    "qk_nope_head_dim": 8,
    "v_head_dim": HEAD_DIM,
}
_EXPERTS = ("num_experts", "num_local_experts", "n_routed_experts")
_TOKEN_IDS = ("pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id")


def _kv_heads(heads: int | None, kv: int | None) -> int | None:
    """Key/value heads in the same relation to the query heads as the full model's."""
    if kv is None:
        return None
    if heads is not None and kv >= heads:
        return HEADS
    return 1 if kv == 1 else 2


def _depth(values: dict[str, Any]) -> dict[str, Any]:
    """The shortest depth that keeps every kind of layer (see the module docstring).

    Every per-layer list of kinds (``layer_types``, ``mlp_layer_types``, ...: strings, one per layer) is cut to the
    shortest prefix that holds each of its kinds, the longest such prefix over the lists (at most ``MAX_LAYERS``).
    """
    layers = values["num_hidden_layers"]
    per_layer = {
        key: value
        for key, value in values.items()
        if isinstance(value, list) and len(value) == layers > 1 and all(isinstance(kind, str) for kind in value)
    }
    if per_layer:
        depth = max(next(i + 1 for i in range(len(v)) if set(v[: i + 1]) == set(v)) for v in per_layer.values())
        depth = min(depth, MAX_LAYERS)
        return {"num_hidden_layers": depth, **{key: value[:depth] for key, value in per_layer.items()}}
    out: dict[str, Any] = {"num_hidden_layers": 2}
    for key, value in values.items():
        if key.endswith("_layer_period") and isinstance(value, int) and value > 1:
            out[key] = 2
            offset = key.replace("_period", "_offset")
            if offset in values:
                out[offset] = 1
    return out


def tiny_values(values: dict[str, Any]) -> dict[str, Any]:
    """The config dict of the tiny model: sizes shrunk, everything else as given (sub-configs shrunk too)."""
    out = dict(values)
    for key, value in values.items():
        if isinstance(value, dict) and key.endswith("_config") and "model_type" in value:
            out[key] = tiny_values(value)
    heads = values.get("num_attention_heads")
    out.update({key: size for key, size in _SIZES.items() if isinstance(values.get(key), int)})
    kv = _kv_heads(heads, values.get("num_key_value_heads"))
    if kv is not None:
        out["num_key_value_heads"] = kv
    if isinstance(values.get("expand"), int) and "intermediate_size" in values:
        out["intermediate_size"] = values["expand"] * WIDTH
    if isinstance(values.get("expand"), int) and isinstance(values.get("num_heads"), int) and "head_dim" in values:
        out["num_heads"] = values["expand"] * WIDTH // HEAD_DIM  # Mamba 2: heads x head_dim spans the inner width
    if isinstance(values.get("mamba_n_heads"), int) and isinstance(values.get("mamba_d_head"), int):
        expand: int = values["mamba_expand"] if isinstance(values.get("mamba_expand"), int) else 2
        out["mamba_d_head"] = HEAD_DIM  # Bamba, Granite-4, Falcon-H1: heads x head width = expand x width
        out["mamba_n_heads"] = expand * WIDTH // HEAD_DIM
        if isinstance(values.get("mamba_d_ssm"), int):  # Falcon-H1 names the inner width itself
            out["mamba_d_ssm"] = expand * WIDTH
    if isinstance(values.get("qk_rope_head_dim"), int):  # multi-head latent attention (DeepSeek-V2/V3)
        out["head_dim"] = out["qk_rope_head_dim"]  # its rotary part, as the config derives it
        if "qk_head_dim" in values:
            out["qk_head_dim"] = out["qk_nope_head_dim"] + out["qk_rope_head_dim"]
    for key in _EXPERTS:
        if isinstance(values.get(key), int) and values[key] > 1:
            out[key] = 4
    for key in ("n_group", "num_expert_group"):  # grouped routing (DeepSeek-V3 style): 2 groups of 2 experts
        if isinstance(values.get(key), int) and values[key] > 1:
            out[key] = 2
            if isinstance(values.get("topk_group"), int):
                out["topk_group"] = min(values["topk_group"], 2)
    if isinstance(values.get("num_experts_per_tok"), int):
        out["num_experts_per_tok"] = min(values["num_experts_per_tok"], 2)
    if isinstance(values.get("n_shared_experts"), int):
        out["n_shared_experts"] = min(values["n_shared_experts"], 1)
    if isinstance(values.get("sliding_window"), int):
        out["sliding_window"] = 8
    if "num_hidden_layers" in values:
        out.update(_depth(values))
        depth = out["num_hidden_layers"]
        for key in ("mlp_only_layers",):
            if isinstance(values.get(key), list):
                out[key] = [i for i in values[key] if i < depth]
    for key, value in values.items():  # dropout draws from each device's own generator: no equal losses with it
        if isinstance(value, float) and ("dropout" in key or key.endswith("pdrop")):
            out[key] = 0.0
    for number, key in enumerate(_TOKEN_IDS):
        if isinstance(values.get(key), int) and values[key] >= VOCAB:
            out[key] = number
    return out


def tiny_config(config: Any) -> Any:
    """A ``PretrainedConfig`` of the same class with the tiny sizes (see :func:`tiny_values`)."""
    values = tiny_values(config.to_dict())
    values.pop("transformers_version", None)
    return type(config).from_dict(values)
