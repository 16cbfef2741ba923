"""A one-file run imports only what it uses (issue 39: start-up dominates a pre-commit run on one file).

The worker pool (`concurrent.futures`, `multiprocessing`), the writer's hashing, `tomllib` for a
pyproject.toml without a `[tool.neuron-migrate]` table and the report formats nobody asked for (`json`
and `sarif` look up the installed version through `importlib.metadata`) cost a one-file run a third
of what it adds to libcst's own start-up. Each check runs the real CLI in a fresh interpreter and reads
which modules it ended with; a positive control shows the same run does import them when it needs them.
"""

from __future__ import annotations

import gc
import json
import subprocess
import sys
from pathlib import Path

import pytest

from migrate import config

# runs the CLI as `python -m migrate` does, then writes the names of the modules it imported to a file
PROBE = """
import json, runpy, sys
out, sys.argv = sys.argv[1], ["neuron-migrate", *sys.argv[2:]]
try:
    runpy.run_module("migrate", run_name="__main__", alter_sys=True)
except SystemExit:
    pass
with open(out, "w") as f:
    json.dump(sorted(sys.modules), f)
"""
LAZY = (
    "difflib",  # only for a diff, a rewrite without a line of its own, or a file two passes change
    "concurrent.futures",
    "multiprocessing",
    "hashlib",
    "tomllib",
    "importlib.metadata",
    "migrate.writer",
    "migrate.formats.json",
    "migrate.formats.sarif",
    "migrate.formats.markdown",
    "migrate.formats.github",
    "neuroncompat_report.model",  # the shared report model: only the json, sarif, github and markdown formats
)
CUDA_SCRIPT = 'import torch\n\nmodel = torch.nn.Linear(2, 2).to("cuda")\n'


def imported_by(tmp_path: Path, *args: str) -> set[str]:
    """The modules a `neuron-migrate ARGS` run in a fresh interpreter has imported when it ends."""
    out = tmp_path / "modules.json"
    subprocess.run([sys.executable, "-c", PROBE, str(out), *args], cwd=tmp_path, capture_output=True, timeout=120)
    return set(json.loads(out.read_text()))


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A CUDA script (one the check would change) in a project whose pyproject.toml configures other tools."""
    (tmp_path / "pyproject.toml").write_text("[tool.ruff]\nline-length = 100\n")
    (tmp_path / "train.py").write_text(CUDA_SCRIPT)
    return tmp_path


def test_checking_one_file_imports_no_pool_writer_config_parser_or_other_format(project: Path):
    modules = imported_by(project, "--check", "train.py")
    assert "migrate.engine" in modules  # the run did migrate the file
    assert modules.isdisjoint(LAZY), f"a one-file check imported {sorted(modules & set(LAZY))}"


# rule families a CUDA script's tokens do not switch on (migrate.rule_families): their modules stay unimported
OTHER_FAMILIES = (
    "migrate.rules.optimum_training",
    "migrate.rules.optimum_inference",
    "migrate.rules.optimum_diffusion",
    "migrate.rules.legacy",
    "migrate.rules.xla",
    "migrate.rules.diffusers_cuda",
    "migrate.rules.drift",
    "migrate.rules.trl_moved",
    "migrate.rules.tensor_parallel",
    "migrate.rules.compile_env",
    "migrate.rules.hub_kernels",
    "migrate.rules.attention",
    "migrate.rules.quantization",
    "migrate.rules.legacy_tensor_types",
    "migrate.configs.catalog",
)


def test_checking_a_cuda_script_imports_only_its_rule_families(project: Path):
    modules = imported_by(project, "--check", "train.py")
    assert {"migrate.rules.device", "migrate.rules.settings"} <= modules  # the families that rewrite it
    assert modules.isdisjoint(OTHER_FAMILIES), f"a CUDA script imported {sorted(modules & set(OTHER_FAMILIES))}"


def test_a_script_of_another_kind_imports_its_families(project: Path):
    (project / "train.py").write_text("from optimum.neuron import NeuronTrainer\n\ntrainer = NeuronTrainer(model=m)\n")
    modules = imported_by(project, "--check", "train.py")
    assert {"migrate.rules.optimum_training", "migrate.rules.legacy"} <= modules
    assert "migrate.rules.device" not in modules


def test_the_modules_are_imported_when_the_run_needs_them(project: Path):
    (project / "pyproject.toml").write_text("[tool.neuron-migrate]\nshim = false\n")
    modules = imported_by(project, "--write", "--format", "json", "train.py")
    assert {"tomllib", "importlib.metadata", "migrate.formats.json", "migrate.writer", "hashlib"} <= modules
    assert "import torch\n" in (project / "train.py").read_text() and '"neuron"' in (project / "train.py").read_text()


def test_a_diff_imports_difflib(project: Path):
    assert "difflib" in imported_by(project, "train.py")


# runs the CLI as the console script does, then prints how many objects the collector no longer walks
FROZEN_PROBE = """
import gc, sys
from migrate.__main__ import main
sys.argv = ["neuron-migrate", *sys.argv[1:]]
try:
    main()
