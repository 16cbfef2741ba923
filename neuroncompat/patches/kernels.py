"""``kernels``: Hub kernels on Neuron: unmapped ``use_kernels`` dropped, CUDA-only ``get_kernel`` failing at the call.

Gap (docs/gaps.md#kernels):
- ``from_pretrained(..., use_kernels=True)`` kernelizes after the weights load (``set_use_kernels``,
  transformers/modeling_utils.py:3851-3891, called at :4440). transformers 5.23 accepts only kernels
  >= 0.18.2, < 0.19 (``KERNELS_MIN_VERSION``/``KERNELS_MAX_VERSION``, utils/import_utils.py:177-178), so
  with any other kernels it raises ``ValueError`` then, with the model already loaded; with a compatible
  kernels its default mapping (integrations/hub_kernels.py:145-730) has no ``"neuron"`` entry and
  ``kernelize`` keeps every original layer without a word. A ``kernel_config`` naming CUDA repos is
  mapped to the neuron device (utils/kernel_config.py:303-311) and falls back silently too
  (``KernelizeFallback.ALL``, hub_kernels.py:961).
- ``kernels.get_kernel`` of a repo with no ``torch-neuron`` build raises ``FileNotFoundError`` deep in
  the resolver (kernels/resolver.py:131-134, :219-222) without a word about Neuron, and a legacy
  ``torch-universal`` build (usually Triton) is *selected* on Neuron (kernels/variants.py:495-507) and
  fails only when called.

Fix: wrap ``PreTrainedModel.from_pretrained``: on Neuron, ``use_kernels``/``kernel_config`` with no
Neuron mapping (no ``"neuron"`` entry, and no device-less entry whose repo has a ``torch-neuron`` build)
are dropped with one WARNING (the user asked for them, and CONTRIBUTING changes an explicit value only
with a warning), so the model loads with its original layers and no late error. A Neuron mapping with a
kernels transformers does not accept gets a WARNING naming the range and is dropped the same way
(transformers would raise after loading). A Neuron mapping with an accepted kernels is left to
transformers; a WARNING names the entries it leaves without a Neuron kernel, which transformers skips
without a word. Wrap ``kernels.get_kernel``: on Neuron it first asks ``kernels.has_kernel`` (which
resolves without downloading) and, where no Neuron build exists, raises :class:`NeuronKernelMissing` (a
``FileNotFoundError``) naming the repo, the build Neuron needs and the torch op to use instead
(``migrate/kernel_repos.py``). kernels' variant check refuses ``torch-universal`` builds for the
Neuron backend, for ``get_kernel`` and ``kernelize`` alike, unless ``NEURONCOMPAT_KERNELS_UNIVERSAL=1``.
Trust is never granted: a Neuron repo from an untrusted publisher still needs the user's
``trust_remote_code=True`` (``get_kernel``, or a ``KernelConfig`` entry's metadata).

Stands down, per target: for transformers when its default mapping maps ``"neuron"``; for kernels
when its variant check no longer accepts ``torch-universal`` for Neuron and its resolvers word a
Neuron error themselves (``resolve_local_kernel``/``resolve_hub_kernel``/``resolve_hub_cache_kernel``
in kernels/resolver.py mention ``neuron``).

Example::

    model = AutoModelForCausalLM.from_pretrained(path, device_map="neuron", use_kernels=True)
    # before: ValueError (Kernels are not available ...) after loading   after: one WARNING, original layers
    act = get_kernel("kernels-community/activation", version=1)
    # before: FileNotFoundError (Cannot find a build variant ...)   after: NeuronKernelMissing naming torch.nn.functional.silu
"""

from __future__ import annotations

import ast
import functools
import importlib.metadata
import inspect
import platform
import threading
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from neuroncompat import environment
from neuroncompat.patch import Patch

