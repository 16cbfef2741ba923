"""What the diffusers rules need to know about a file: is it a diffusers script, which dtype keyword its loads take.

Not a family (no rules, no hooks): the CUDA diffusers rules (`diffusers_cuda`), the Optimum Neuron
diffusion rules (`optimum_diffusion`) and the generic rules that must treat a diffusers load differently
(NM203 in `precision`, NM209 in `quantization`) all ask here, so the answer is the same everywhere.

The dtype keyword: diffusers 0.40 added `dtype=` and deprecated `torch_dtype=`; up to 0.39 a `dtype=`
is swallowed with an "are not expected ... will be ignored" warning and the pipeline loads in fp32
(docs/gaps.md, "Facts the codemod's diffusers rules rely on"). The codemod cannot see which diffusers the
script will run with, except where the script says so itself: diffusers' own example scripts call
`check_min_version("0.37.0")` from `diffusers.utils`. So a diffusers load keeps (and gets) `torch_dtype=`,
which every release accepts, unless the file requires diffusers 0.40 or later.
"""

from __future__ import annotations

import re

import libcst as cst

from migrate.context import FileContext
from migrate.rules.base import family_state
from migrate.rules.legacy_names import resolve

_IMPORTS_DIFFUSERS = re.compile(r"^[ \t]*(?:from|import)[ \t]+diffusers\b", re.M)
_MIN_VERSION = re.compile(r"check_min_version\(\s*[\"'](\d+)\.(\d+)")
DTYPE_SINCE = (0, 40)  # the first diffusers release whose loads read `dtype=`


class _Facts:
    """Per-file answers, computed from the source text on first use."""

    def __init__(self) -> None:
        self.known = False
        self.diffusers = False
        self.accepts_dtype = False

    def read(self, text: str) -> _Facts:
        if not self.known:
            self.known = True
            self.diffusers = bool(_IMPORTS_DIFFUSERS.search(text)) or _optimum_diffusion(text)
            found = _MIN_VERSION.search(text)
            self.accepts_dtype = found is not None and (int(found.group(1)), int(found.group(2))) >= DTYPE_SINCE
        return self


def _optimum_diffusion(text: str) -> bool:
    """An Optimum Neuron diffusion script becomes a diffusers one (its pipelines are swapped for diffusers')."""
    return "optimum" in text and re.search(r"\bNeuron\w*(?:Pipeline|PipelineBase)\b", text) is not None


def _facts(ctx: FileContext) -> _Facts:
    return family_state(ctx, "diffusers-facts", _Facts).read(ctx.text)


def is_diffusers_file(ctx: FileContext) -> bool:
    """The file imports diffusers (or Optimum Neuron's diffusion pipelines, which become diffusers')."""
    return _facts(ctx).diffusers


def accepts_dtype(ctx: FileContext) -> bool:
    """The file requires a diffusers whose loads read `dtype=` (`check_min_version("0.40")` or later)."""
    return _facts(ctx).accepts_dtype


def is_diffusers_name(node: cst.BaseExpression, ctx: FileContext) -> bool:
    """`node` names something from diffusers, or an Optimum Neuron class that becomes a diffusers one."""
    qualified = ctx.qualify(node) or ""
    if qualified == "diffusers" or qualified.startswith("diffusers."):
        return True
    while qualified:
        found = resolve(qualified)
        if found is not None:
            return found.module == "diffusers"
        qualified = qualified.rpartition(".")[0]
    return False


def is_diffusers_load(call: cst.Call, ctx: FileContext) -> bool:
    """`X.from_pretrained(...)`/`X.from_single_file(...)`/`X.from_pipe(...)` of a diffusers class."""
    func = call.func
    return (
        type(func) is cst.Attribute
        and func.attr.value in ("from_pretrained", "from_single_file", "from_pipe")
        and is_diffusers_name(func.value, ctx)
    )


def keeps_torch_dtype(ctx: FileContext) -> bool:
    """NM203 leaves `torch_dtype=` of diffusers loads alone here: the file may run on diffusers <= 0.39."""
    return is_diffusers_file(ctx) and not accepts_dtype(ctx)


def dtype_keyword(call: cst.Call, ctx: FileContext) -> str:
    """The keyword a rule adding a dtype to `call` uses: `torch_dtype` for a diffusers load that may meet <= 0.39."""
    return "torch_dtype" if is_diffusers_load(call, ctx) and not accepts_dtype(ctx) else "dtype"
