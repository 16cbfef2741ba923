"""Rule families switched on per file by their own tokens (issue 39): the table's tokens against the families' tables.

A family's tokens decide whether its module is imported and its hooks run on a file, so a name a family acts on
that its tokens miss is a rewrite silently lost. `tests/migrate/test_prefilter.py` checks the fixtures and the
rule examples end to end (gated and with every family on give the same migration); these tests check each token
list against the names the family's own code acts on, so a name added to a family's table without its token
fails here, and show what the gating gives a script: its families and only those, whatever ran before.
"""

from __future__ import annotations

import re

import pytest

from migrate.rule_families import FAMILIES, active_families, family_modules, rules_off
from migrate.rules import compile_env, drift, quantization, todo, trl_moved, xla
from migrate.rules.legacy_tensor_types import DTYPES

TOKENS = {family.name: re.compile(family.tokens) for family in FAMILIES if family.tokens is not None}


def switched_on(family: str, text: str) -> bool:
    return family in active_families(text.encode())


@pytest.mark.parametrize(
    ("family", "names"),
    [
        ("drift", [*drift.FIELDS, *drift.TRAINER_KWARGS_MOVED, *drift.MODEL_CONFIG_FIELDS, *drift.MODEL_CONFIG_MOVED]),
        ("drift", list(drift.REMOVED_TRL_API)),
        ("compile_env", list(compile_env.MESSAGES)),
        ("xla", list(xla._XLA_ENV)),
        ("quantization", [*quantization._BNB_OPTIMS, *quantization._QUANTIZED_KEYS]),
        ("todo", list(todo._PACKAGES)),
        ("legacy_tensor_types", [f"torch.cuda.{name}" for name in DTYPES]),
    ],
)
def test_a_family_is_switched_on_by_every_name_its_tables_act_on(family: str, names: list[str]):
    missed = [name for name in names if not TOKENS[family].search(name.encode())]
    assert not missed, f"{family}: its tokens miss {missed}"


def test_moved_trl_names_switch_on_their_family_through_their_import():
    for name, module in trl_moved.MOVED.items():
        assert switched_on("trl_moved", f"from trl import {name}\n"), name
        assert switched_on("trl_moved", f"from {module} import {name}\n"), name


def test_a_script_gets_its_families_and_what_they_need():
    cuda = active_families(b"import torch\nx = torch.zeros(2).cuda()\nprint(torch.cuda.memory_allocated())\n")
    assert {"settings", "device", "cuda_api", "retired", "todo"} <= set(cuda)
    assert not {"optimum_training", "xla", "diffusers_cuda", "drift", "legacy", "generate"} & set(cuda)
    optimum = active_families(b"from optimum.neuron import NeuronTrainer\n")
    assert {"legacy", "optimum_training", "optimum_inference", "optimum_diffusion"} <= set(optimum)
    assert "device" not in optimum
    assert active_families(b"print('hello')\n") == ()


def test_the_rules_of_a_family_loaded_but_off_for_a_file_are_off_in_it():
    """A family imported for an earlier file registered its settings; in a file without its tokens they do nothing."""
    family_modules()  # every family loaded, as after a run over a varied tree
    off = rules_off(active_families(b'device = "cuda"\n'))
    assert {"NM207", "NM401", "NM501", "NM601"} <= off  # attention, distributed, Optimum, torch_xla: not this file's
    assert not {"NM102", "NM105"} & off  # device's own rules stay on
    assert not any(rule.startswith(("NM8", "NM90")) for rule in off)  # rules-only catalogues are never switched off
