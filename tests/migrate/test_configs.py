"""YAML configs and shell launchers: golden fixtures, idempotence, and what is never lost."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner
from ruamel.yaml import YAML

from migrate.cli import main
from migrate.configs import cores
from migrate.dispatch import migrate_file
from migrate.options import Options
from migrate.registry import Selection

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "configs"
CLUSTER = [FIXTURES.parent / "slurm", FIXTURES.parent / "k8s"]  # SLURM batch scripts, Kubernetes manifests
CASES = sorted(
    p
    for folder in (FIXTURES, *CLUSTER)
    for p in folder.iterdir()
    if ".expected." not in p.name and p.name not in ("not_a_config.yaml", "README.md")
)


def expected_for(source: Path) -> Path:
    return source.with_name(f"{source.stem}.expected{source.suffix}")


def parses(path: Path, text: str) -> bool:
    if path.suffix == ".yaml":
        list(YAML(typ="rt").load_all(text))
        return True
    return subprocess.run(["bash", "-n"], input=text.encode(), check=False).returncode == 0


def test_there_are_enough_cluster_and_optimum_fixtures():
    kinds = {folder.name: [p for p in CASES if p.parent == folder] for folder in CLUSTER}
    assert len(kinds["slurm"]) >= 4 and len(kinds["k8s"]) >= 4
    assert any("\n---\n" in p.read_text() for p in kinds["k8s"]), "a multi-document manifest"
    assert len([p for p in CASES if p.parent == FIXTURES and p.name.startswith("optimum_")]) >= 4


@pytest.mark.parametrize("source", CASES, ids=[p.name for p in CASES])
def test_fixture(source: Path):
    result = migrate_file(source.read_bytes(), str(source))
    assert result.status == "changed", result.error
    assert result.new.decode() == expected_for(source).read_text()
    assert parses(source, result.new.decode())
    assert migrate_file(result.new, str(source)).status == "unchanged", "a second run must change nothing"


def test_yaml_that_is_not_a_config_is_left_alone():
    source = FIXTURES / "not_a_config.yaml"  # a CI workflow with `fp16` and flash-attn keys
    assert migrate_file(source.read_bytes(), str(source)).status == "unchanged"


def test_check_write_check_over_the_fixture_directory(tmp_path: Path):
    for source in CASES:
        assert not (tmp_path / source.name).exists(), "fixture names are unique across folders"
        shutil.copy(source, tmp_path / source.name)
    shutil.copy(FIXTURES / "not_a_config.yaml", tmp_path)
    runner = CliRunner()
    assert runner.invoke(main, ["--check", str(tmp_path)]).exit_code == 1
    assert runner.invoke(main, ["--write", str(tmp_path)]).exit_code == 0
    for source in CASES:
        assert (tmp_path / source.name).read_bytes() == expected_for(source).read_bytes()
        assert (tmp_path / source.name).stat().st_mode == source.stat().st_mode
    assert (tmp_path / "not_a_config.yaml").read_bytes() == (FIXTURES / "not_a_config.yaml").read_bytes()
    assert runner.invoke(main, ["--check", str(tmp_path)]).exit_code == 0


def test_yaml_crlf_bom_quotes_and_comments_are_kept():
    source = "\ufeff# accelerate\r\ndistributed_type: 'MULTI_GPU'  # keep me\r\nnum_processes: 2\r\nmixed_precision: \"fp16\"\r\n"
    result = migrate_file(source.encode(), "cfg.yml")
    assert result.new.decode() == source.replace("MULTI_GPU", "MULTI_NEURON").replace("fp16", "bf16")


def test_yaml_syntax_error_is_reported_with_its_line_and_never_written(tmp_path: Path):
    broken = tmp_path / "recipe.yaml"
    content = b"model_name_or_path: gpt2\nfp16: true\nreport_to: [wandb\nlr: 1\n"
    broken.write_bytes(content)
    result = CliRunner().invoke(main, ["--write", str(broken)])
    assert result.exit_code == 2
    assert f"{broken}:4: YAML syntax error" in result.stderr
    assert broken.read_bytes() == content


def test_skip_marker_and_select():
    source = "output_dir: out\nfp16: true  # neuron-migrate: skip\nattn_implementation: flash_attention_2\n"
    assert migrate_file(source.encode(), "r.yaml").new.decode() == source.replace("flash_attention_2", "sdpa")
    only = Options(selection=Selection(ignore=("NM805",)))
    assert migrate_file(source.encode(), "r.yaml", only).status == "unchanged"


def test_recipe_with_both_precision_flags_switches_both():
    source = "output_dir: out\nfp16: true\nbf16: false\n"
    assert migrate_file(source.encode(), "r.yaml").new.decode() == "output_dir: out\nfp16: false\nbf16: true\n"


def test_visible_cores_under_lnc1_map_one_gpu_to_one_core():
    source = "export NEURON_LOGICAL_NC_CONFIG=1\nCUDA_VISIBLE_DEVICES=1,2 python train.py\n"
    new = migrate_file(source.encode(), "run.sh").new.decode()
    assert new == "export NEURON_LOGICAL_NC_CONFIG=1\nNEURON_RT_VISIBLE_CORES=1,2 python train.py\n"


def test_expansions_in_single_quotes_and_comments_are_not_renamed():
    source = "export CUDA_VISIBLE_DEVICES=0\necho '$CUDA_VISIBLE_DEVICES' # $CUDA_VISIBLE_DEVICES\n"
    new = migrate_file(source.encode(), "run.sh").new.decode()
    assert new == "export NEURON_RT_VISIBLE_CORES=0\necho '$CUDA_VISIBLE_DEVICES' # $CUDA_VISIBLE_DEVICES\n"


# ---- visible cores: the codemod and the shim (neuroncompat/core_sets.py) give the same verdicts ----------

CORE_SETS = [
    "0", "3", "0,1", "2,3", "0-3", "0-7", "3-5,6", "1,2", "1-3", "0-2", "0,2", "0-1,4-5", "3,5,6", "1,0",
    "4,5", "1", "0,1,2,3", "2-5",
]  # fmt: skip


def _shim_core_sets():
    """`neuroncompat/core_sets.py` loaded on its own: importing it as `neuroncompat.core_sets` applies the shim."""
    path = Path(__file__).resolve().parents[2] / "neuroncompat" / "core_sets.py"
    spec = importlib.util.spec_from_file_location("_shim_core_sets", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("lnc", [2, 1])
@pytest.mark.parametrize("value", CORE_SETS)
def test_a_core_set_the_codemod_accepts_is_one_the_shim_accepts(value: str, lnc: int, monkeypatch):
    monkeypatch.setenv("NEURON_LOGICAL_NC_CONFIG", str(lnc))
    shim = _shim_core_sets()
    found = cores.parse(value)
    assert found == shim.parse_cores(value)
    assert (cores.problem(found, lnc) is None) == (shim.refusal(value) is None)


@pytest.mark.parametrize("value", ["0", "1", "0,1", "1,0", "1,2", "0-3", "0,2", "4-7"])
def test_cuda_visible_devices_translates_as_the_shim_does(value: str):
    """GPU i -> logical core i, the set the shim's visible_cores warning names (`_translate_cuda`)."""
    shim = _shim_core_sets()
    expected = shim.format_cores(sorted(set(shim.parse_cores(value))))
    new = migrate_file(f"CUDA_VISIBLE_DEVICES={value} python train.py\n".encode(), "run.sh").new.decode()
    assert new.endswith(f"NEURON_RT_VISIBLE_CORES={expected} python train.py\n")
    refused = shim.refusal(expected)  # a set that cannot work as NeuronCores says so, and is not changed
    assert ("TODO(neuron-migrate NM804)" in new) == (refused is not None)


