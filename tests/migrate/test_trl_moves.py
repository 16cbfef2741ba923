"""TRL 1.x moves and removals in migrated scripts: removed helpers (`setup_chat_format`), the removed
`trl.commands.cli_utils`, fields that moved to the trainer configs (`trust_remote_code`, SFTTrainer keywords),
`group_by_length` carried with its value, recipes' `torch_dtype` and the scripts that read it. Where TRL is
installed the migrated code also runs against it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from migrated import migrate, migrate_with_todos

from migrate.dispatch import migrate_file

# setup_chat_format: its import goes even while a branch still calls it -------------------------------

SFT_WITH_CHAT_FORMAT = (
    "from trl import SFTConfig, SFTTrainer, setup_chat_format\n\n\n"
    "def prepare(model, tokenizer):\n"
    "    if tokenizer.chat_template is None:\n"
    '        model, tokenizer = setup_chat_format(model, tokenizer, format="chatml")\n'
    "    return model, tokenizer\n"
)


def test_a_removed_trl_helper_called_on_a_branch_loses_its_import_and_keeps_its_todo():
    out, todos = migrate_with_todos(SFT_WITH_CHAT_FORMAT)
    assert "from trl import SFTConfig, SFTTrainer\n" in out
    assert todos == ["924"]
    todo_line, call_line = out.splitlines()[-3:-1]
    assert "TODO(neuron-migrate NM924): TRL 1.x removed setup_chat_format" in todo_line
    assert call_line.strip().startswith("model, tokenizer = setup_chat_format(")


def test_the_migrated_script_imports_under_trl_1x_and_runs_the_branch_not_taken():
    pytest.importorskip("trl")
    with pytest.raises(ImportError, match="setup_chat_format"):
        exec(compile(SFT_WITH_CHAT_FORMAT, "train.py", "exec"), {})
    out, _ = migrate_with_todos(SFT_WITH_CHAT_FORMAT)
    namespace: dict[str, object] = {}
    exec(compile(out, "train.py", "exec"), namespace)

    class Tokenizer:
        chat_template = "{{ messages }}"

    model, tokenizer = object(), Tokenizer()
    assert namespace["prepare"](model, tokenizer) == (model, tokenizer)  # type: ignore[operator]


def test_an_unused_import_of_a_removed_trl_helper_goes_without_a_todo():
    src = "import torch\nfrom trl import setup_chat_format\nfrom peft import LoraConfig\n\nx = torch.zeros(2).cuda()\n"
    out, todos = migrate_with_todos(src)
    assert "setup_chat_format" not in out
    assert "from peft import LoraConfig\n" in out
    assert todos == []


def test_an_aliased_or_attribute_call_gets_the_todo_too():
    aliased, todos = migrate_with_todos("from trl import setup_chat_format as chatml\n\nm, t = chatml(m, t)\n")
    assert "import" not in aliased and todos == ["924"]
    attribute, todos = migrate_with_todos("import trl\n\nm, t = trl.setup_chat_format(m, t)\n")
    assert attribute.startswith("import trl\n") and todos == ["924"]


# trl.commands.cli_utils --------------------------------------------------------------------------------


def test_trl_parser_from_the_removed_cli_utils_is_imported_from_trl():
    src = (
        "from dataclasses import dataclass\n"
        "from trl.commands.cli_utils import  TrlParser\n"
        "from trl.commands.cli_utils import init_zero_verbose as quiet\n"
    )
    out, _ = migrate_with_todos(src)
    assert "trl.commands" not in out
    assert "from trl import TrlParser\n" in out and "from trl import init_zero_verbose as quiet\n" in out
    pytest.importorskip("trl")
    exec(compile(out, "train.py", "exec"), {})


def test_a_cli_utils_name_trl_1x_does_not_export_is_left_in_place():
    out, _ = migrate_with_todos("from trl.commands.cli_utils import TrlParser, SFTScriptArguments\n")
    assert out == "from trl.commands.cli_utils import SFTScriptArguments\nfrom trl import TrlParser\n"


# ModelConfig.trust_remote_code -> the trainer config -------------------------------------------------------

TRUST_REMOTE_CODE = (
    "from transformers import AutoTokenizer\n"
    "from trl import ModelConfig, SFTConfig, TrlParser\n\n\n"
    "def get_tokenizer(model_args: ModelConfig, training_args: SFTConfig):\n"
    "    return dict(trust_remote_code=model_args.trust_remote_code)\n\n\n"
    "def get_revision(model_args: ModelConfig):\n"
    "    return model_args.model_revision, model_args.trust_remote_code\n\n\n"
    "def main(argv):\n"
    "    parser = TrlParser((ModelConfig, SFTConfig))\n"
    "    model_args, training_args = parser.parse_args_and_config(argv)\n"
    "    return get_tokenizer(model_args, training_args), model_args.trust_remote_code\n"
)


def test_trust_remote_code_is_read_from_the_trainer_config_in_reach():
    out, todos = migrate_with_todos(TRUST_REMOTE_CODE)
    assert "    return dict(trust_remote_code=training_args.trust_remote_code)\n" in out
    assert "get_tokenizer(model_args, training_args), training_args.trust_remote_code\n" in out
    # a later function without a trainer config must not read the previous function's parameter
    assert "    return model_args.model_revision, model_args.trust_remote_code\n" in out
    assert todos == ["921"]


def test_the_flag_reaches_the_migrated_reads_through_trl_parser():
    pytest.importorskip("trl")
    argv = ["--model_name_or_path", "m", "--output_dir", "o", "--trust_remote_code", "true", "--use_cpu", "true"]
    namespace: dict[str, object] = {}
    exec(compile(TRUST_REMOTE_CODE, "train.py", "exec"), namespace)
    with pytest.raises(AttributeError, match="trust_remote_code"):
        namespace["main"](argv)  # type: ignore[operator]
    out, _ = migrate_with_todos(TRUST_REMOTE_CODE)
    namespace = {}
    exec(compile(out, "train.py", "exec"), namespace)
    assert namespace["main"](argv) == ({"trust_remote_code": True}, True)  # type: ignore[operator]


def test_a_script_that_sets_the_field_itself_is_left_alone():
    src = (
        "from trl import ModelConfig\n\n"
        "def f(model_args: ModelConfig, training_args):\n"
        "    model_args.trust_remote_code = True\n"
        "    return model_args.trust_remote_code\n"
    )
    out, todos = migrate_with_todos(src)
    assert out == src and todos == []


# trainer keywords TRL 1.x reads only from the config (philschmid's run_fsdp_qlora.py: SFTTrainer(packing=True)) -----


def test_sft_trainer_keywords_that_moved_to_the_config_get_a_todo_naming_each():
    src = (
        "from trl import SFTTrainer\n\n"
        "trainer = SFTTrainer(\n    model=model,\n    args=training_args,\n    dataset_text_field='text',\n"
        "    max_seq_length=64,\n    packing=True,\n    chars_per_token=3.6,\n)\n"
    )
    out, todos = migrate_with_todos(src)
    assert todos == ["929"]
    assert (
        "TRL 1.x SFTTrainer no longer takes these keywords: set dataset_text_field, max_seq_length (there: max_length), "
        "packing on the SFTConfig passed as args; chars_per_token: no TRL 1.x setting, drop\n"
    ) in out
    assert "packing=True" in out, "the settings stay for a person to move: dropping them changes the run"


def test_a_trainer_of_another_library_is_left_alone():
    src = "from mylib import SFTTrainer\n\ntrainer = SFTTrainer(model, packing=True)\n"
    assert migrate_with_todos(src) == (src, [])


def test_the_moved_keywords_table_matches_the_installed_trl():
    """Every keyword is gone from the trainer's signature; every target is a field of its config."""
    trl = pytest.importorskip("trl")
    import dataclasses
    import inspect

    from migrate.rules.drift import TRAINER_KWARGS_MOVED

    for trainer, moved in TRAINER_KWARGS_MOVED.items():
        parameters = inspect.signature(getattr(trl, trainer).__init__).parameters
        fields = {f.name for f in dataclasses.fields(getattr(trl, trainer.removesuffix("Trainer") + "Config"))}
        assert not set(moved) & set(parameters), trainer
        assert {target for target in moved.values() if target is not None} <= fields, trainer
        assert not {keyword for keyword, target in moved.items() if target is None} & fields, trainer