UNIVERSAL_ENV = "NEURONCOMPAT_KERNELS_UNIVERSAL"
NEURON_BUILD = "build/torch-neuron/"
_UNIVERSAL = "torch-universal"
_REFUSAL = f"legacy {_UNIVERSAL} build (usually Triton) refused on Neuron by neuroncompat; {UNIVERSAL_ENV}=1 accepts it"
_PROBE_ARGS = ("revision", "version", "backend", "check_arch")
# kernels/resolver.py: where "Cannot find a build variant for this system" is raised
_NO_BUILD_RAISERS = ("resolve_local_kernel", "resolve_hub_kernel", "resolve_hub_cache_kernel")


class NeuronKernelMissing(FileNotFoundError):
    """``get_kernel`` on Neuron of a repo with no Neuron build (a ``FileNotFoundError``, as kernels raises,
    so ``kernelize``'s fallback and callers catching kernels' own error still work)."""


def universal_opted_in() -> bool:
    """The user asked to load legacy ``torch-universal`` builds on Neuron anyway."""
    return environment.flag(UNIVERSAL_ENV)


def _device_type(device: Any) -> str | None:
    return device if isinstance(device, str) else getattr(device, "type", None)


def default_mapping_maps_neuron(hub_kernels: ModuleType) -> bool:
    """Whether transformers' default kernel mapping has a ``"neuron"`` entry.

    With a kernels it accepts, transformers builds the mapping (``get_kernel_mapping_transformers``);
    otherwise that function is not even defined, and the source of ``_build_kernel_mapping`` says it.
    """
    getter = getattr(hub_kernels, "get_kernel_mapping_transformers", None)
    if getter is not None:
        return any(_device_type(device) == "neuron" for devices in getter().values() for device in devices)
    for node in ast.walk(ast.parse(inspect.getsource(hub_kernels))):
        if isinstance(node, ast.FunctionDef) and node.name == "_build_kernel_mapping":
            return any(isinstance(n, ast.Constant) and n.value == "neuron" for n in ast.walk(node))
    return False


def _universal_accepted_on_neuron(variants: ModuleType) -> bool:
    """kernels' variant check accepts a ``torch-universal`` build for the Neuron backend."""
    from kernels.backends import Neuron

    decisions = variants._check_variants(
        [variants.parse_variant(_UNIVERSAL)], Neuron(), platform.machine(), platform.system().lower(), None, None, None
    )
    return any(isinstance(d, variants.VariantAccepted) for d in decisions)


def _resolver_words_neuron(resolver: ModuleType) -> bool:
    """kernels' resolvers, which raise the no-build error (local, Hub and Hub cache), say something
    about Neuron themselves."""
    raisers = [getattr(resolver, name, None) for name in _NO_BUILD_RAISERS]
    sources = [inspect.getsource(f) for f in raisers if f is not None]
    return bool(sources) and all("neuron" in source.lower() for source in sources)


def _has_neuron_build(repo: Any, local: bool) -> bool:
    """A device-less ``KernelConfig`` entry (``"org/repo:Layer"``, or with its metadata) whose repo has a
    Neuron build: transformers maps it to the model's device, so on Neuron it is a Neuron mapping."""
    repo_str, metadata = repo if isinstance(repo, tuple) else (repo, {})
    if not isinstance(repo_str, str) or not isinstance(metadata, dict):
        return False
    repo_id = repo_str.partition(":")[0]
    if local:
        path = Path(repo_id)
        return (path / NEURON_BUILD).is_dir() or (path / "torch-neuron").is_dir()
    try:
        from kernels import has_kernel

        revision = metadata.get("revision")
        version = None if revision is not None else metadata.get("version", 1)
        return has_kernel(repo_id, revision=revision, version=version, trust_remote_code=True)
    except Exception:  # offline and not cached, no such repo: transformers could not load it either
        return False


def _repo_name(repo: Any) -> str:
    return str(repo[0] if isinstance(repo, tuple) else repo)


