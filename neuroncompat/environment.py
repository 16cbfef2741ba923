"""Every ``NEURONCOMPAT_*`` environment variable: one table, one parser, one error.

Why one table: a setting read ad hoc where it is used fails in as many ways as it has readers. A typo
(``NEURONCOMPAT_SIMULATE=2``, ``NEURONCOMPAT_DEVICE_MAP=balance``) was taken as "off", a bad number
(``NEURONCOMPAT_SIMULATE_CORES=abc``) ended in a bare ``int()`` traceback deep in the simulator, which
``neuroncompat simulate`` then reported as the user's script failing. Here every variable has its type,
accepted values, default and purpose in :data:`VARIABLES`; :func:`check` parses every one that is set and
raises :class:`SettingError` naming the variable and what it accepts. The shim calls it first thing at
``import neuroncompat`` (so also at the start of the ``neuroncompat`` command, which imports it), before a
patch, the simulator or the user's script runs; readers then ask the typed accessors (:func:`flag`,
:func:`integer`, ...), which parse the same way. ``docs/environment.md`` is :func:`markdown` of the table
(``tests/test_environment.py`` fails while it is stale).

``import neuroncompat`` goes first in every migrated script, so this module imports nothing beyond ``os``
and ``re``.
"""

from __future__ import annotations

import os
import re

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

DOC_PAGE = "docs/environment.md"
REGENERATE = f"python -c 'from neuroncompat import environment; print(environment.markdown(), end=\"\")' > {DOC_PAGE}"

_ON = ("1", "true", "yes", "on")
_OFF = ("0", "false", "no", "off")


class SettingError(ValueError):
    """A ``NEURONCOMPAT_*`` variable holds a value it does not accept; the message names both and the fix."""


def _flag(text: str) -> bool:
    value = text.lower()
    if value in _ON:
        return True
    if value in _OFF:
        return False
    raise ValueError


