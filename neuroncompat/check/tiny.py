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
Whatever else is given per layer follows the cut: lists of numbers as long as the model is deep (Gemma 3n's
``intermediate_size``, Laguna's heads per layer) keep their first entries, sizes among them shrunk;
``per_layer_config`` overrides (Gemma 4's wider full-attention heads) keep the layers that remain, with a
size that differs from the model's default kept different (twice or half the tiny one). A model whose layers
of one kind share weights (Zamba's hybrid layers share one transformer block) needs two of that kind:
``repeats=2`` asks for each kind twice. Where the last layers reuse earlier layers' key/value cache (Gemma 3n's
``num_kv_shared_layers``), the depth doubles so that both halves hold every kind.

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
    "encoder_attention_heads": HEADS,
    "decoder_attention_heads": HEADS,
    "encoder_ffn_dim": 2 * WIDTH,
    "decoder_ffn_dim": 2 * WIDTH,
    "d_inner": 2 * WIDTH,
    "d_head": HEAD_DIM,
    "ffn_hidden_size": 2 * WIDTH,
    "expert_ffn_hidden_size": WIDTH // 2,
    "head_dim": HEAD_DIM,
    "rotary_dim": HEAD_DIM // 2,  # GPT-J, CodeGen: a rotary part of each head (64 of 256), still a part
    "attention_head_dim": 2 * HEAD_DIM,  # Zamba: attention over the residual and the embeddings side by side
    "kv_channels": HEAD_DIM,
    "mamba_dt_rank": 8,
    "adapter_in_dim": WIDTH,  # Dots 3's vision and audio adapters take their encoder's width
    "adapter_input_size": WIDTH,
    "adapter_out_dim": WIDTH,  # ... and give the language model its width
    "vocab_size": VOCAB,
    "decoder_vocab_size": VOCAB,
    "embedding_dim": WIDTH,
    "adapter_rank": 8,
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
_TOP_K = ("num_experts_per_tok", "moe_topk", "zero_expert_num")  # experts per token (LongCat's zero experts too)
# depth keys other than ``num_hidden_layers`` (no per-layer lists go with them): 2 layers each
_OTHER_DEPTHS = ("num_layers", "n_layer", "encoder_layers", "decoder_layers")
_TOKEN_IDS = ("pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id")


def _kv_heads(heads: int | None, kv: int | None) -> int | None:
    """Key/value heads in the same relation to the query heads as the full model's."""
    if kv is None:
        return None
    if heads is not None and kv >= heads:
        return HEADS
    return 1 if kv == 1 else 2


def _depth(values: dict[str, Any], repeats: int) -> dict[str, Any]:
    """The shortest depth that keeps every kind of layer (see the module docstring).

    Every per-layer list of kinds (``layer_types``, ``mlp_layer_types``, ...: strings, one per layer) is cut to the
    shortest prefix that holds each of its kinds ``repeats`` times (or as often as the list has it), the longest
    such prefix over the lists (at most ``MAX_LAYERS``); per-layer lists of numbers and ``per_layer_config``
    follow that depth.
    """
    layers = values["num_hidden_layers"]
    per_layer = {
        key: value
        for key, value in values.items()
        if isinstance(value, list) and len(value) == layers > 1 and all(isinstance(kind, str) for kind in value)
    }
    out: dict[str, Any] = {}
    if per_layer:
        depth = max(_prefix(kinds, repeats) for kinds in per_layer.values())
        overrides = values.get("per_layer_config")
        if isinstance(overrides, dict) and overrides:  # keep at least one overridden layer
            depth = max(depth, min(int(index) for index in overrides) + 1)
        depth = min(depth, MAX_LAYERS)
        shared = values.get("num_kv_shared_layers")
        if isinstance(shared, int) and shared > 0:  # the last layers reuse earlier layers' key/value cache (Gemma 3n)
            out["num_kv_shared_layers"] = depth  # every kind among the layers that fill the cache and those reusing it
            depth *= 2
        out.update({key: value[:depth] for key, value in per_layer.items()})
    else:
        depth = 2 * repeats
        for key, value in values.items():
            if key.endswith("_layer_period") and isinstance(value, int) and value > 1:
                out[key] = 2
                offset = key.replace("_period", "_offset")
                if offset in values:
                    out[offset] = 1
    out["num_hidden_layers"] = depth
    for key, value in values.items():  # numbers per layer: the first `depth`, sizes shrunk
        if key not in per_layer and isinstance(value, list) and len(value) == layers > 1:
            if all(isinstance(number, (int, float)) and not isinstance(number, bool) for number in value):
                size = _SIZES.get(key.removesuffix("_per_layer"))
                out[key] = [size if size is not None and isinstance(n, int) else n for n in value[:depth]]
    if isinstance(values.get("per_layer_config"), dict):
        out["per_layer_config"] = _per_layer_overrides(values, depth)
    return out


def _prefix(kinds: list[str], repeats: int) -> int:
    """The length of the shortest prefix of ``kinds`` holding each kind ``repeats`` times (or all it has)."""
    wanted = {kind: min(repeats, kinds.count(kind)) for kind in set(kinds)}
    for end in range(1, len(kinds) + 1):
        if all(kinds[:end].count(kind) >= count for kind, count in wanted.items()):
            return end
    return len(kinds)


def _per_layer_overrides(values: dict[str, Any], depth: int) -> dict[str, Any]:
    """``per_layer_config`` for the layers kept: a size that differs from the default stays different."""
    out: dict[str, Any] = {}
    for index, override in values["per_layer_config"].items():
        if int(index) >= depth or not isinstance(override, dict):
            continue
        tiny = dict(override)
        for key, value in override.items():
            size, default = _SIZES.get(key), values.get(key)
            if key == "num_key_value_heads" and isinstance(value, int):
                tiny[key] = _kv_heads(override.get("num_attention_heads", values.get("num_attention_heads")), value)
            elif size is None or not isinstance(value, int):
                continue
            elif key == "num_attention_heads":
                tiny[key] = HEADS
            elif isinstance(default, int) and value != default:
                tiny[key] = 2 * size if value > default else max(size // 2, 1)
            else:
                tiny[key] = size
        out[index] = tiny
    return out


def tiny_values(values: dict[str, Any], repeats: int = 1) -> dict[str, Any]:
    """The config dict of the tiny model: sizes shrunk, everything else as given (sub-configs shrunk too)."""
    out = dict(values)
    for key, value in values.items():  # a sub-config: it names its model type or has a size of its own (BLT's)
        if isinstance(value, dict) and key.endswith("_config") and ("model_type" in value or _SIZES.keys() & value):
            out[key] = tiny_values(value, repeats)
    heads = values.get("num_attention_heads")
    out.update({key: size for key, size in _SIZES.items() if isinstance(values.get(key), int)})
    for key in ("num_key_value_heads", "num_query_groups"):
        kv = _kv_heads(heads, values.get(key))
        if kv is not None:
            out[key] = kv
    attention, hidden = values.get("attention_hidden_size"), values.get("hidden_size")
    if isinstance(attention, int) and isinstance(hidden, int):  # a multiple of the width: RWKV's 1x, Zamba's 2x
        out["attention_hidden_size"] = WIDTH * max(attention // hidden, 1)
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
    if isinstance(values.get("n_mamba_heads"), int) and isinstance(values.get("mamba_headdim"), int):  # Zamba 2
        out["mamba_headdim"] = HEAD_DIM
        out["n_mamba_heads"] = (values.get("mamba_expand") or 2) * WIDTH // HEAD_DIM
    if isinstance(values.get("qk_rope_head_dim"), int):  # multi-head latent attention (DeepSeek-V2/V3)
        out["head_dim"] = out["qk_rope_head_dim"]  # its rotary part, as the config derives it
        rope, nope, full_dim = values["qk_rope_head_dim"], values.get("qk_nope_head_dim"), values.get("head_dim")
        if isinstance(nope, int) and isinstance(full_dim, int) and full_dim > rope:  # Dots 3: non-rotary + rotary
            tiny_nope = out["qk_nope_head_dim"]  # the same or, for a layer override's wider part, twice (as overrides)
            out["head_dim"] += tiny_nope if full_dim - rope == nope else 2 * tiny_nope
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
    for key in _TOP_K:
        if isinstance(values.get(key), int):
            out[key] = min(values[key], 2)
    if isinstance(values.get("n_shared_experts"), int):
        out["n_shared_experts"] = min(values["n_shared_experts"], 1)
    if isinstance(values.get("sliding_window"), int):
        out["sliding_window"] = 8
    if isinstance(values.get("num_hidden_layers"), int):
        out.update(_depth(values, repeats))
        depth = out["num_hidden_layers"]
        if values.get("num_blocks") == values["num_hidden_layers"]:  # xLSTM names its depth twice
            out["num_blocks"] = depth
        for key in ("mlp_only_layers",):
            if isinstance(values.get(key), list):
                out[key] = [i for i in values[key] if i < depth]
    out.update({key: 2 * repeats for key in _OTHER_DEPTHS if isinstance(values.get(key), int)})
    kinds = values.get("attention_types")
    if "num_layers" in values and isinstance(kinds, list) and all(isinstance(k, list) and len(k) == 2 for k in kinds):
        # GPT-Neo: [[kinds, times], ...] expands to one kind per layer; each pattern once (twice for repeats=2)
        out["attention_types"] = [[pattern, repeats] for pattern, _ in kinds]
        out["num_layers"] = sum(len(pattern) for pattern, _ in kinds) * repeats
        if "attention_layers" in values:  # the expanded list, which the config would otherwise take as given
            out["attention_layers"] = [kind for pattern, _ in kinds for _ in range(repeats) for kind in pattern]
    for key, value in values.items():  # dropout draws from each device's own generator: no equal losses with it
        if isinstance(value, float) and ("dropout" in key or key.endswith("pdrop")):
            out[key] = 0.0
    for number, key in enumerate(_TOKEN_IDS):
        if isinstance(values.get(key), int) and values[key] >= VOCAB:
            out[key] = number
    return out


def tiny_config(config: Any, repeats: int = 1) -> Any:
    """A ``PretrainedConfig`` of the same class with the tiny sizes (see :func:`tiny_values`)."""
    values = tiny_values(config.to_dict(), repeats)
    values.pop("transformers_version", None)
    return type(config).from_dict(values)