def test_a_translated_set_that_cannot_work_names_sets_that_can():
    new = migrate_file(b"CUDA_VISIBLE_DEVICES=0,2 python train.py\n", "run.sh").new.decode()
    assert new.splitlines() == [
        "# TODO(neuron-migrate NM804): NEURON_RT_VISIBLE_CORES=0,2 (from CUDA_VISIBLE_DEVICES=0,2) is not one "
        "contiguous run: the Neuron runtime takes logical NeuronCores in consecutive increasing order (its "
        "invalid example is 3,5,6); use one run per process (0 or 2) or 0-3 for all of them",
        "NEURON_RT_VISIBLE_CORES=0,2 python train.py",
    ]
    for suggested in ("0", "2", "0-3"):
        assert _shim_core_sets().refusal(suggested) is None


def test_gpu_ids_count_one_logical_core_per_process():
    fits = migrate_file(b"accelerate launch --gpu_ids 0,1 --num_processes 2 train.py\n", "run.sh")
    assert fits.status == "unchanged"
    short = migrate_file(b"accelerate launch --gpu_ids 0,1 --num_processes 4 train.py\n", "run.sh").new.decode()
    assert "gpu_ids 0,1 is 2 logical NeuronCore(s) but num_processes is 4 (one core each)" in short
    assert "use 0-3" in short


