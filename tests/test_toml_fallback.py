"""The TOML settings on Python 3.10, whose standard library has no `tomllib` (issue 45 item 4).

`neuron-migrate` runs on the Python of a user's pre-commit hook or CI lint job, often older than
the 3.12 TorchNeuron needs, so `migrate/config.py` and `neuroncompat/simulate/settings.py` fall
back to `tomli` there (docs/python.md). `scripts/matrix.sh py310-light` runs `tests/migrate` on a
real 3.10; here a subprocess of this Python takes the 3.10 branch: `sys.version_info` reads as
3.10 while the module is imported and reads, and `tomllib` cannot be imported at all, so a settings file that
is still read proves `tomli` read it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

_AS_ON_310 = """
import importlib, importlib.abc, json, sys
from pathlib import Path


class _NoTomllib(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "tomllib":
            raise ModuleNotFoundError("No module named 'tomllib'", name="tomllib")
        return None


sys.meta_path.insert(0, _NoTomllib())
sys.modules.pop("tomllib", None)
module_name, project = sys.argv[1], Path(sys.argv[2])
for dependency in DEPENDENCIES:
    importlib.import_module(dependency)  # imported as this Python is, before the version reads 3.10
real_version = sys.version_info
sys.version_info = (3, 10, 13, "final", 0)
module = importlib.import_module(module_name)  # migrate.config imports its TOML parser only in load()
result = {}
try:
    result["loaded"] = repr(module.load(project / "good"))
except ValueError as exc:
    result["loaded"] = f"error: {exc}"
try:
    module.load(project / "bad")
except ValueError as exc:
    result["error"] = str(exc)
sys.version_info = real_version
result["toml"] = "tomli" if "tomli" in sys.modules else "tomllib" if "tomllib" in sys.modules else "none"
print(json.dumps(result))
"""


def _load_as_on_310(tmp_path: Path, module: str, dependencies: list[str], good: str) -> dict[str, str]:
    for name, text in (("good", good), ("bad", '[tool]\nname = "unterminated\n')):
        (tmp_path / name).mkdir()
        (tmp_path / name / "pyproject.toml").write_text(text)
    script = tmp_path / "as_on_310.py"
    script.write_text(_AS_ON_310.replace("DEPENDENCIES", repr(dependencies)))
    done = subprocess.run(
        [sys.executable, str(script), module, str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_neuron_migrate_reads_its_settings_with_tomli(tmp_path: Path) -> None:
    result = _load_as_on_310(
        tmp_path, "migrate.config", ["migrate"], '[tool.neuron-migrate]\nignore = ["NM305"]\njobs = 2\n'
    )
    assert result["toml"] == "tomli"
    assert "'ignore': ['NM305'], 'jobs': 2" in result["loaded"]
    bad = tmp_path / "bad" / "pyproject.toml"
    assert result["error"].startswith(f"{bad.resolve()}: ") and "line 2" in result["error"]


@pytest.mark.slow  # the settings module imports the simulate report, which imports torch
def test_simulate_reads_its_settings_with_tomli(tmp_path: Path) -> None:
    result = _load_as_on_310(
        tmp_path,
        "neuroncompat.simulate.settings",
        ["neuroncompat.simulate.report"],
        "[tool.neuroncompat.simulate]\nmax-shapes = 8\n",
    )
    assert result["toml"] == "tomli"
    assert "max_shapes=8" in result["loaded"]
    bad = tmp_path / "bad" / "pyproject.toml"
    assert result["error"].startswith(f"{bad.resolve()}: ") and "line 2" in result["error"]
