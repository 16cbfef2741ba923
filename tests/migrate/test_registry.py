"""The rule table (`migrate.rule_families`): which rules exist, their fix safety, and the hook order.

Both lists are pinned on purpose. Adding a rule means adding its id here; a hook moving to
another place in the order changes which rewrite sees which node first, so it must be a visible,
reviewed change rather than a side effect of reordering imports.
"""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from migrate.cli import main
from migrate.registry import Rule
from migrate.rule_families import all_hooks, all_rules, family_modules, get_rule

RULE_IDS = [
    "NM101",
    "NM102",
    "NM103",
    "NM104",
    "NM105",
    "NM106",
    "NM107",
    "NM108",
    "NM131",
    "NM132",
    "NM133",
    "NM201",
    "NM202",
    "NM203",
    "NM204",
    "NM205",
    "NM206",
    "NM207",
    "NM208",
    "NM209",
    "NM210",
    "NM211",
    "NM212",
    "NM231",
    "NM301",
    "NM302",
    "NM303",
    "NM304",
    "NM305",
    "NM306",
    "NM307",
    "NM331",
    "NM332",
    "NM401",
    "NM403",
    "NM501",
    "NM502",
    "NM503",
    "NM504",
    "NM505",
    "NM506",
    "NM507",
    "NM508",
    "NM511",
    "NM512",
    "NM513",
    "NM514",
    "NM515",
    "NM521",
    "NM522",
    "NM523",
    "NM531",
    "NM532",
    "NM533",
    "NM534",
    "NM601",
    "NM602",
    "NM603",
    "NM604",
    "NM605",
    "NM606",
    "NM607",
    "NM608",
    "NM609",
    "NM610",
    "NM701",
    "NM702",
    "NM703",
    "NM704",
    "NM705",
    "NM706",
    "NM707",
    "NM708",
    "NM709",
    "NM710",
    "NM711",
    "NM801",
    "NM802",
    "NM803",
    "NM804",
    "NM805",
    "NM806",
    "NM807",
    "NM808",
    "NM809",
    "NM810",
    "NM811",
    "NM812",
    "NM813",
    "NM814",
    "NM815",
    "NM816",
    "NM817",
    "NM818",
    "NM819",
    "NM820",
    "NM821",
    "NM822",
    "NM823",
    "NM824",
    "NM825",
    "NM826",
    "NM827",
    "NM828",
    "NM829",
    "NM901",
    "NM902",
    "NM903",
    "NM904",
    "NM905",
    "NM906",
    "NM907",
    "NM908",
    "NM909",
    "NM910",
    "NM911",
    "NM912",
    "NM913",
    "NM914",
    "NM915",
    "NM916",
    "NM917",
    "NM918",
    "NM919",
    "NM920",
    "NM921",
    "NM922",
    "NM923",
    "NM924",
    "NM925",
    "NM926",
    "NM927",
    "NM928",
    "NM929",
    "NM931",
    "NM932",
    "NM933",
    "NM934",
    "NM935",
]

HOOK_ORDER = {
    "Call": (
        "settings.call_settings",
        "device.cuda_method",
        "cuda_api.cuda_api_call",
        "cuda_api.device_module_memory_info",
        "legacy_tensor_types.legacy_tensor_call",
        "precision.precision_call",
        "attention.use_flash_attention_2",
        "quantization.drop_quantization",
        "hub_kernels.hub_kernel_call",
        "generate.generate_call",
        "static_shapes.static_shapes",
        "diffusers_cuda.diffusers_cuda_call",
        "distributed.distributed_call",
        "drift.removed_trl_call",
        "drift.drift_call",
        "optimum_training.optimum_training_call",
        "optimum_inference.optimum_inference_call",
        "optimum_diffusion.optimum_diffusion_call",
        "tensor_parallel.tensor_parallel_call",
        "xla.xla_call",
        "tidy.cuda_label",
        "todo.call_todo",
    ),
    "Assign": (
        "settings.assign_settings",
        "device.device_variable",
        "cuda_api.device_flag",
        "quantization.quantized_kwargs_dict",
        "generate.generate_input_candidates",
        "diffusers_cuda.generator_binding",
        "diffusers_cuda.attention_backend_env",
        "diffusers_cuda.vae_compile",
        "diffusers_cuda.channels_last_assignment",
        "drift.arguments_binding",
        "optimum_training.trn_config_binding",
        "optimum_inference.keyword_dicts",
        "optimum_inference.bind_models",
        "optimum_diffusion.folder_names",
        "xla.loader_binding",
    ),
    "AnnAssign": ("settings.ann_assign_settings", "drift.annotated_binding", "drift.own_dtype_field"),
    "DictElement": ("settings.dict_settings", "precision.torch_dtype_key"),
    "Comparison": ("device.device_comparison",),
    "BooleanOperation": ("cuda_api.bf16_gate",),
    "ImportFrom": ("device.drop_get_kbit_device_map", "drift.removed_trl_import", "todo.import_from_todo"),
    "Attribute": (
        "cuda_api.cuda_api_reference",
        "precision.cuda_amp_reference",
        "quantization.bnb_optimizer_reference",
        "drift.removed_field_read",
        "trl_moved.moved_trl_attribute",
        "optimum_training.dropped_field_read",
        "optimum_training.cli_parallel_attribute",
        "optimum_inference.export_values",
        "todo.attribute_todo",
    ),
    "SimpleStatementLine": (
        "legacy_tensor_types.legacy_tensor_leftover",
        "attention.drop_xformers",
        "quantization.quantized_key_assignment",
        "quantization.kbit_preparation",
        "trl_moved.moved_trl_import",
        "optimum_inference.static_cache",
        "optimum_diffusion.optimum_diffusion_statement",
        "compile_env.compile_env_statement",
        "xla.xla_statement",
    ),
    "IndentedBlock": ("legacy.prune_block",),
    "Module": (
        "cuda_api.keep_device_flags",
        "cuda_api.unused_cuda_import",
        "legacy_tensor_types.unused_aliases",
        "precision.unused_functools",
        "legacy.legacy_module",
        "retired.drop_retired_imports",
    ),
    "Param": ("drift.arguments_shadowed",),
    "FunctionDef": ("drift.parameters_out_of_scope", "optimum_diffusion.pipeline_factory"),
    "With": ("optimum_training.lazy_load",),
    "If": (
        "cuda_api.cuda_only_block",
        "legacy_tensor_types.legacy_tensor_test",
        "attention.xformers_branch",
        "optimum_training.precompilation_branch",
        "xla.repeated_guard",
        "tidy.emptied_if",
        "tidy.identical_branches",
    ),
    "Subscript": ("precision.torch_dtype_subscript", "optimum_inference.old_export_values"),
    "For": ("diffusers_cuda.loop_shapes", "xla.move_batches"),
    "Import": ("todo.import_todo",),
    "FormattedString": ("tidy.cuda_label_in_fstring",),
}


