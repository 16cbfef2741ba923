"""Behaviour of the Optimum Neuron (NM5xx) and torch_xla (NM6xx) rules beyond their doc examples."""

from __future__ import annotations

from test_rules import run

from migrate.engine import migrate_source
from migrate.options import Options
from migrate.prefilter import may_need_migration
from migrate.registry import Selection


def test_training_and_inference_classes_resolve_by_import_path():
    src = (
        "from optimum.neuron import NeuronModelForCausalLM\n"
        "from optimum.neuron.models.training import NeuronModelForCausalLM as TrainModel\n"
        "policy = TrainModel.from_pretrained(name, trn_config)\n"
        "sampler = NeuronModelForCausalLM.from_pretrained(name, export=True, sequence_length=64)\n"
    )
    out = run(src)
    assert "from transformers import AutoModelForCausalLM, AutoModelForCausalLM as TrainModel\n" in out
    assert "policy = TrainModel.from_pretrained(name, distributed_config=trn_config)\n" in out
    assert (
        'sampler = AutoModelForCausalLM.from_pretrained(\n    name,\n    device_map="neuron",\n    dtype=torch.bfloat16,\n)\n'
        in out
    )
    assert "sampler.generation_config.max_cache_len = 64\n" in out


def test_an_alias_keeps_its_local_name():
    src = "from optimum.neuron import NeuronTrainer as NT\ntrainer = NT(model=model)\n"
    assert run(src) == "from transformers import Trainer as NT\ntrainer = NT(model=model)\n"


def test_a_name_without_native_equivalent_keeps_its_import_with_a_todo():
    src = "from optimum.neuron import NeuronModelForSentenceTransformers\nmodel = NeuronModelForSentenceTransformers.from_pretrained(name)\n"
    out = run(src)
    assert out.count("TODO(neuron-migrate NM919)") == 2  # the import and the call
    assert "from optimum.neuron import NeuronModelForSentenceTransformers\n" in out
    compile(out, "t.py", "exec")
    assert run(out) == out


def test_a_star_import_is_marked_not_guessed():
    src = "from optimum.neuron import *\ntrainer = NeuronTrainer(model=model)\n"
    out = run(src)
    assert out.startswith("# TODO(neuron-migrate NM919)")
    assert "from optimum.neuron import *\n" in out and run(out) == out


def test_comments_above_a_removed_call_stay():
    src = (
        "import torch_xla.core.xla_model as xm\n"
        "for batch in loader:\n"
        "    loss = step(batch)\n"
        "    # one compiled graph per step\n"
        "    xm.mark_step()\n"
        "    print(loss)\n"
    )
    assert (
        run(src) == "for batch in loader:\n    loss = step(batch)\n    # one compiled graph per step\n    print(loss)\n"
    )


def test_skip_marker_keeps_the_call_and_its_import():
    src = "import torch_xla.core.xla_model as xm\nxm.mark_step()  # neuron-migrate: skip\ndevice = xm.xla_device()\n"
    out = run(src)
    assert "xm.mark_step()  # neuron-migrate: skip\n" in out
    assert out.startswith("import torch\n# TODO(neuron-migrate NM918)")  # xm is still used, so it stays
    assert 'device = torch.device("neuron")\n' in out


def test_ignoring_nm601_keeps_unused_xla_imports():
    src = "import torch_xla.core.xla_model as xm\nxm.mark_step()\nx = 1\n"
    assert run(src, selection=Selection(ignore=("NM601",))) == "import torch_xla.core.xla_model as xm\nx = 1\n"


def test_function_level_xla_import_goes_with_its_last_use():
    src = "def _mp_fn(index):\n    import torch_xla.core.xla_model as xm\n    xm.mark_step()\n    return index\n"
    assert run(src) == "def _mp_fn(index):\n    return index\n"


def test_optimizer_step_under_ddp_needs_no_todo():
    src = (
        "import torch_xla.core.xla_model as xm\n"
        "import torch_xla.distributed.xla_multiprocessing as xmp\n"
        "model = DistributedDataParallel(model)\n"
        "xm.optimizer_step(optimizer)\n"
    )
    out = run(src)
    assert "optimizer.step()\n" in out and "NM916" not in out


def test_precompilation_branch_folds_to_the_real_run():
    src = (
        "from optimum.neuron.utils import is_precompilation\n"
        "if is_precompilation():\n"
        "    max_steps = 10\n"
        "else:\n"
        "    # the real run\n"
        "    max_steps = args.max_steps\n"
    )
    assert run(src) == "# the real run\nmax_steps = args.max_steps\n"


def test_one_line_precompilation_branches_fold_too():
    # The one-line forms once stopped the file with an internal error (small statements placed
    # where a statement line belongs).
    src = (
        "from optimum.neuron.utils import is_precompilation\n"
        "if not is_precompilation(): train(); save()\n"
        "if is_precompilation(): max_steps = 10\n"
        "else: max_steps = args.max_steps  # the real run\n"
    )
    assert run(src) == "train(); save()\nmax_steps = args.max_steps  # the real run\n"


def test_one_line_lazy_load_with_is_unwrapped():
    src = (
        "from optimum.neuron.models.training import NeuronModelForCausalLM, lazy_load_for_parallelism\n"
        "with lazy_load_for_parallelism(tensor_parallel_size=1): model = NeuronModelForCausalLM.from_pretrained(name)\n"
    )
    assert "\nmodel = AutoModelForCausalLM.from_pretrained(name)\n" in run(src)


def test_master_print_of_a_metrics_report_goes_entirely():
    src = (
        "import torch_xla.core.xla_model as xm\n"
        "import torch_xla.debug.metrics as met\n"
        "if xm.is_master_ordinal():\n"
        "    print(met.metrics_report())\n"
        "done = True\n"
    )
    assert run(src) == "done = True\n"


def test_dropped_fields_are_listed_in_the_report():
    src = 'from optimum.neuron import NeuronTrainingArguments\nargs = NeuronTrainingArguments(output_dir="o", async_save=True, zero_1=False)\n'
    result = migrate_source(src.encode(), "t.py", Options(shim=False))
    notes = [warning[1] for warning in result.warnings]  # (rule id, message, ...)
    assert any("dropped async_save=True" in n for n in notes) and any("dropped zero_1=False" in n for n in notes)
    assert "NM912" not in result.new.decode()  # zero_1=False kept no master weights


def test_prefilter_passes_optimum_and_xla_scripts():
    assert may_need_migration(b"from optimum.neuron import NeuronTrainer\n")
    assert may_need_migration(b"import torch_xla.core.xla_model as xm\n")
    assert may_need_migration(b'dist.init_process_group("xla", init_method="xla://")\n')
    assert not may_need_migration(b"from optimum.exporters import TasksManager\n")