def test_install_inside_a_compound_command_gets_a_todo_not_a_broken_line():
    source = 'if [ -n "$CUDA" ]; then pip install flash-attn; fi\n'
    result = migrate_file(source.encode(), "setup.sh")
    assert result.new.decode().endswith(source)  # the command itself is untouched
    assert [t.rule for t in result.todos] == ["NM814"]
    assert "remove this install" in result.todos[0].message


def test_shell_without_suffix_is_recognised_by_its_shebang():
    source = b"#!/usr/bin/env bash\nnvidia-smi\n"
    assert migrate_file(source, "bin/launch").new == b"#!/usr/bin/env bash\nneuron-ls\n"


def test_non_utf8_shell_script_is_skipped_with_the_line():
    result = migrate_file(b"echo ok\necho caf\xe9\n", "x.sh")
    assert result.status == "skipped" and result.new is None
    assert result.skip_reason == "cannot be decoded as utf-8 (line 2: invalid continuation byte)"


def test_indented_install_is_not_commented_out_into_an_empty_block():
    source = "if true; then\n  pip install flash-attn\nfi\n"
    result = migrate_file(source.encode(), "setup.sh")
    assert result.new.decode() == (
        "if true; then\n  # TODO(neuron-migrate NM814): flash-attn: CUDA-only, does not build or run on Neuron "
        "(remove this install); sdpa attention, bf16 weights and model.generate take their place\n"
        "  pip install flash-attn\nfi\n"
    )
    assert parses(Path("setup.sh"), result.new.decode())


def test_todo_for_a_command_continuing_a_line_goes_above_the_whole_line():
    source = "make data && \\\n  deepspeed train.py\n"
    new = migrate_file(source.encode(), "run.sh").new.decode()
    assert new.startswith("# TODO(neuron-migrate NM811): ") and new.endswith(source)


def test_a_value_shared_with_other_keys_through_an_anchor_gets_a_todo_at_its_definition():
    """Rewriting `&p fp16` would change `precision` too: a TODO at the anchor's line, never a silent pass."""
    source = "distributed_type: MULTI_GPU\nnum_processes: 2\nprecision: &p fp16\nmixed_precision: *p\n"
    result = migrate_file(source.encode(), "accelerate.yaml")
    new = result.new.decode()
    assert [line for line in new.splitlines() if not line.startswith("#")] == source.replace(
        "MULTI_GPU", "MULTI_NEURON"
    ).splitlines()
    assert [(t.rule, t.line) for t in result.todos] == [("NM802", 3)]
    assert new.splitlines()[3] == "precision: &p fp16" and "'fp16' -> 'bf16'" in result.todos[0].message


