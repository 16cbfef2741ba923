"""``neuroncompat doctor``: a block a person pastes into a bug report, and ``--json`` for tools (issue 45 item 5).

The block names what ``accelerate env`` and ``torch.utils.collect_env`` would (Python, OS, the C++ compiler
the simulated device is built with, the cache directory, the torch build, the library versions); off Neuron
the patch list is one line, so the report fits one screen and ends with how to try the simulated device.
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import torch
import transformers
from helpers import REPO, run_python

from neuroncompat import doctor, host
from neuroncompat.shim import patch_ids

SCHEMA = json.loads((REPO / "docs" / "doctor.schema.json").read_text())
SCREEN = 40  # lines: a terminal's height


def _torch_build() -> str:
    """What the installed torch says it was built for, asked of torch itself."""
    if torch.version.cuda:
        return f"CUDA {torch.version.cuda}"
    if torch.version.hip:
        return f"ROCm {torch.version.hip}"
    return "CPU"


def test_the_report_opens_with_the_machine() -> None:
    lines = doctor.report()
    assert lines[0].startswith("neuroncompat 0.1.0 (paste this whole block into a bug report")
    assert [line.split(":")[0] for line in lines[1:6]] == [
        "Python",
        "OS",
        "C++ compiler",
        "cache directory",
        "torch build",
    ]
    assert lines[5] == f"torch build: {torch.__version__} ({_torch_build()})"
    assert f"  transformers   {transformers.__version__}" in lines


def test_json_is_valid_against_the_schema_and_says_what_the_text_says() -> None:
    report = doctor.data()
    jsonschema.validate(report, SCHEMA)
    assert report["schema"] == "neuroncompat.doctor/1"
    assert report["torch_build"] == _torch_build()
    assert report["libraries"]["torch"] == torch.__version__
    assert report["libraries"]["torch-neuronx"] is None
    assert [patch["id"] for patch in report["patches"]] == list(patch_ids())


def test_a_missing_compiler_is_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CXX", str(tmp_path / "no-such-compiler"))
    line = next(line for line in doctor.report() if line.startswith("C++ compiler: "))
    assert (
        line == f"C++ compiler: none ({str(tmp_path / 'no-such-compiler')!r} not found; the simulated device needs one)"
    )
    assert doctor.data()["cxx"] == {"command": str(tmp_path / "no-such-compiler"), "version": None}


@pytest.mark.parametrize(
    ("version_py", "build"),
    [
        ("__version__ = '2.13.0+cu128'\ncuda: Optional[str] = '12.8'\nhip: Optional[str] = None\n", "CUDA 12.8"),
        (
            "__version__ = '2.13.0+rocm6.4'\ncuda: Optional[str] = None\nhip: Optional[str] = '6.4.43482'\n",
            "ROCm 6.4.43482",
        ),
        ("__version__ = '2.13.0+cpu'\ncuda: Optional[str] = None\nhip: Optional[str] = None\n", "CPU"),
    ],
)
def test_the_torch_build_is_read_from_torchs_version_file(version_py: str, build: str) -> None:
    assert host.build_of(version_py) == build


@pytest.mark.slow  # a fresh interpreter that imports torch, twice
def test_off_neuron_the_report_fits_one_screen_and_ends_with_the_simulator() -> None:
    result = run_python("from neuroncompat.cli import main; main(['doctor'])", env={"HF_HUB_OFFLINE": "1"})
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) <= SCREEN, result.stdout
    assert (
        f"{len(patch_ids())} patches, none applies: not on Neuron (neuroncompat doctor --verbose lists them)" in lines
    )
    assert lines[-1] == doctor.TRY_SIMULATOR
    verbose = run_python(
        "from neuroncompat.cli import main; main(['doctor', '--verbose'])", env={"HF_HUB_OFFLINE": "1"}
    )
    listed = {line.split()[0] for line in verbose.stdout.splitlines() if line.split()[1:2] == ["inactive"]}
    assert listed == set(patch_ids())


@pytest.mark.slow  # a fresh interpreter on the simulated device
def test_json_from_the_command_on_the_simulated_device() -> None:
    result = run_python(
        "from neuroncompat.cli import main; main(['doctor', '--json'])",
        env={"HF_HUB_OFFLINE": "1", "NEURONCOMPAT_SIMULATE": "1"},
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    jsonschema.validate(report, SCHEMA)
    assert report["neuron"]["detected"] is True and report["neuron"]["kind"] == "simulated"
    assert report["neuron"]["visible_cores"] == 2
    assert {patch["state"] for patch in report["patches"]} == {"applied"}
