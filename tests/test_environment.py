"""Every NEURONCOMPAT_* variable goes through one table: a bad value stops the run first, naming the variable."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import run_python

from neuroncompat import environment

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "neuroncompat"

BAD_VALUES = [
    ("NEURONCOMPAT_SIMULATE", "2", "1, true, yes or on"),
    ("NEURONCOMPAT_SIMULATE_CORES", "0", "a whole number >= 1"),
    ("NEURONCOMPAT_SIMULATE_CORES", "abc", "a whole number >= 1"),
    ("NEURONCOMPAT_SIMULATE_CORES", "1.5", "a whole number >= 1"),
    ("NEURONCOMPAT_SIMULATE_CORES", "-1", "a whole number >= 1"),
    ("NEURONCOMPAT_SIMULATE_CORE_MEMORY", "lots", "a size in bytes"),
    ("NEURONCOMPAT_DEVICE_MAP", "balance", "balanced"),
    ("NEURONCOMPAT_RECOMPILE_LIMIT", "x", "a whole number >= 1"),
    ("NEURONCOMPAT_KERNELS_UNIVERSAL", "sure", "1, true, yes or on"),
    ("NEURONCOMPAT_DIFFUSERS_DTYPE", "fp32", "bf16 or bfloat16"),
    ("NEURONCOMPAT_CUDA", "redirct", "redirect"),
]


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NEURONCOMPAT_")}
    env.update(extra)
    return env


@pytest.mark.parametrize(("name", "value", "accepted"), BAD_VALUES)
def test_a_bad_value_names_the_variable_and_what_it_accepts(name: str, value: str, accepted: str) -> None:
    with pytest.raises(environment.SettingError) as error:
        environment.check({name: value})
    assert str(error.value).startswith(f"{name}={value!r} is not accepted; expected {accepted}")
    assert environment.DOC_PAGE in str(error.value)


def test_good_values_parse_to_what_the_readers_use(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in environment.VARIABLES:
        monkeypatch.delenv(name, raising=False)
    assert environment.integer("NEURONCOMPAT_SIMULATE_CORES") == 2
    assert environment.integer("NEURONCOMPAT_RECOMPILE_LIMIT") == 64
    assert environment.flag("NEURONCOMPAT_SIMULATE") is False
    monkeypatch.setenv("NEURONCOMPAT_SIMULATE", " On ")
    monkeypatch.setenv("NEURONCOMPAT_SIMULATE_CORES", "4")
    monkeypatch.setenv("NEURONCOMPAT_SIMULATE_CORE_MEMORY", "512M")
    monkeypatch.setenv("NEURONCOMPAT_DEVICE_MAP", "Balanced")
    monkeypatch.setenv("NEURONCOMPAT_DISABLE", "compile, precision,")
    monkeypatch.setenv("NEURONCOMPAT_RECOMPILE_LIMIT", "")  # empty counts as unset
    environment.check()
    assert environment.flag("NEURONCOMPAT_SIMULATE") is True
    assert environment.integer("NEURONCOMPAT_SIMULATE_CORES") == 4
    assert environment.size("NEURONCOMPAT_SIMULATE_CORE_MEMORY") == 512 * 1024**2
    assert environment.choice("NEURONCOMPAT_DEVICE_MAP") == "balanced"
    assert environment.names("NEURONCOMPAT_DISABLE") == ("compile", "precision")
    assert environment.integer("NEURONCOMPAT_RECOMPILE_LIMIT") == 64
    assert not environment.is_set("NEURONCOMPAT_RECOMPILE_LIMIT")


def test_the_docs_page_is_the_table() -> None:
    page = ROOT / environment.DOC_PAGE
    assert page.read_text(encoding="utf-8") == environment.markdown(), (
        f"{environment.DOC_PAGE} is stale: {environment.REGENERATE}"
    )


def test_every_variable_the_package_names_is_in_the_table() -> None:
    """A NEURONCOMPAT_* name in the code but not in the table would be read without the parser's checks."""
    import re

    named = set()
    for path in [*PACKAGE.rglob("*.py"), *(ROOT / "neuroncompat_autoload").rglob("*.py")]:
        named.update(re.findall(r"NEURONCOMPAT_[A-Z_]*[A-Z]", path.read_text(encoding="utf-8")))
    assert named - set(environment.VARIABLES) == set()


def test_import_stops_with_one_line_naming_the_variable() -> None:
    result = run_python("import neuroncompat", env={"NEURONCOMPAT_SIMULATE_CORES": "abc"}, timeout=60)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith("neuroncompat: NEURONCOMPAT_SIMULATE_CORES='abc' is not accepted;")


def test_disable_with_an_unknown_patch_id_names_the_variable() -> None:
    result = run_python("import neuroncompat", env={"NEURONCOMPAT_DISABLE": "compile,compil"}, timeout=60)
    assert result.returncode == 1
    assert result.stderr.startswith("neuroncompat: NEURONCOMPAT_DISABLE: unknown neuroncompat patch id(s) ['compil']")
    assert "accepted: all, " in result.stderr


@pytest.mark.parametrize(
    "command",
    [["simulate", sys.executable, "{script}"], ["check", "{script}"]],
    ids=["simulate", "check"],
)
def test_the_command_stops_before_running_anything(tmp_path: Path, command: list[str]) -> None:
    marker = tmp_path / "ran"
    script = tmp_path / "train.py"
    script.write_text(f"open({str(marker)!r}, 'w').close()\n")
    argv = [sys.executable, "-m", "neuroncompat.cli", *(part.format(script=script) for part in command)]
    env = _clean_env(NEURONCOMPAT_SIMULATE_CORES="1.5")
    result = subprocess.run(argv, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode == 1, result.stderr
    assert result.stderr.strip() == (
        "neuroncompat: NEURONCOMPAT_SIMULATE_CORES='1.5' is not accepted; expected a whole number >= 1 "
        "(how many NeuronCores the simulated host has). Every NEURONCOMPAT_* setting is listed in "
        "docs/environment.md."
    )
    assert result.stdout == ""  # no report claiming the script failed
    assert not marker.exists()


def test_autoload_warns_naming_the_variable_and_torch_still_imports() -> None:
    result = run_python("import torch; print(torch.tensor([1]).device)", env={"NEURONCOMPAT_SIMULATE": "2"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "cpu"
    assert "NEURONCOMPAT_SIMULATE='2' is not accepted" in result.stderr


def test_a_recompile_limit_below_dynamos_is_used_and_logged(
    neuron: object, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import logging

    import torch._dynamo.config

    import neuroncompat

    monkeypatch.setenv("NEURONCOMPAT_RECOMPILE_LIMIT", "4")
    neuroncompat.revert()
    try:
        with caplog.at_level(logging.INFO, logger="neuroncompat"):
            states = neuroncompat.apply()
        assert torch._dynamo.config.recompile_limit == 4
    finally:
        neuroncompat.revert()
    assert states["dynamic_shapes"].state == "applied"
    assert "recompile_limit 8 -> 4 (NEURONCOMPAT_RECOMPILE_LIMIT=4)" in caplog.text