def _whole(minimum: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        if not re.fullmatch(r"\+?[0-9]+", text) or int(text) < minimum:
            raise ValueError
        return int(text)

    return parse


def _choice(*choices: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        if text.lower() not in choices:
            raise ValueError
        return text.lower()

    return parse


def _size(text: str) -> int:
    match = re.fullmatch(r"(\d+)\s*([kKmMgGtT]?)(?:i?[bB])?", text)
    if match is None or int(match[1]) == 0:
        raise ValueError
    return int(match[1]) * {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}[match[2].lower()]


def _names(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


def _paths(text: str) -> tuple[str, ...]:
    return tuple(part for part in text.split(os.pathsep) if part)


def _text(text: str) -> str:
    return text


class Variable:
    """One row of the table. ``default`` is the value an unset (or empty) variable has; ``default_text`` says
    it for the docs where the code derives more than the value (the simulated cores follow the launcher)."""

    __slots__ = ("name", "kind", "accepted", "default", "default_text", "description", "parse")

    def __init__(
        self,
        name: str,
        kind: str,
        accepted: str,
        default: object,
        description: str,
        parse: Callable[[str], object],
        default_text: str | None = None,
    ) -> None:
        self.name = name
        self.kind = kind
        self.accepted = accepted
        self.default = default
        self.default_text = default_text if default_text is not None else str(default) if default else "none"
        self.description = description
        self.parse = parse

    def read(self, environ: Mapping[str, str]) -> object:
        """The value ``environ`` gives this variable; :class:`SettingError` for one it does not accept."""
        raw = environ.get(self.name)
        if raw is None or not raw.strip():
            return self.default
        try:
            return self.parse(raw.strip())
        except ValueError:
            raise SettingError(
                f"{self.name}={raw!r} is not accepted; expected {self.accepted} ({self.description}). "
                f"Every NEURONCOMPAT_* setting is listed in {DOC_PAGE}."
            ) from None


_VARIABLES = (
    Variable(
        "NEURONCOMPAT_SIMULATE",
        "flag",
        "1, true, yes or on (on); 0, false, no, off or unset (off)",
        False,
        "turn on the simulated Neuron device at `import torch` and `import neuroncompat` "
        "(`neuroncompat simulate` and `check` set it for the script)",
        _flag,
        default_text="off",
    ),
    Variable(
        "NEURONCOMPAT_SIMULATE_CORES",
        "integer",
        "a whole number >= 1",
        2,
        "how many NeuronCores the simulated host has",
        _whole(1),
        default_text="2, or one per local process under torchrun/accelerate when they start more",
    ),
    Variable(
        "NEURONCOMPAT_SIMULATE_CORE_MEMORY",
        "size",
        "a size in bytes above 0, with an optional K, M, G or T suffix (24G, 512M, 1073741824)",
        24 * 1024**3,
        "memory of each simulated NeuronCore (a logical core of a Trn2 with LNC=2 has 24 GiB)",
        _size,
        default_text="24G",
    ),
    Variable(
        "NEURONCOMPAT_SIMULATE_CPU_FALLBACK_OPS",
        "names",
        "operator names separated by commas (aten::nonzero,aten::unique)",
        (),
        "operators your torch-neuronx release runs on the CPU, added to the simulator's table "
        "(`neuroncompat simulate --cpu-fallback-op` sets it)",
        _names,
    ),
    Variable(
        "NEURONCOMPAT_SIMULATE_RECORD",
        "path",
        "a directory",
        None,
        "where each simulated process records its compilations for the report "
        "(set by `neuroncompat simulate`; not meant to be set by hand)",
        _text,
    ),
    Variable(
        "NEURONCOMPAT_DISABLE",
        "names",
        "patch ids separated by commas, or all (`neuroncompat doctor` lists the ids)",
        (),
        "runtime patches left off",
        _names,
    ),
    Variable(
        "NEURONCOMPAT_DEVICE_MAP",
        "choice",
        "balanced",
        None,
        'spread one model loaded with device_map="auto" over every visible NeuronCore instead of the first',
        _choice("balanced"),
    ),
    Variable(
        "NEURONCOMPAT_RECOMPILE_LIMIT",
        "integer",
        "a whole number >= 1",
        64,
        "torch._dynamo.config.recompile_limit on Neuron: static shapes compile one graph per shape bucket "
        "(a value you set is used as it is, even below Dynamo's own 8)",
        _whole(1),
    ),
    Variable(
        "NEURONCOMPAT_KERNELS_UNIVERSAL",
        "flag",
        "1, true, yes or on (on); 0, false, no, off or unset (off)",
        False,
        "load a Hub kernel's legacy torch-universal (usually Triton) build on Neuron instead of refusing it",
        _flag,
        default_text="off",
    ),
    Variable(
        "NEURONCOMPAT_DIFFUSERS_DTYPE",
        "choice",
        "bf16 or bfloat16",
        None,
        "load diffusers models and pipelines asked for in float16 as bfloat16 (else fp16 is kept, with a warning)",
        _choice("bf16", "bfloat16"),
    ),
    Variable(
        "NEURONCOMPAT_VLLM_FALLBACK",
        "flag",
        "1, true, yes or on (on); 0, false, no, off or unset (off)",
        False,
        "TRL trainers configured with use_vllm=True generate with transformers instead of failing",
        _flag,
        default_text="off",
    ),
    Variable(
        "NEURONCOMPAT_CUDA",
        "choice",
        "redirect; off, 0, no or false (off)",
        None,
        "run a script's CUDA calls on the NeuronCore (docs/cuda_redirect.md)",
        _choice("redirect", "off", "0", "no", "false"),
        default_text="off",
    ),
    Variable(
        "NEURONCOMPAT_CUDA_USER_PATHS",
        "paths",
        "directories separated by os.pathsep (: on Linux)",
        (),
        "code under these directories counts as the user's, so the CUDA redirect applies to it",
        _paths,
    ),
    Variable(
        "NEURONCOMPAT_CUDA_LOG",
        "path",
        "a directory",
        None,
        "where the CUDA redirect writes each process's call sites",
        _text,
        default_text="neuroncompat-cuda-redirect in the system's temporary directory",
    ),
    Variable(
        "NEURONCOMPAT_CACHE_DIR",
        "path",
        "a directory",
        None,
        "where the simulator's native library is built and kept",
        _text,
        default_text="$XDG_CACHE_HOME/neuroncompat, else ~/.cache/neuroncompat",
    ),
)

VARIABLES: dict[str, Variable] = {variable.name: variable for variable in _VARIABLES}


def check(environ: Mapping[str, str] | None = None) -> None:
    """Parse every variable that is set; :class:`SettingError` for the first bad one."""
    environ = os.environ if environ is None else environ
    for variable in _VARIABLES:
        variable.read(environ)


def _read(name: str, kind: str) -> object:
    variable = VARIABLES[name]
    if variable.kind != kind:
        raise TypeError(f"{name} is a {variable.kind} setting, not a {kind}")
    return variable.read(os.environ)


def flag(name: str) -> bool:
    """An on/off setting (unset: its default)."""
    return bool(_read(name, "flag"))


def integer(name: str) -> int:
    """A whole-number setting (unset: its default)."""
    value = _read(name, "integer")
    assert isinstance(value, int)
    return value


def size(name: str) -> int:
    """A size in bytes (unset: its default)."""
    value = _read(name, "size")
    assert isinstance(value, int)
    return value


def choice(name: str) -> str | None:
    """One of the variable's choices, lower-cased (unset: None)."""
    value = _read(name, "choice")
    return value if isinstance(value, str) else None


def names(name: str) -> tuple[str, ...]:
    """A comma-separated list (unset: empty)."""
    value = _read(name, "names")
    assert isinstance(value, tuple)
    return value


def paths(name: str) -> tuple[str, ...]:
    """An ``os.pathsep``-separated list (unset: empty)."""
    value = _read(name, "paths")
    assert isinstance(value, tuple)
    return value


def path(name: str) -> str | None:
    """A path setting (unset: None, and the reader applies the default the table describes)."""
    value = _read(name, "path")
    return value if isinstance(value, str) else None


def is_set(name: str) -> bool:
    """Whether the user gave ``name`` a value (an empty one counts as unset), e.g. to keep it as given."""
    return bool(os.environ.get(VARIABLES[name].name, "").strip())


def integer_default(name: str) -> int:
    """A whole-number setting's default, for code that derives from it (the simulated cores)."""
    value = VARIABLES[name].default
    assert isinstance(value, int)
    return value


def markdown() -> str:
    """``docs/environment.md``: the table as a page."""
    lines = [
        "# Environment variables",
        "",
        f"<!-- Generated from neuroncompat/environment.py: {REGENERATE} -->",
        "",
        "Every `NEURONCOMPAT_*` variable neuroncompat reads. Each is checked when `import neuroncompat` runs (and so",
        "when the `neuroncompat` command starts, before `simulate` or `check` run anything): a value not accepted",
        "stops the process with one line naming the variable and what it accepts, instead of being taken as",
        "unset. An empty value counts as unset.",
        "",
        "| variable | type | accepted values | default | what it does |",
        "|---|---|---|---|---|",
    ]
    for variable in _VARIABLES:
        cells = (
            f"`{variable.name}`",
            variable.kind,
            variable.accepted,
            variable.default_text,
            variable.description,
        )
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    return "\n".join(lines) + "\n"