def test_an_anchored_value_used_only_at_its_key_is_migrated_where_it_is_defined_keeping_the_anchor():
    source = (
        "compute_environment: LOCAL_MACHINE\ndistributed_type: &dt MULTI_GPU\nnum_processes: 2\n"
        "mixed_precision: &mp 'fp16'\n"
    )
    result = migrate_file(source.encode(), "accelerate.yaml")
    new = result.new.decode()
    assert "distributed_type: &dt MULTI_NEURON\n" in new and "mixed_precision: &mp 'bf16'\n" in new
    assert YAML(typ="safe").load(new)["distributed_type"] == "MULTI_NEURON" and result.todos == []


def test_a_value_arriving_through_a_merge_key_gets_a_todo_where_it_is_defined(tmp_path: Path):
    """`fp16: true` merged from `*defaults`: the recipe trains in fp16, so `--check` must fail on it."""
    source = (
        "_defaults: &defaults\n  fp16: true\n  learning_rate: 1.0e-5\n"
        "<<: *defaults\noutput_dir: out\nmodel_name_or_path: org/model\n"
    )
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(source)
    checked = CliRunner().invoke(main, ["--check", str(recipe)])
    assert checked.exit_code == 1, checked.output
    result = migrate_file(source.encode(), "recipe.yaml")
    assert [(t.rule, t.line) for t in result.todos] == [("NM802", 2)]  # the fp16 line under _defaults
    new = result.new.decode()
    assert new.splitlines()[2] == "  fp16: true" and new.splitlines()[1].startswith("  # TODO(neuron-migrate NM802)")
    assert YAML(typ="safe").load(new)["fp16"] is True  # nothing half-rewritten: the merge still works
    assert migrate_file(result.new, "recipe.yaml").status == "unchanged"


def test_a_rewrite_of_two_keys_is_never_half_made_through_a_merge_key():
    """fp16 (merged) -> false and bf16 (written) -> true go together: both TODO, bf16 stays false."""
    source = "base: &base\n  fp16: true\noutput_dir: out\nbf16: false\n<<: *base\n"
    result = migrate_file(source.encode(), "recipe.yaml")
    new = result.new.decode()
    assert "bf16: false\n" in new and "fp16: true\n" in new
    assert [(t.rule, t.line) for t in result.todos] == [("NM802", 2)]
    assert "'false' -> 'true' at line 4" in result.todos[0].message


def test_recipe_parse_yaml_file_rejects_the_old_keys_and_takes_the_migrated_ones():
    pytest.importorskip("torch")  # transformers' TrainingArguments needs it
    from transformers import HfArgumentParser, TrainingArguments
    from trl import ModelConfig, ScriptArguments

    parser = HfArgumentParser((ScriptArguments, TrainingArguments, ModelConfig))
    with pytest.raises(ValueError, match="not used by the HfArgumentParser") as rejected:
        parser.parse_yaml_file(FIXTURES / "recipe_trainer_drift.yaml")
    for old in ("evaluation_strategy", "group_by_length", "logging_dir", "overwrite_output_dir", "warmup_ratio"):
        assert old in str(rejected.value)
    _, training, _ = parser.parse_yaml_file(FIXTURES / "recipe_trainer_drift.expected.yaml")
    assert (training.eval_strategy, training.warmup_steps, training.train_sampling_strategy) == (
        "steps",
        0.03,
        "group_by_length",
    )


def test_migrated_qlora_recipe_parses_with_trl_on_neuron(neuron: object) -> None:
    """TRL's own parser takes the migrated QLoRA recipe on a Neuron device; the CUDA one it rejects."""
    from trl import ModelConfig, ScriptArguments, SFTConfig, TrlParser

    parser = TrlParser((ScriptArguments, SFTConfig, ModelConfig))
    with pytest.raises(ValueError):
        parser.parse_yaml_file(FIXTURES / "recipe_sft_qlora.yaml")
    _, training, model = parser.parse_yaml_file(FIXTURES / "recipe_sft_qlora.expected.yaml")
    assert (model.dtype, model.attn_implementation, model.load_in_4bit) == ("bfloat16", "sdpa", False)
    assert (training.bf16, training.fp16, training.max_length) == (True, False, 4096)


