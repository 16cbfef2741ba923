"""``xla_coinstall``: with torch_xla installed, transformers and accelerate still use the neuron device.

torch_xla cannot be installed here next to the simulator, so a minimal ``torch_xla`` package on
``PYTHONPATH`` stands in for the co-installed one: both libraries decide from its mere presence
(transformers: ``find_spec``; accelerate: importing ``torch_xla.core.xla_model`` and
``torch_xla.runtime``). The tests check which path the libraries choose, in fresh interpreters
(run in parallel to keep the suite fast). The stub has no devices, so where a library goes down its
XLA path, that shows as an error from the stub.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from helpers import run_python

_PROBE = """
import json, logging, sys
logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(name)s %(message)s")
{first}
from transformers.utils import is_torch_xla_available as transformers_xla
result = {{"transformers": transformers_xla()}}
try:
    from accelerate.utils import is_torch_xla_available as accelerate_xla
    result["accelerate"] = accelerate_xla()
    from transformers import TrainingArguments
    result["device"] = str(TrainingArguments(output_dir="out", report_to=[]).device)
except Exception as exc:
    result["error"] = f"{{type(exc).__name__}}: {{exc}}"
print(json.dumps(result))
"""

# Just enough of torch_xla for accelerate's imports (accelerate/accelerator.py:162-164, data_loader.py:670-673).
_STUB = {
    "torch_xla/__init__.py": "",
    "torch_xla/core/__init__.py": "",
    "torch_xla/core/xla_model.py": "",
    "torch_xla/runtime.py": "",
    "torch_xla/distributed/__init__.py": "",
    "torch_xla/distributed/xla_multiprocessing.py": "",
    "torch_xla/distributed/parallel_loader.py": "class MpDeviceLoader:\n    pass\n",
}

_CASES = {
    "without": ("import neuroncompat", {"NEURONCOMPAT_DISABLE": "xla_coinstall"}),
    "with": ("import neuroncompat", {}),
    "imported_first": ("import transformers.utils.import_utils, accelerate\nimport neuroncompat", {}),
}


# the tests read one set of probes (three fresh interpreters): one pytest worker runs them all
pytestmark = pytest.mark.xdist_group("xla_coinstall_probes")


@pytest.fixture(scope="module")
def probes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[dict[str, object], str]]:
    root = tmp_path_factory.mktemp("site")
    for module, text in _STUB.items():
        (root / module).parent.mkdir(parents=True, exist_ok=True)
        (root / module).write_text(text)

    def probe(case: str) -> tuple[dict[str, object], str]:
        first, env = _CASES[case]
        proc = run_python(
            _PROBE.format(first=first),
            env={"PYTHONPATH": str(root), "NEURONCOMPAT_SIMULATE": "1", **env},
            cwd=root,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout.strip().splitlines()[-1]), proc.stderr

    with ThreadPoolExecutor(len(_CASES)) as pool:
        return dict(zip(_CASES, pool.map(probe, _CASES)))


def test_gap_xla_paths_without_the_patch(probes: dict[str, tuple[dict[str, object], str]]) -> None:
    result, _ = probes["without"]
    assert result["transformers"] is True and result["accelerate"] is True
    # accelerate picks XLA before Neuron (accelerate/state.py:765-767) and asks torch_xla for the device.
    assert result["error"] == "AttributeError: module 'torch_xla.core.xla_model' has no attribute 'xla_device'"


def test_native_neuron_with_the_patch(probes: dict[str, tuple[dict[str, object], str]]) -> None:
    result, log = probes["with"]
    assert result == {"transformers": False, "accelerate": False, "device": "neuron:0"}
    assert "[xla_coinstall] torch_xla is installed next to torch-neuronx: USE_TORCH_XLA=0" in log


def test_libraries_imported_before_the_shim(probes: dict[str, tuple[dict[str, object], str]]) -> None:
    result, log = probes["imported_first"]
    assert result == {"transformers": False, "accelerate": False, "device": "neuron:0"}
    assert "[xla_coinstall] transformers was imported first: its USE_TORCH_XLA flag set to 0" in log
    assert "[xla_coinstall] accelerate was imported first: its torch_xla flags set to False" in log


def test_a_user_value_is_kept(
    neuron: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import logging
    import os

    import neuroncompat

    (tmp_path / "torch_xla").mkdir()
    (tmp_path / "torch_xla" / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("USE_TORCH_XLA", "1")
    neuroncompat.revert()
    try:
        with caplog.at_level(logging.INFO, logger="neuroncompat"):
            neuroncompat.apply()
        assert os.environ["USE_TORCH_XLA"] == "1"
        assert "[xla_coinstall] USE_TORCH_XLA=1 kept as you set it" in caplog.text
    finally:
        neuroncompat.revert()


def test_nothing_happens_without_torch_xla(neuron: object) -> None:
    import os

    import neuroncompat

    neuroncompat.revert()
    try:
        before = os.environ.get("USE_TORCH_XLA")
        assert neuroncompat.apply()["xla_coinstall"].state == "applied"
        assert os.environ.get("USE_TORCH_XLA") == before
        neuroncompat.revert()
        assert neuroncompat.apply(skip=["xla_coinstall"])["xla_coinstall"].state == "disabled"
    finally:
        neuroncompat.revert()