def test_rule_ids_are_pinned_in_id_order() -> None:
    assert [rule.id for rule in all_rules()] == RULE_IDS


def test_every_rule_is_found_by_id_case_insensitively() -> None:
    for rule_id in RULE_IDS:
        rule = get_rule(rule_id.lower())
        assert rule is not None and rule.id == rule_id
    assert get_rule("NM999") is None


def _family(module: str) -> str:
    """The family a hook's module belongs to: `device` for `migrate.rules.device` and `migrate.rules.device.literals`
    alike, so splitting a family into a folder keeps its hooks' names here."""
    return module.removeprefix("migrate.rules.").split(".")[0]


def test_hooks_run_in_the_pinned_family_order() -> None:
    found = {
        node: tuple(f"{_family(hook.__module__)}.{hook.__name__}" for hook in hooks)
        for node, hooks in all_hooks().items()
    }
    assert found == HOOK_ORDER


def test_every_family_declares_its_rules_as_data() -> None:
    for family in family_modules():
        assert isinstance(family.RULES, tuple), family.__name__
    assert sum(len(family.RULES) for family in family_modules()) == len(RULE_IDS)


UNSAFE_IDS = [
    "NM105",
    "NM131",
    "NM133",
    "NM201",
    "NM202",
    "NM204",
    "NM205",
    "NM209",
    "NM210",
    "NM211",
    "NM212",
    "NM303",
    "NM304",
    "NM305",
    "NM306",
    "NM331",
    "NM501",
    "NM503",
    "NM504",
    "NM505",
    "NM506",
    "NM511",
    "NM513",
    "NM514",
    "NM515",
    "NM522",
    "NM531",
    "NM534",
    "NM604",
    "NM608",
    "NM609",
    "NM610",
    "NM703",
    "NM708",
    "NM709",
    "NM711",
    "NM802",
    "NM806",
    "NM807",
    "NM808",
    "NM810",
    "NM812",
    "NM816",
    "NM817",
    "NM819",
    "NM823",
    "NM828",
    "NM904",
]


def test_every_rule_states_its_fix_safety_and_why_when_unsafe() -> None:
    assert [rule.id for rule in all_rules() if rule.safety == "unsafe"] == UNSAFE_IDS
    for rule in all_rules():
        assert rule.safety in ("safe", "unsafe"), rule.id
        assert bool(rule.safety_reason) == (rule.safety == "unsafe"), rule.id
        # a TODO only annotates, except NM904, which also replaces a call that raises without CUDA
        assert not (rule.todo and rule.safety == "unsafe") or rule.id == "NM904", f"{rule.id}: a TODO only annotates"


def test_a_rule_without_a_reason_for_being_unsafe_is_rejected() -> None:
    with pytest.raises(ValueError, match="NM999: an unsafe rule needs a one-line safety_reason"):
        Rule(id="NM999", name="x", summary="", rationale="", before="", after="", safety="unsafe")
    with pytest.raises(ValueError, match="safety must be 'safe' or 'unsafe'"):
        Rule(id="NM999", name="x", summary="", rationale="", before="", after="", safety="maybe")  # type: ignore[arg-type]


def test_a_todo_rule_shows_its_message_in_its_example() -> None:
    rule = Rule(
        id="NM999",
        name="x",
        summary="",
        rationale="",
        before="f()\n",
        after="{t}f()\n",
        safety="safe",
        todo=True,
        message="no f on Neuron",
    )
    assert rule.after == "# TODO(neuron-migrate NM999): no f on Neuron\nf()\n"
    with pytest.raises(ValueError, match="NM999: only a TODO rule has a message"):
        Rule(id="NM999", name="x", summary="", rationale="", before="", after="", safety="safe", message="m")


def test_explain_shows_the_fix_safety() -> None:
    unsafe = CliRunner().invoke(main, ["--explain", "NM305"])
    assert unsafe.exit_code == 0
    assert "Fix safety: unsafe: `drop_last=True` drops the ragged last batch of every epoch." in unsafe.stdout
    assert "Fix safety: safe." in CliRunner().invoke(main, ["--explain", "NM101"]).stdout