def test_removed_recipe_keys_are_reported_on_their_line():
    source = "output_dir: out\nlogging_dir:\ngroup_by_length: false\nuse_mps_device: true  # Apple\nseed: 1\n"
    result = migrate_file(source.encode(), "r.yaml")
    assert result.new.decode() == "output_dir: out\nseed: 1\n"
    assert [(w.rule, w.line, w.message.split(":")[0]) for w in result.warnings] == [
        ("NM808", 2, "removed logging_dir"),
        ("NM808", 3, "removed group_by_length"),
        ("NM808", 4, "removed use_mps_device"),
    ]
    skipped = migrate_file(b"output_dir: out\nlogging_dir: logs  # neuron-migrate: skip\n", "r.yaml")
    assert skipped.status == "unchanged" and skipped.warnings == []


def test_recipe_keys_with_no_faithful_rewrite_get_a_todo_and_stay():
    source = (
        "output_dir: out\nmax_seq_length: 1024\nmax_length: 2048\nlogging_dir: &logs runs/a\nrun_name: *logs\n"
        "group_by_length: 'yes'\n"
    )
    result = migrate_file(source.encode(), "r.yaml")
    new = result.new.decode()
    assert [line for line in new.splitlines() if not line.startswith("#")] == source.splitlines()
    assert [(t.rule, t.message.split(":")[0]) for t in result.todos] == [
        ("NM808", "max_seq_length is now max_length, which is set too"),
        ("NM808", "logging_dir"),
        ("NM808", "group_by_length"),
    ]
    assert parses(Path("r.yaml"), new) and migrate_file(result.new, "r.yaml").status == "unchanged"


def migrate_shell(source: str) -> tuple[str, list[tuple[str, int | None, str]]]:
    """The migrated script and its report notes as (rule, line, message)."""
    result = migrate_file(source.encode(), "train.sh")
    new = result.new.decode() if result.new is not None else source
    assert parses(Path("train.sh"), new)
    return new, [(w.rule, w.line, w.message) for w in result.warnings]


def test_a_bool_flag_takes_a_value_only_when_one_follows():
    new, notes = migrate_shell(
        "torchrun train.py --do_train --zero_1 --bf16 --fuse_qkv true --async_save=false --use_xser False --output_dir out\n"
    )
    assert new.endswith("torchrun train.py --do_train --bf16 --output_dir out\n")
    assert [message.split(":")[0] for _, _, message in notes] == [
        "removed --zero_1",
        "removed --fuse_qkv true",
        "removed --async_save=false",
        "removed --use_xser False",
    ]


def test_zero1_and_parallel_degrees_get_a_todo_only_when_they_were_on():
    off = migrate_shell(
        "python train.py --do_train --zero_1 false --tensor_parallel_size 1 --pipeline_parallel_size=1\n"
    )[0]
    assert off == "python train.py --do_train\n"
    on = migrate_shell("python train.py --do_train --zero_1 --tensor_parallel_size 8 --pipeline_parallel_size $PP\n")[0]
    assert on.endswith("python train.py --do_train\n")
    assert on.count("# TODO(neuron-migrate NM816): ") == 3
    assert "DistributedConfig(tp_size=8, fsdp_size=WORLD_SIZE // 8)" in on
    assert "--pipeline_parallel_size $PP: pipeline parallelism has no native training path" in on


def test_sequence_parallel_todo_follows_the_flag_meaning():
    assert "TODO" not in migrate_shell("python t.py --do_train --disable_sequence_parallel\n")[0]
    assert (
        "TODO(neuron-migrate NM816): --disable_sequence_parallel false: sequence parallelism"
        in migrate_shell("python t.py --do_train --disable_sequence_parallel false\n")[0]
    )


def test_negated_dashed_and_quoted_flags():
    new, _ = migrate_shell(
        "python t.py --do-train --no_use_xser --skip-cache-push '--fuse_qkv' --logging_dir \"my logs\" -x\n"
    )
    assert new == "python t.py --do-train -x\n"