def neuron_entries(kernel_config: Any) -> tuple[list[str], list[str]] | None:
    """``(mapped to Neuron kernels, left without)`` as ``"Layer -> repo"`` lines for a ``KernelConfig``;
    None for a value transformers will reject itself."""
    if kernel_config is None:
        return [], []
    mapping = getattr(kernel_config, "kernel_mapping", None)
    if not isinstance(mapping, dict):
        return None
    local = bool(getattr(kernel_config, "use_local_kernel", False))
    mapped, unmapped = [], []
    for layer, repo in mapping.items():
        if isinstance(repo, dict):
            neuron = next((r for device, r in repo.items() if _device_type(device) == "neuron"), None)
            if neuron is not None:
                mapped.append(f"{layer} -> {_repo_name(neuron)}")
            else:
                unmapped.append(f"{layer}: {', '.join(map(str, repo))} only")
        elif _has_neuron_build(repo, local):
            mapped.append(f"{layer} -> {_repo_name(repo)}")
        else:
            unmapped.append(f"{layer}: {_repo_name(repo).partition(':')[0]} has no torch-neuron build")
    return mapped, unmapped


def kernels_accepted() -> tuple[bool, str]:
    """Whether transformers accepts the installed kernels, and the range it accepts (``kernels>=A,<B``)."""
    from transformers.utils import import_utils

    accepted = f"kernels>={import_utils.KERNELS_MIN_VERSION},<{import_utils.KERNELS_MAX_VERSION}"
    return bool(import_utils.is_kernels_available()), accepted


def missing_message(repo_id: str, universal_refused: bool) -> str:
    """What :class:`NeuronKernelMissing` says: the repo, the build Neuron needs and what to use instead."""
    from migrate.kernel_repos import NKI_LIBRARY, torch_op_for

    refused = (
        f"; its {_UNIVERSAL} build (legacy, usually Triton) is refused on Neuron, {UNIVERSAL_ENV}=1 loads it anyway"
        if universal_refused
        else ""
    )
    return (
        f'get_kernel("{repo_id}") on Neuron: the repo has no Neuron build. Neuron runs Hub kernels built as '
        f"{NEURON_BUILD} (pure Python and NKI, with the nki package installed){refused}. Use {torch_op_for(repo_id)} "
        f"instead, or an NKI kernel ({NKI_LIBRARY}) from a repo with a torch-neuron build."
    )


