"""The four codemod gaps the fresh #27 campaign found on fetched scripts, one class each, on scripts written here.

- a TRL 1.x removal (`setup_chat_format`) whose import stayed, so the migrated script died at import
  (alignment-handbook `scripts/sft.py` calls it on one branch; philschmid's `run_fsdp_qlora.py` never does);
- `from trl.commands.cli_utils import TrlParser` (TRL 0.x; the package is gone in 1.x);
- `model_args.trust_remote_code` after TRL moved the field to the trainer configs (alignment-handbook's
  `get_model`, philschmid's `run_sft.py`/`run_r1_grpo.py`);
- a repository's own FlashAttention/xformers monkey patch (FastChat's `train_mem.py`/`train_xformers.py`).

Where TRL is installed, the migrated code is also run against it: that it imports and reads what it should is
what the campaign's runs lacked.
"""

from __future__ import annotations

import ast

import pytest

from migrate.dispatch import migrate_file
from migrate.options import Options


def migrate(src: str, name: str = "train.py") -> tuple[str, list[str]]:
    """The migrated text (which must parse and be a fixed point) and the ids of its TODOs."""
    result = migrate_file(src.encode(), name, Options())
    assert result.error is None, result.error
    out = result.new.decode() if result.new is not None else src
    ast.parse(out)
    again = migrate_file(out.encode(), name, Options())
    assert again.new is None, "a second run changed the output"
    return out, [line.split("NM", 1)[1][:3] for line in out.splitlines() if "TODO(neuron-migrate NM" in line]


# setup_chat_format: its import goes even while a branch still calls it -------------------------------

SFT_WITH_CHAT_FORMAT = (
    "from trl import SFTConfig, SFTTrainer, setup_chat_format\n\n\n"
    "def prepare(model, tokenizer):\n"
    "    if tokenizer.chat_template is None:\n"
    '        model, tokenizer = setup_chat_format(model, tokenizer, format="chatml")\n'
    "    return model, tokenizer\n"
)


def test_a_removed_trl_helper_called_on_a_branch_loses_its_import_and_keeps_its_todo():
    out, todos = migrate(SFT_WITH_CHAT_FORMAT)
    assert "from trl import SFTConfig, SFTTrainer\n" in out
    assert todos == ["924"]
    todo_line, call_line = out.splitlines()[-3:-1]
    assert "TODO(neuron-migrate NM924): TRL 1.x removed setup_chat_format" in todo_line
    assert call_line.strip().startswith("model, tokenizer = setup_chat_format(")


def test_the_migrated_script_imports_under_trl_1x_and_runs_the_branch_not_taken():
    pytest.importorskip("trl")
    with pytest.raises(ImportError, match="setup_chat_format"):
        exec(compile(SFT_WITH_CHAT_FORMAT, "train.py", "exec"), {})
    out, _ = migrate(SFT_WITH_CHAT_FORMAT)
    namespace: dict[str, object] = {}
    exec(compile(out, "train.py", "exec"), namespace)

    class Tokenizer:
        chat_template = "{{ messages }}"

    model, tokenizer = object(), Tokenizer()
    assert namespace["prepare"](model, tokenizer) == (model, tokenizer)  # type: ignore[operator]


def test_an_unused_import_of_a_removed_trl_helper_goes_without_a_todo():
    src = "import torch\nfrom trl import setup_chat_format\nfrom peft import LoraConfig\n\nx = torch.zeros(2).cuda()\n"
    out, todos = migrate(src)
    assert "setup_chat_format" not in out
    assert "from peft import LoraConfig\n" in out
    assert todos == []


def test_an_aliased_or_attribute_call_gets_the_todo_too():
    aliased, todos = migrate("from trl import setup_chat_format as chatml\n\nm, t = chatml(m, t)\n")
    assert "import" not in aliased and todos == ["924"]
    attribute, todos = migrate("import trl\n\nm, t = trl.setup_chat_format(m, t)\n")
    assert attribute.startswith("import trl\n") and todos == ["924"]


