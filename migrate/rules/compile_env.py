"""NM923: Optimum Neuron's compile settings set from Python (`os.environ["NEURON_CC_FLAGS"] = ...`).

The shell and YAML forms are NM823-NM826 (`migrate.configs.cluster_shell`, `k8s_rules`); a script
that sets the same variables in `os.environ` gets the same advice as a TODO, since whether the
value still means anything (a compiler flag, a local cache directory, a graph-extraction switch)
is for a person to decide.
"""

from __future__ import annotations

import libcst as cst

from migrate.configs.cluster_catalog import CACHE_DOC, NEFF_CACHE_ENV, TODO_TEXT
from migrate.context import FileContext
from migrate.registry import Rule
from migrate.rules.base import environ_setting, on
from migrate.rules.todo_catalogue import todo

MESSAGES = {
    "NEURON_CC_FLAGS": "NEURON_CC_FLAGS still reaches neuronx-cc, but a --cache_dir in it is torch_xla's: set "
    + NEFF_CACHE_ENV
    + " instead, and drop --retry_failed_compilation",
    "NEURON_COMPILE_CACHE_URL": "NEURON_COMPILE_CACHE_URL is Optimum Neuron's cache: a local directory becomes "
    + NEFF_CACHE_ENV
    + "; an S3 bucket has no counterpart",
    "CUSTOM_CACHE_REPO": TODO_TEXT["NM824"].format(name="CUSTOM_CACHE_REPO", value="...", what="a Hub repository"),
    "NEURON_PARALLEL_COMPILE": TODO_TEXT["NM825"].format(name="NEURON_PARALLEL_COMPILE"),
    "NEURON_EXTRACT_GRAPHS_ONLY": TODO_TEXT["NM825"].format(name="NEURON_EXTRACT_GRAPHS_ONLY"),
}

RULES: tuple[Rule, ...] = (
    Rule(
        id="NM923",
        name="optimum-compile-env-python",
        summary="TODO: `os.environ[...]` settings of Optimum Neuron's compile plumbing (`NEURON_CC_FLAGS`, "
        "`NEURON_COMPILE_CACHE_URL`, `CUSTOM_CACHE_REPO`, `NEURON_PARALLEL_COMPILE`).",
        rationale="The Python form of NM823-NM825: TorchNeuron keeps compiled NEFFs in `TORCH_NEURONX_NEFF_CACHE_DIR` "
        "(" + CACHE_DOC + "), Optimum's S3/Hub caches and its graph-extraction pass have no counterpart.",
        before='import os\nos.environ["CUSTOM_CACHE_REPO"] = "my-org/cache"\n',
        after=f"import os\n# TODO(neuron-migrate NM923): {MESSAGES['CUSTOM_CACHE_REPO']}\n"
        'os.environ["CUSTOM_CACHE_REPO"] = "my-org/cache"\n',
        safety="safe",
        todo=True,
    ),
)


@on("SimpleStatementLine", "NM824", "NM825", "NM923")
def compile_env_statement(node: cst.SimpleStatementLine, ctx: FileContext) -> cst.CSTNode:
    """A TODO on a statement setting one of Optimum's compile variables."""
    name = environ_setting(node)
    if name in MESSAGES:
        todo(ctx, "NM923", MESSAGES[name])
    return node