# C2: group_by_length=<expr> carries its value ------------------------------------------------------


def test_c2_group_by_length_expression_is_carried_not_switched_on():
    src = (
        "import transformers\n\n"
        "def train(group_by_length: bool = False):\n"
        '    return transformers.TrainingArguments(output_dir="o", group_by_length=group_by_length)\n'
    )
    out = migrate(src)
    assert 'train_sampling_strategy="group_by_length" if group_by_length else "random"' in out
    literal = migrate('import transformers\na = transformers.TrainingArguments(output_dir="o", group_by_length=True)\n')
    assert 'train_sampling_strategy="group_by_length")' in literal


def test_c2_the_else_value_is_transformers_default():
    import dataclasses

    transformers = pytest.importorskip("transformers")
    fields = {f.name: f for f in dataclasses.fields(transformers.TrainingArguments)}
    assert fields["train_sampling_strategy"].default == "random"


# YAML recipes' torch_dtype -> dtype (NM818): the script's readers follow ------------------------------

MODEL_UTILS = (
    "import torch\nfrom trl import ModelConfig\n\n\n"
    "def get_dtype(model_args: ModelConfig):\n"
    '    return model_args.torch_dtype if model_args.torch_dtype in ["auto", None] else getattr(torch, model_args.torch_dtype)\n\n\n'
    "def get_dtype_unannotated(model_args, training_args):\n"
    "    return model_args.torch_dtype\n"
)