def test_drift_flags_are_renamed_in_the_spelling_used():
    new, notes = migrate_shell(
        "accelerate launch run.py --do_eval --evaluation-strategy steps --warmup_ratio=0.1 --no_cuda --group_by_length\n"
    )
    assert new == (
        "accelerate launch run.py --do_eval --eval-strategy steps --warmup_steps=0.1 --use_cpu "
        "--train_sampling_strategy group_by_length\n"
    )
    assert notes == []  # renames keep the setting: nothing to report beyond the rewrite counts


def test_each_removal_is_a_note_on_its_own_line():
    source = "torchrun --nproc_per_node 8 run_clm.py \\\n  --do_train \\\n  --overwrite_output_dir \\\n  --async_save\n"
    new, notes = migrate_shell(source)
    assert new == "torchrun --nproc_per_node 8 run_clm.py \\\n  --do_train\n"
    assert [(rule, line) for rule, line, _ in notes] == [("NM817", 3), ("NM816", 4)]
    assert notes[0][2].startswith("removed --overwrite_output_dir: transformers 5 removed overwrite_output_dir")


def test_redirections_end_the_script_arguments():
    new, _ = migrate_shell("python t.py --do_train --overwrite_output_dir > log.txt 2>&1\n")
    assert new == "python t.py --do_train > log.txt 2>&1\n"


def test_lines_of_other_programs_keep_their_flags():
    vllm = "python serve.py --model m --tensor_parallel_size 4\n"
    diffusers = "accelerate launch train_text_to_image.py --train_batch_size 1 --logging_dir logs\n"
    trl_sft_field = "torchrun finetune.py --do_train --max_seq_length 64\n"  # a ScriptArguments field
    for source in (vllm, diffusers, trl_sft_field, "echo --zero_1\n", "trl vllm-serve --tensor_parallel_size 8\n"):
        assert migrate_file(source.encode(), "run.sh").status == "unchanged", source


def test_trl_only_fields_follow_the_trl_command():
    assert migrate_shell("trl sft --model_name_or_path m --max_seq_length 1024\n")[0] == (
        "trl sft --model_name_or_path m --max_length 1024\n"
    )
    new, notes = migrate_shell("accelerate launch trl/scripts/dpo.py --max_prompt_length 128 --max_length 512\n")
    assert new == "accelerate launch trl/scripts/dpo.py --max_length 512\n"
    assert notes[0][:2] == ("NM817", 1)


def test_a_launch_line_under_a_skip_marker_is_left_alone_and_not_reported():
    source = "# neuron-migrate: skip\ntorchrun t.py --do_train --zero_1 --overwrite_output_dir\n"
    result = migrate_file(source.encode(), "run.sh")
    assert result.status == "unchanged" and result.warnings == []


def test_a_flag_value_another_rule_rewrites_is_kept_whole():
    new, _ = migrate_shell("python t.py --do_train --logging_dir logs/$CUDA_VISIBLE_DEVICES --zero_1\n")
    assert new.endswith("python t.py --do_train --logging_dir logs/$NEURON_RT_VISIBLE_CORES\n")


def test_launch_flags_by_rule_selection():
    source = "python t.py --do_train --zero_1 false --overwrite_output_dir\n"
    only_optimum = migrate_file(source.encode(), "run.sh", Options(selection=Selection(select=("NM816",))))
    assert only_optimum.new.decode() == "python t.py --do_train --overwrite_output_dir\n"
    only_drift = migrate_file(source.encode(), "run.sh", Options(selection=Selection(select=("NM817",))))
    assert only_drift.new.decode() == "python t.py --do_train --zero_1 false\n"


def _plain(node, renames: dict[str, str]):
    """A composed YAML node as plain data, renamed keys and env names mapped back, comments and styles dropped."""
    from ruamel.yaml.nodes import MappingNode, SequenceNode

    if isinstance(node, MappingNode):
        return [(renames.get(k.value, k.value), _plain(v, renames)) for k, v in node.value]
    if isinstance(node, SequenceNode):
        return [_plain(item, renames) for item in node.value]
    return renames.get(node.value, node.value)