class Kernels(Patch):
    id = "kernels"
    reason = "Hub kernels: use_kernels without a Neuron mapping is dropped; get_kernel without a Neuron build fails at the call"
    targets = ("transformers.modeling_utils", "kernels")

    def __init__(self) -> None:
        super().__init__()
        self._probe = threading.local()  # set while get_kernel probes: did the variant check refuse a universal build?

    def patch_module(self, name: str, module: ModuleType) -> bool:
        if name == "kernels":
            return self._patch_kernels(module)
        from transformers.integrations import hub_kernels

        if default_mapping_maps_neuron(hub_kernels):
            return False
        cls = module.PreTrainedModel
        original = cls.__dict__["from_pretrained"].__func__
        self.replace(cls, "from_pretrained", classmethod(self._wrap_from_pretrained(original)))
        return True

    # -- transformers: use_kernels / kernel_config ----------------------------------------------
    def _wrap_from_pretrained(self, original: Callable[..., Any]) -> Callable[..., Any]:
        patch = self

        @functools.wraps(original)
        def from_pretrained(cls: type, *args: Any, **kwargs: Any) -> Any:
            if (kwargs.get("use_kernels") or kwargs.get("kernel_config") is not None) and patch._on_neuron():
                patch._settle_kernels(kwargs)
            return original(cls, *args, **kwargs)

        return from_pretrained

    def _settle_kernels(self, kwargs: dict[str, Any]) -> None:
        """Drop ``use_kernels``/``kernel_config`` where they cannot give Neuron kernels; keep them where they can."""
        config = kwargs.get("kernel_config")
        entries = neuron_entries(config)
        if entries is None:
            return
        mapped, unmapped = entries
        if not mapped:
            kwargs.pop("use_kernels", None)
            kwargs.pop("kernel_config", None)
            where = (
                'transformers\' default kernel mapping has no "neuron" entry'
                if config is None
                else f"kernel_config maps no layer to a Neuron build: {'; '.join(unmapped) or 'it is empty'}"
            )
            self.warn("use_kernels dropped: no Neuron kernels are mapped (%s); the original layers are kept", where)
            return
        accepted, wanted = kernels_accepted()
        if not accepted:
            kwargs.pop("use_kernels", None)
            kwargs.pop("kernel_config", None)
            self.warn(
                "kernel_config maps Neuron kernels (%s), but transformers %s loads kernels only with %s "
                "(installed: %s): the original layers are kept; pip install '%s' to use them",
                ", ".join(mapped),
                importlib.metadata.version("transformers"),
                wanted,
                installed_kernels(),
                wanted,
            )
            return
        if unmapped:
            self.warn("kernel_config: these layers keep their original forward on Neuron: %s", "; ".join(unmapped))

    # -- kernels: get_kernel and torch-universal ------------------------------------------------
    def _patch_kernels(self, kernels: ModuleType) -> bool:
        from kernels import load, resolver, variants

        universal = _universal_accepted_on_neuron(variants)
        silent = not _resolver_words_neuron(resolver)
        if universal:
            self.replace(variants, "_check_variants", self._wrap_check_variants(variants))
        if silent:
            wrapped = self._wrap_get_kernel(load.get_kernel, load.has_kernel)
            self.replace(load, "get_kernel", wrapped)
            if getattr(kernels, "get_kernel", None) is not None:
                self.replace(kernels, "get_kernel", wrapped)
        return universal or silent

    def _wrap_check_variants(self, variants: ModuleType) -> Callable[..., Any]:
        original = variants._check_variants
        patch = self

        @functools.wraps(original)
        def _check_variants(candidates: list[Any], selected_backend: Any, *args: Any, **kwargs: Any) -> list[Any]:
            decisions = original(candidates, selected_backend, *args, **kwargs)
            if getattr(selected_backend, "name", None) != "neuron" or universal_opted_in() or not patch._on_neuron():
                return decisions
            out = []
            for decision in decisions:
                if isinstance(decision, variants.VariantAccepted) and decision.variant.variant_str == _UNIVERSAL:
                    patch._probe.refused = True
                    patch.warn("a %s", _REFUSAL)
                    decision = variants.VariantRejected(variant=decision.variant, reason=_REFUSAL)
                out.append(decision)
            return out

        return _check_variants

    def _wrap_get_kernel(self, original: Callable[..., Any], has_kernel: Callable[..., bool]) -> Callable[..., Any]:
        patch = self

        @functools.wraps(original)
        def get_kernel(repo_id: str, *args: Any, **kwargs: Any) -> Any:
            if args or kwargs.get("backend") not in (None, "neuron") or not patch._on_neuron():
                return original(repo_id, *args, **kwargs)
            probe = {key: kwargs[key] for key in _PROBE_ARGS if key in kwargs}
            patch._probe.refused = False
            try:
                # trust is not needed to look at a repo's builds; get_kernel still checks it before loading
                found = has_kernel(repo_id, trust_remote_code=True, **probe)
            except Exception:  # offline and not cached, a bad version: kernels' own error says it best
                return original(repo_id, **kwargs)
            if not found:
                raise NeuronKernelMissing(missing_message(repo_id, patch._probe.refused))
            return original(repo_id, **kwargs)

        return get_kernel

    @staticmethod
    def _on_neuron() -> bool:
        import torch

        from neuroncompat.device import neuron_available

        return neuron_available() and not torch.cuda.is_available()


def installed_kernels() -> str:
    """The installed kernels version, or ``not installed``."""
    try:
        return importlib.metadata.version("kernels")
    except importlib.metadata.PackageNotFoundError:
        return "not installed"