def test_readers_of_trl_model_config_torch_dtype_follow_the_recipe_rename():
    out = migrate(MODEL_UTILS, "model_utils.py")
    assert "torch_dtype" not in out.replace("import torch", "")
    assert "model_args.dtype if model_args.dtype in" in out
    assert "return model_args.dtype\n" in out


def test_a_migrated_recipe_and_its_migrated_reader_agree(tmp_path: Path):
    trl = pytest.importorskip("trl")
    recipe = tmp_path / "recipe.yaml"
    recipe.write_bytes(migrate_file(b"model_name_or_path: m\ntorch_dtype: bfloat16\n", "recipe.yaml").new)
    (model_args,) = trl.TrlParser((trl.ModelConfig,)).parse_yaml_file(str(recipe))
    namespace: dict = {}
    exec(compile(migrate(MODEL_UTILS, "model_utils.py"), "model_utils.py", "exec"), namespace)
    import torch

    assert namespace["get_dtype"](model_args) is torch.bfloat16
    assert namespace["get_dtype_unannotated"](model_args, None) == "bfloat16"


def test_a_scripts_own_torch_dtype_field_read_from_recipes_gets_a_todo():
    own = (
        "from dataclasses import dataclass\nfrom transformers import HfArgumentParser\n\n\n"
        "@dataclass\nclass ModelArguments:\n    torch_dtype: str = 'auto'\n\n\n"
        "(model_args,) = HfArgumentParser(ModelArguments).parse_yaml_file('recipe.yaml')\n"
        "dtype = model_args.torch_dtype\n"
    )
    out = migrate(own)
    assert "NM927" in out
    assert "dtype = model_args.torch_dtype\n" in out  # its own field: the read stays
    cli = own.replace("parse_yaml_file('recipe.yaml')", "parse_args_into_dataclasses()")
    assert "NM927" not in migrate(cli)