K8S_RENAMES = {
    "aws.amazon.com/neuroncore": "nvidia.com/gpu",  # migrated -> original
    "TORCH_NEURONX_NEFF_CACHE_DIR": "NEURON_COMPILE_CACHE_URL",
}
K8S_VALUE_CHANGES = {"--fp16": "--bf16", "--evaluation_strategy": "--eval_strategy"}  # original -> migrated


@pytest.mark.parametrize("source", [p for p in CASES if p.parent.name == "k8s"], ids=lambda p: p.name)
def test_manifest_keeps_its_structure_except_the_rewritten_keys(source: Path):
    """Every document, key (in order), anchor and value survives; only resource/env names and flags change."""
    before = list(YAML(typ="rt").compose_all(source.read_text()))
    after_text = expected_for(source).read_text()
    for old, new in K8S_VALUE_CHANGES.items():
        after_text = after_text.replace(new, old)
    after = list(YAML(typ="rt").compose_all(after_text))
    removed = ["--tensor_parallel_size=8"]  # NM816 removes this list item
    plain_before = [_plain(doc, {}) for doc in before]
    plain_after = [_plain(doc, K8S_RENAMES) for doc in after]

    def without(data):
        if isinstance(data, list):
            return [without(x) for x in data if x not in removed]
        if isinstance(data, tuple):
            return tuple(without(x) for x in data)
        return data

    assert without(plain_after) == without(plain_before)
    anchors = [n for n in ("&labels", "&gpu_limits") if n in source.read_text()]
    assert all(a in expected_for(source).read_text() for a in anchors)


@pytest.mark.parametrize("name", ["job.slurm", "train.sbatch", "bin/submit"])
def test_slurm_script_is_recognised_by_its_directives_whatever_its_name(name: str):
    source = b"#SBATCH --nodes=1\n#SBATCH --gres=gpu:4\nsrun torchrun --nproc_per_node 4 train.py --fp16\n"
    result = migrate_file(source, name)
    assert result.status == "changed"
    new = result.new.decode()
    assert "##SBATCH --gres=gpu:4\n" in new and "--bf16" in new and "TODO(neuron-migrate NM821)" in new


def test_local_launcher_gets_no_per_node_process_todo():
    source = "torchrun --nproc_per_node 4 train.py\n"  # not a cluster script: NM803 keeps GPU i -> core i
    assert migrate_file(source.encode(), "run.sh").status == "unchanged"


def test_sbatch_skip_marker_keeps_the_gpu_request():
    source = "#!/bin/bash\n#SBATCH --gres=gpu:8  # neuron-migrate: skip\n#SBATCH --gpus=8\nsrun hostname\n"
    new = migrate_file(source.encode(), "job.sh").new.decode()
    assert "#SBATCH --gres=gpu:8  # neuron-migrate: skip\n" in new and "\n##SBATCH --gpus=8\n" in new
    assert "##SBATCH --gres" not in new


def test_srun_options_with_values_are_skipped_to_find_the_launcher():
    source = "#SBATCH -N 2\nsrun -N 2 --ntasks-per-node 1 torchrun --nproc_per_node 1 train.py --fp16\n"
    new = migrate_file(source.encode(), "job.slurm").new.decode()
    assert new.endswith("srun -N 2 --ntasks-per-node 1 torchrun --nproc_per_node 1 train.py --bf16\n")
    assert "NM821" not in new, "one process per node needs no per-core advice"


def test_anchored_gpu_key_in_a_manifest_is_left_alone():
    """Its aliases elsewhere would change with it, so the key is not renamed."""
    source = (
        "apiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - name: a\n    resources:\n      limits:\n"
        "        &gpu nvidia.com/gpu: 1\n"
    )
    assert migrate_file(source.encode(), "pod.yaml").status == "unchanged"


def test_neuron_cc_flags_computed_at_run_time_get_a_todo():
    source = 'export NEURON_CC_FLAGS="$NEURON_CC_FLAGS --cache_dir=$CACHE"\n'
    result = migrate_file(source.encode(), "env.sh")
    assert result.new.decode().endswith(source) and [t.rule for t in result.todos] == ["NM823"]