# trl.commands.cli_utils --------------------------------------------------------------------------------


def test_trl_parser_from_the_removed_cli_utils_is_imported_from_trl():
    src = (
        "from dataclasses import dataclass\n"
        "from trl.commands.cli_utils import  TrlParser\n"
        "from trl.commands.cli_utils import init_zero_verbose as quiet\n"
    )
    out, _ = migrate(src)
    assert "trl.commands" not in out
    assert "from trl import TrlParser\n" in out and "from trl import init_zero_verbose as quiet\n" in out
    pytest.importorskip("trl")
    exec(compile(out, "train.py", "exec"), {})


def test_a_cli_utils_name_trl_1x_does_not_export_is_left_in_place():
    out, _ = migrate("from trl.commands.cli_utils import TrlParser, SFTScriptArguments\n")
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
    out, todos = migrate(TRUST_REMOTE_CODE)
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
    out, _ = migrate(TRUST_REMOTE_CODE)
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
    out, todos = migrate(src)
    assert out == src and todos == []


# a repository's own attention monkey patch -----------------------------------------------------------------


def test_a_flash_attention_monkey_patch_goes_with_its_import():
    src = (
        "# Need to call this before importing transformers.\n"
        "from fastchat.train.llama2_flash_attn_monkey_patch import (\n"
        "    replace_llama_attn_with_flash_attn,\n"
        ")\n\n"
        "replace_llama_attn_with_flash_attn()\n\n"
        "from fastchat.train.train import train\n\n"
        'if __name__ == "__main__":\n    train()\n'
    )
    out, todos = migrate(src)
    assert "flash_attn" not in out and todos == []
    assert "from fastchat.train.train import train\n" in out


def test_a_monkey_patch_behind_an_option_goes_with_its_if():
    src = (
        "import torch\n"
        "from utils.llama_patch import replace_attn_with_flash_attn\n"
        "from fastchat.train.llama_xformers_attn_monkey_patch import replace_llama_attn_with_xformers_attn\n\n\n"
        "def train(args, model):\n"
        "    if args.flash_attn:\n"
        "        replace_attn_with_flash_attn()\n"
        "    if args.xformers:\n"
        "        replace_llama_attn_with_xformers_attn()\n"
        "    model.to(torch.device('cuda'))\n"
    )
    out, _ = migrate(src)
    assert "replace_" not in out and "args.flash_attn" not in out and "args.xformers" not in out
    assert "def train(args, model):\n    model.to(" in out


def test_a_patch_whose_result_is_used_stays():
    src = "import torch\nfrom patch import replace_llama_attn_with_flash_attn\n\nok = replace_llama_attn_with_flash_attn()\n"
    out, _ = migrate(src)
    assert "ok = replace_llama_attn_with_flash_attn()" in out


# trainer keywords TRL 1.x reads only from the config (philschmid's run_fsdp_qlora.py: SFTTrainer(packing=True)) -----


def test_sft_trainer_keywords_that_moved_to_the_config_get_a_todo_naming_each():
    src = (
        "from trl import SFTTrainer\n\n"
        "trainer = SFTTrainer(\n    model=model,\n    args=training_args,\n    dataset_text_field='text',\n"
        "    max_seq_length=64,\n    packing=True,\n    chars_per_token=3.6,\n)\n"
    )
    out, todos = migrate(src)
    assert todos == ["929"]
    assert (
        "TRL 1.x SFTTrainer no longer takes these keywords: set dataset_text_field, max_seq_length (there: max_length), "
        "packing on the SFTConfig passed as args; chars_per_token: no TRL 1.x setting, drop\n"
    ) in out
    assert "packing=True" in out, "the settings stay for a person to move: dropping them changes the run"


def test_a_trainer_of_another_library_is_left_alone():
    src = "from mylib import SFTTrainer\n\ntrainer = SFTTrainer(model, packing=True)\n"
    assert migrate(src) == (src, [])


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
