"""A cheap byte-level test that skips files with nothing to migrate, before any parsing.

Parsing with libcst is the dominant cost; most Python files in a repository never mention
CUDA or the APIs the rules touch. Each alternative below is a token some rule needs to see;
a file without any of them cannot produce a rewrite or a TODO. The test is deliberately loose
(a comment mentioning `cuda` passes it); false positives only cost a parse. Tokens that are
common in library code but only rewritten in specific call shapes (`.generate(`, `pipeline(`,
`DataLoader(`) are included because scripts, the target, use them directly. Optimum Neuron
and torch_xla scripts are recognised by their imports (`optimum.neuron`, `torch_xla`), the
`"xla"` device/backend string and torch_xla's environment variables; diffusers scripts by the calls
only they make (`compile_repeated_blocks(`, `set_attention_backend(`, offloading) and by the pipeline
call arguments a loop may vary (`height=size`).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Container

_TOKENS = (
    rb"torch\.cuda|\bcuda\b\s*(?:import|\.)|\.cuda\(|[\"']cuda|\bcuda_?[a-z_]*\s*=|nccl|"
    rb"\bfp16\s*=|[\"']fp16|torch_dtype|[\"']flash_attention_[23]|use_flash_attention_2|"
    rb"\bflash_attn\b|attn_with_flash|xformers|bitsandbytes|BitsAndBytes|load_in_[48]bit|paged_adamw|"
    rb"adamw_8bit|adamw_bnb|GradScaler|\.half\(\)|(?<![=!<>])=\s*torch\.float16|device_map\s*=|"
    rb"(?<!super\(\))(?<!self)\.generate\(|\bpipeline\(|DataLoader\(|DataCollator\w*\(|torch\.compile\(|tf32|"
    rb"use_vllm|(?:from|import)\s+(?:vllm|deepspeed|triton|apex|unsloth|liger_kernel)\b|"
    rb"evaluation_strategy|overwrite_output_dir|logging_dir|warmup_ratio|max_seq_length|"
    rb"max_prompt_length|group_by_length|use_mps_device|\bno_cuda\b|Trainer\(|\breport_to\s*=[^,)]*\bNone\b|"
    rb"prepare_model_for_(?:kbit|int8)_training|DataParallel|\bDDP\(|quantization_config|max_memory\s*=|"
    rb"optimum\.neuron|optimum\s+import\s+neuron|\btorch_xla\b|[\"']xla[\"':]|\bXLA_[A-Z_]+|PJRT_DEVICE|"
    rb"\b(?:tp_plan|tp_size|device_mesh|distributed_config)\s*=|NEURON_(?:CC_FLAGS|COMPILE_CACHE_URL|PARALLEL_COMPILE)|"
    rb"CUSTOM_CACHE_REPO|init_device_mesh\(|setup_chat_format|\b(?:ORPO|CPO|GKD|OnlineDPO)(?:Config|Trainer)\b|"
    rb"MergeModelCallback|DataCollatorForChatML|trl\.commands|\.trust_remote_code\b|\bget_kernel\(|use_kernels|KernelConfig\(|\.mem_get_info\("
)
# Tokens only the diffusers rules act on, and they act only in files that import diffusers
# (`migrate.rules.diffusers_common.is_diffusers_file`): generators given a device variable, attention
# backends, regional compile, offloading, tuning flags, quantizers, and the pipeline call arguments a
# loop may vary. A `width = image.shape[-1]` in library code is no pipeline call.
_DIFFUSERS_TOKENS = (
    rb"torch\.Generator\(|attention_backend\(|DIFFUSERS_ATTN_BACKEND|compile_repeated_blocks\(|group_offload|"
    rb"sequential_cpu_offload|channels_last|_inductor|cudnn|QuantizationConfig\(|QuantoConfig\(|"
    rb"\b(?:num_images_per_prompt|guidance_scale|height|width|true_cfg_scale|max_sequence_length)\s*="
)
_TRIGGERS = re.compile(_TOKENS)
_DIFFUSERS_TRIGGERS = re.compile(_DIFFUSERS_TOKENS)
PROSE = re.compile(rb"[ \t]*(?:>>>|\.\.\.|#)")  # doctest and comment lines


# Stage one: plain substrings (a C-speed scan); every token above contains one of them.
_LITERALS = (
    b"cuda",
    b"nccl",
    b"fp16",
    b"torch_dtype",
    b"flash_att",
    b"attn_with_flash",
    b"xformers",
    b"itsandbytes",
    b"BitsAndBytes",
    b"load_in_",
    b"adamw_",
    b"GradScaler",
    b".half()",
    b"float16",
    b"device_map",
    b".generate(",
    b"pipeline(",
    b"DataLoader(",
    b"DataCollator",
    b"torch.compile(",
    b"tf32",
    b"vllm",
    b"deepspeed",
    b"triton",
    b"apex",
    b"unsloth",
    b"liger_kernel",
    b"evaluation_strategy",
    b"overwrite_output_dir",
    b"logging_dir",
    b"warmup_ratio",
    b"max_seq_length",
    b"max_prompt_length",
    b"group_by_length",
    b"report_to",
    b"use_mps_device",
    b"Trainer(",
    b"prepare_model_for_",
    b"DDP(",
    b"DataParallel",
    b"quantization_config",
    b"max_memory",
    b"optimum",
    b"xla",
    b"XLA",
    b"PJRT_DEVICE",
    b"tp_plan",
    b"tp_size",
    b"device_mesh",
    b"distributed_config",
    b"NEURON_",
    b"CUSTOM_CACHE_REPO",
    b"init_device_mesh(",
    b"setup_chat_format",
    b"ORPO",
    b"CPO",
    b"GKD",
    b"OnlineDPO",
    b"MergeModelCallback",
    b"trl.commands",
    b".trust_remote_code",
    b"get_kernel(",
    b"use_kernels",
    b"KernelConfig(",
    b".mem_get_info(",
)
_DIFFUSERS_LITERALS = (
    b"Generator(",
    b"attention_backend(",
    b"DIFFUSERS_ATTN_BACKEND",
    b"compile_repeated_blocks(",
    b"group_offload",
    b"sequential_cpu_offload",
    b"channels_last",
    b"_inductor",
    b"cudnn",
    b"QuantizationConfig(",
    b"QuantoConfig(",
    b"num_images_per_prompt",
    b"guidance_scale",
    b"height",
    b"width",
    b"true_cfg_scale",
    b"max_sequence_length",
)


def may_need_migration(data: bytes, prose_lines: Container[int] = ()) -> bool:
    """True when the raw file bytes contain a token a rule could act on, outside doctests.

    Stage one finds candidate lines by plain substring search; stage two runs the token regex
    on those lines only. Doctest lines (`>>> model.generate(...)` in docstrings) and comment
    lines (`# flash_attn<2.1 generates ...`) are prose, library code is full of them, and no rule
    rewrites them, so a hit on a line starting with `>>>`, `...` or `#` does not count; nor does one
    on a line in `prose_lines` (1-based: the inner lines of docstrings, `docstring_lines`).
    """
    if _found(data, _LITERALS, _TRIGGERS, prose_lines):
        return True
    return b"diffusers" in data and _found(data, _DIFFUSERS_LITERALS, _DIFFUSERS_TRIGGERS, prose_lines)


def code_lines(data: bytes, prose_lines: Container[int]) -> bytes:
    """`data` without the lines `may_need_migration` calls prose: comment and doctest lines and `prose_lines`.

    The rule families' tokens are looked for in what is left (`migrate.rule_families.active_families`): a
    library file's comments and docstrings mention `flash_attention_2`, `optimum` or `kernels` in prose, and
    no rule rewrites prose, so they switch no family on.
    """
    return b"\n".join(
        line
        for number, line in enumerate(data.split(b"\n"), start=1)
        if not PROSE.match(line) and number not in prose_lines
    )


def docstring_lines(tree: ast.Module) -> set[int]:
    """The lines wholly inside a string statement (a docstring) of CPython's tree of a file.

    Library docstrings mention `model.generate(...)`, `use_kernels=True` or `"cuda"` in their examples
    and prose without a `>>>`; no rule rewrites a string statement. Only the lines strictly between a
    multi-line string's first and last line count: those hold nothing but the string, while its first
    and last may share a line with code (a call after the closing quotes is unusual, and then it still counts).
    Statements are walked, not expressions: a docstring is a statement of some body.
    """
    lines: set[int] = set()
    bodies: list[list[ast.stmt]] = [tree.body]
    while bodies:
        for statement in bodies.pop():
            if (
                type(statement) is ast.Expr
                and type(statement.value) is ast.Constant
                and isinstance(statement.value.value, str)
                and statement.end_lineno is not None
            ):
                lines.update(range(statement.lineno + 1, statement.end_lineno))
                continue
            for field in ("body", "orelse", "finalbody", "handlers", "cases"):
                inner = getattr(statement, field, None)
                if inner:
                    bodies.append(inner)
    return lines


def _found(data: bytes, literals: tuple[bytes, ...], triggers: re.Pattern[bytes], prose_lines: Container[int]) -> bool:
    """Whether a line holding one of `literals` matches `triggers`, doctest and `prose_lines` aside."""
    for literal in literals:
        index = data.find(literal)
        while index != -1:
            start = data.rfind(b"\n", 0, index) + 1
            end = data.find(b"\n", index)
            end = len(data) if end == -1 else end
            if (
                not PROSE.match(data, start)
                and triggers.search(data, start, end)
                and (not prose_lines or data.count(b"\n", 0, start) + 1 not in prose_lines)
            ):
                return True
            index = data.find(literal, end)
    return False


# NM302 (migrate/rules/generate.py, `_generate`) leaves a `.generate(` call alone when it forwards its settings (a
# `**` splat of a name like these) or is given a generation config, a cache or a cache implementation; the family's
# rules on a call's inputs act only in a file that mentions `device_map` (NM301), or `pad_token` and holds a tokenizer
# call with `return_tensors` in its code (NM303).
# a `**name` splat that forwards settings: NM302 leaves such a `.generate(` call alone (rules/generate.py reads it too)
FORWARDED = re.compile(r"(?i)\w*(kwargs|config|params|args)\w*")
_SETTLED = frozenset({"generation_config", "past_key_values", "cache_implementation"})


def only_forwarding_generate(data: bytes, prose_lines: set[int], tree: ast.Module) -> bool:
    """Whether `data` passes `may_need_migration` only on lines of `.generate(` calls no rule rewrites, each holding
    no other token. Library code calls a submodel's `generate` forwarding its settings (`self.text_decoder.generate(
    input_ids, **generate_kwargs)`): such a file need not be parsed by libcst to find nothing. `tree` is CPython's
    tree of `data`, where the calls are found; it is walked only when masking those lines would drop the file."""
    if b".generate(" not in data or b"device_map" in data:
        return False
    if b"pad_token" in data and b"return_tensors" in code_lines(data, prose_lines):  # a tokenizer call in code
        return False
    lines: dict[int, bytes] = {}
    for number, line in enumerate(data.split(b"\n"), start=1):
        if b".generate(" in line and number not in prose_lines and _TRIGGERS.search(line) and not PROSE.match(line):
            lines[number] = line
    if not lines or may_need_migration(data, prose_lines.union(lines)):
        return False
    if any(may_need_migration(line.replace(b".generate(", b"")) for line in lines.values()):
        return False
    forwarding: set[int] = set()
    for node in ast.walk(tree):
        if type(node) is ast.Call and type(node.func) is ast.Attribute and node.func.attr == "generate":
            number = node.func.end_lineno or node.lineno
            if number in lines and not _forwards(node):
                return False
            forwarding.add(number)
    return forwarding.issuperset(lines)


def _forwards(call: ast.Call) -> bool:
    for keyword in call.keywords:
        if keyword.arg in _SETTLED:
            return True
        if keyword.arg is None:
            value = keyword.value
            name = value.id if type(value) is ast.Name else value.attr if type(value) is ast.Attribute else ""
            if FORWARDED.fullmatch(name):
                return True
    return False