except SystemExit:
    pass
print(gc.get_freeze_count(), file=sys.stderr)
"""


def test_the_command_freezes_its_start_up_objects_and_the_cli_function_does_not(project: Path):
    """The command's process leaves its imports to the permanent generation (`migrate.__main__`); a program that
    runs the CLI itself (click's runner, in this process) keeps its own collector as it was."""
    found = subprocess.run(
        [sys.executable, "-c", FROZEN_PROBE, "--check", "train.py"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert found.returncode == 0, found.stderr
    assert int(found.stderr.split()[-1]) > 10_000  # click's, libcst's and the codemod's modules

    from click.testing import CliRunner

    from migrate.cli import main

    before = gc.get_freeze_count()
    assert CliRunner().invoke(main, ["--check", str(project / "train.py")]).exit_code == 1
    assert gc.get_freeze_count() == before


@pytest.mark.parametrize(
    "spelling",
    [
        "[tool.neuron-migrate]\nshim = false\n",
        "[tool]\nneuron-migrate = { shim = false }\n",
        "tool.neuron-migrate.shim = false\n",
        "[ 'tool' . \"neuron-migrate\" ]\nshim = false\n",
        'tool = { "neuron-migrate" = { shim = false } }\n',
    ],
)
def test_the_table_is_read_however_toml_spells_it(tmp_path: Path, spelling: str):
    """The check that spares parsing a pyproject.toml without the table must not miss one that has it."""
    (tmp_path / "pyproject.toml").write_text(spelling + '[project]\nname = "x"\n')
    assert config.load(tmp_path).values == {"shim": False}


def test_a_comment_naming_the_table_is_no_table(tmp_path: Path):
    """This project's own pyproject.toml explains `[tool.neuron-migrate]` in a comment: no reason to load tomllib."""
    (tmp_path / "pyproject.toml").write_text(
        "[project]\ndependencies = [\n  # tomli: [tool.neuron-migrate] on 3.10\n]\n"
    )
    (tmp_path / "train.py").write_text(CUDA_SCRIPT)
    assert "tomllib" not in imported_by(tmp_path, "--check", "train.py")
    (tmp_path / "pyproject.toml").write_text("# settings\n[[tool.neuron-migrate.x]]\nshim = false\n")
    with pytest.raises(config.ConfigError, match="unknown key"):  # a table still read, however it is spelt
        config.load(tmp_path)


def test_a_script_entry_named_neuron_migrate_is_no_table(tmp_path: Path):
    (tmp_path / "pyproject.toml").write_text('[project.scripts]\nneuron-migrate = "migrate.cli:main"\n[tool.ruff]\n')
    assert config.load(tmp_path).values == {}


def test_an_option_error_in_the_github_format_is_still_an_annotation(project: Path):
    """The GitHub writer is imported only for that format's error document: it is still written."""
    found = subprocess.run(
        [sys.executable, "-m", "migrate", "--format", "github", "--jobs", "0", "train.py"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert found.returncode == 2
    assert found.stdout.startswith("::error title=neuron-migrate::Invalid value for '--jobs'")
