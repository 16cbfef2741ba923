"""The diffusers part of the ``neuroncompat simulate`` report: per pipeline call, what it compiled and why.

:func:`calls` reads the pipeline calls one process recorded (:mod:`~neuroncompat.simulate.pipeline_calls`)
and, for each call, counts the new graphs and eager shapes by denoising step, then names the cause of
anything new by comparing the call's parameters with the earlier calls of the same pipeline: the first
call compiles everything; afterwards only height/width, the prompt batch, ``num_images_per_prompt``,
classifier-free guidance switched on or off and the prompt's token length change the denoiser's and the
decoder's input shapes (measured on the simulator with diffusers' tiny test pipelines,
``docs/gaps.md#diffusers-dry-run``). The number of steps never does. A graph compiled after step 1 is a
bug: something that changes per step (a Python number Dynamo guards on, a shape) reaches a graph, and
every step of every call pays for it on a NeuronCore.

:func:`latents_across_ranks` checks what tensor parallelism needs: every rank drew the same initial latents
in every call (the TorchNeuron launch post's ``torch.Generator("cpu").manual_seed(0)``).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from neuroncompat.simulate.advice import Fix

# Parameters that change the compiled shapes, with what they change and the fix.
CAUSES: dict[str, tuple[str, Fix]] = {
    "size": (
        "a new latent shape for the denoiser and vae.decode",
        Fix(
            "fixed_resolution",
            "serve one height/width, or compile each (height, width) the service serves at start-up "
            "with one warm-up call each",
        ),
    ),
    "batch": (
        "a new denoiser and decode batch",
        Fix("fixed_batch", "keep the number of prompts per call fixed (pad the prompt list), or warm up each batch"),
    ),
    "num_images_per_prompt": (
        "the denoiser and decode batch is prompts x num_images_per_prompt",
        Fix("fixed_images_per_prompt", "keep num_images_per_prompt fixed, or warm up each value"),
    ),
    "cfg": (
        "classifier-free guidance doubles the denoiser batch (or adds a second forward); off, it halves again",
        Fix(
            "consistent_cfg",
            "keep guidance on for every call (guidance_scale > 1, true_cfg_scale > 1 with a negative prompt) "
            "or off for every call",
        ),
    ),
    "prompt_length": (
        "the text embeddings are padded to the longest prompt, so the prompt's token count is a graph dimension",
        Fix(
            "pad_prompt",
            "pad prompt_embeds (and its mask) to one length, e.g. max_sequence_length, before the call, or "
            "call with a fixed max_sequence_length",
        ),
    ),
}
FIRST_CALL = "first call of this pipeline: it compiles every graph its shapes need"
UNEXPLAINED = (
    "the shape parameters equal those of call #{other}, which compiled its graphs already: a Python number, a "
    "dtype or a tensor stride that Dynamo guards on changed (compare the graphs of the two calls)"
)
LATER_STEP = Fix(
    "static_step",
    "something that changes per step reaches a compiled graph: pass per-step values as tensors (the timestep "
    "already is one), not Python floats or ints, and keep every step's shapes equal",
)
DECODE_EAGER = Fix(
    "compile_decode",
    "the pipeline calls vae.decode, which torch.compile(pipe.vae) leaves eager: "
    'pipe.vae.decode = torch.compile(pipe.vae.decode, backend="neuron", fullgraph=True, dynamic=False) '
    "(neuron-migrate NM332; the shim's diffusers_vae_compile patch does it at run time)",
)
DECODE_UNROLLED = Fix(
    "decode_unrolled",
    "a compiled decode with VAE tiling or slicing unrolls every tile/slice into one graph: with fixed shapes "
    "turn tiling/slicing off, or compile pipe.vae.decoder (a module) so each tile is one small graph",
)
TEXT_ENCODER_ON_DEVICE = Fix(
    "text_encoder_cpu",
    "the text encoders run eagerly on the NeuronCore, one compilation per new token shape; the TorchNeuron "
    'launch post keeps them on the CPU: pipe.encode_prompt(..., device="cpu") and pass prompt_embeds',
)
DIFFERENT_LATENTS = Fix(
    "same_noise_every_rank",
    'pass generator=torch.Generator("cpu").manual_seed(SEED) with the same SEED on every rank: tensor-parallel '
    "ranks must start from identical latents",
)
_ORDER = ("size", "batch", "num_images_per_prompt", "cfg", "prompt_length")


def _key(params: dict[str, Any]) -> dict[str, Any]:
    """The call's shape-relevant parameters (``None`` where unknown)."""
    size = (params.get("height"), params.get("width"))
    return {
        "size": None if None in size else size,
        "batch": params.get("batch"),
        "num_images_per_prompt": params.get("num_images_per_prompt"),
        "cfg": params.get("cfg"),
        "prompt_length": params.get("prompt_length"),
    }


def _differences(this: dict[str, Any], other: dict[str, Any]) -> list[str]:
    a, b = _key(this), _key(other)
    return [name for name in _ORDER if a[name] is not None and b[name] is not None and a[name] != b[name]]


def _show(name: str, params: dict[str, Any]) -> str:
    if name == "size":
        return f"{params['height']}x{params['width']}"
    if name == "cfg":
        return "on" if params["cfg"] else "off"
    return str(params[name])


def _causes(call: dict[str, Any], earlier: list[dict[str, Any]]) -> tuple[int | None, list[dict[str, Any]]]:
    """The earlier call this one is compared with, and the changed parameters that explain its new graphs."""
    if not earlier:
        return None, [{"param": "first_call", "before": None, "after": None, "why": FIRST_CALL, "fix": None}]
    closest = min(reversed(earlier), key=lambda other: len(_differences(call["params"], other["params"])))
    changed = _differences(call["params"], closest["params"])
    if not changed:
        why = UNEXPLAINED.format(other=closest["index"])
        return closest["index"], [{"param": "unexplained", "before": None, "after": None, "why": why, "fix": None}]
    causes = []
    for name in changed:
        why, fix = CAUSES[name]
        causes.append(
            {
                "param": name,
                "before": _show(name, closest["params"]),
                "after": _show(name, call["params"]),
                "why": why,
                "fix": {"id": fix.id, "message": fix.message},
            }
        )
    return closest["index"], causes


def _counts(events: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    chosen = [e for e in events if e["kind"] == kind]
    later = Counter(e["step"] for e in chosen if e["phase"] == "step" and e["step"] != 1)
    return {
        "total": len(chosen),
        "before_denoising": sum(1 for e in chosen if e["phase"] == "before"),
        "step_1": sum(1 for e in chosen if e["phase"] == "step" and e["step"] == 1),
        "later_steps": [{"step": step, "count": count} for step, count in sorted(later.items())],
        "after_denoising": sum(1 for e in chosen if e["phase"] == "after"),
    }


def _notes(call: dict[str, Any]) -> list[dict[str, Any]]:
    """What to change about the call beyond recompiles: an eager decode, an unrolled decode, text encoders."""
    notes = []
    vae = call.get("vae")
    if vae and vae["decode_ran"] and str(vae.get("device") or "").startswith("neuron"):
        if not vae["decode_compiled"] and (vae["module_compiled"] or _compiled_denoiser(call)):
            notes.append(_note("vae.decode runs eagerly (op by op) while the denoiser is compiled", DECODE_EAGER))
        if vae["decode_compiled"] and (vae["tiling"] or vae["slicing"]):
            mode = "tiling" if vae["tiling"] else "slicing"
            ops = f"{vae['decode_ops']} ops" if vae["decode_ops"] is not None else "its op count"
            notes.append(_note(f"vae.decode is compiled with {mode} on: one unrolled graph of {ops}", DECODE_UNROLLED))
    on_device = [
        t["name"] for t in call.get("text_encoders", ()) if str(t["device"]).startswith("neuron") and t["calls"]
    ]
    new_shapes = any(e["kind"] == "eager" and e["phase"] == "before" for e in call["events"])
    if on_device and new_shapes:  # only where they cost a compilation
        notes.append(_note(f"{', '.join(on_device)} on the NeuronCore", TEXT_ENCODER_ON_DEVICE))
    return notes


def _compiled_denoiser(call: dict[str, Any]) -> bool:
    return any(e["kind"] == "graph" and e["phase"] == "step" for e in call["events"])


def _note(what: str, fix: Fix) -> dict[str, Any]:
    return {"what": what, "fix": {"id": fix.id, "message": fix.message}}


def calls(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The report's ``pipeline_calls`` for one process record (empty where no pipeline ran)."""
    raw = record.get("pipelines", {}).get("calls", [])
    out: list[dict[str, Any]] = []
    for index, call in enumerate(raw):
        graphs, eager = _counts(call["events"], "graph"), _counts(call["events"], "eager")
        compared: int | None = None
        causes: list[dict[str, Any]] = []
        if graphs["total"] or eager["total"]:
            earlier = [c for c in raw[:index] if c["instance"] == call["instance"] and not c["failed"]]
            compared, causes = _causes(call, earlier)
        later = [e["what"] for e in call["events"] if e["phase"] == "step" and e["step"] != 1]  # graphs, eager
        out.append(
            {
                "index": call["index"],
                "pipeline": call["pipeline"],
                "user": call["user"],
                "failed": call["failed"],
                "params": call["params"],
                "steps_run": call["steps_run"],
                "new_graphs": graphs,
                "new_eager_shapes": eager,
                "graphs": [
                    {k: e[k] for k in ("what", "ops", "phase", "step")} for e in call["events"] if e["kind"] == "graph"
                ],
                "compared_with": compared,
                "causes": causes,
                "later_step_compiles": later,
                "later_step_fix": {"id": LATER_STEP.id, "message": LATER_STEP.message} if later else None,
                "vae": call["vae"],
                "text_encoders": call["text_encoders"],
                "latents": call["latents"],
                "notes": _notes(call),
            }
        )
    return out


def latents_across_ranks(ranks: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Whether every rank drew the same initial latents in each pipeline call (None for one rank)."""
    drawn = {r["rank"]: [c["latents"] for c in r.get("pipeline_calls", ())] for r in ranks}
    if len(drawn) < 2 or not any(drawn.values()):
        return None
    longest = max(len(v) for v in drawn.values())
    differ = [index + 1 for index in range(longest) if len({_at(v, index) for v in drawn.values()}) > 1]
    fix = {"id": DIFFERENT_LATENTS.id, "message": DIFFERENT_LATENTS.message} if differ else None
    return {"ranks": sorted(drawn), "calls": longest, "identical": not differ, "differ_in_calls": differ, "fix": fix}


def _at(values: list[str | None], index: int) -> str | None:
    return values[index] if index < len(values) else None


# -- text -------------------------------------------------------------------------------------------
def params_text(params: dict[str, Any]) -> str:
    parts = []
    if params.get("height") is not None:
        parts.append(f"{params['height']}x{params['width']}" + (" (default size)" if params["default_size"] else ""))
    parts.append(
        f"batch {params['batch'] if params['batch'] is not None else '?'} x {params['num_images_per_prompt']} image(s)"
    )
    if params.get("cfg") is not None:
        scale = params["true_cfg_scale"] if params.get("true_cfg_scale") is not None else params.get("guidance_scale")
        parts.append(f"CFG {'on' if params['cfg'] else 'off'}" + (f" (scale {scale})" if scale is not None else ""))
    if params.get("steps") is not None:
        parts.append(f"{params['steps']} steps")
    if params.get("prompt_length") is not None:
        parts.append(f"prompt length {params['prompt_length']}")
    return ", ".join(parts)


def _phases(counts: dict[str, Any], noun: str) -> str:
    parts = []
    if counts["before_denoising"]:
        parts.append(f"{counts['before_denoising']} before denoising")
    if counts["step_1"]:
        parts.append(f"{counts['step_1']} at step 1")
    parts.extend(f"{later['count']} at step {later['step']}" for later in counts["later_steps"])
    if counts["after_denoising"]:
        parts.append(f"{counts['after_denoising']} after the loop")
    return f"{counts['total']} {noun} ({', '.join(parts)})"


def _vae_text(vae: dict[str, Any] | None) -> str | None:
    if not vae or not vae["decode_ran"]:
        return None
    state = "compiled" if vae["decode_compiled"] else "eager"
    if vae["decode_compiled"] and vae["decode_ops"] is not None:
        state += f" ({vae['decode_ops']} ops)"
    extras = [mode for mode in ("tiling", "slicing") if vae[mode]]
    return f"vae.decode {state}" + (f" ({', '.join(extras)} on)" if extras else "") + f" on {vae['device']}"


def render_lines(pipeline_calls: list[dict[str, Any]]) -> list[str]:
    """The text report's lines for one rank's pipeline calls."""
    if not pipeline_calls:
        return []
    lines = ["  diffusers pipeline calls (what each call compiled, by denoising step):"]
    placed: list[str] | None = None
    advised: set[str] = set()
    for call in pipeline_calls:
        where = f" at {call['user']}" if call["user"] else ""
        failed = " FAILED" if call["failed"] else ""
        lines.append(f"    #{call['index']} {call['pipeline']}{where}{failed}: {params_text(call['params'])}")
        graphs, eager = call["new_graphs"], call["new_eager_shapes"]
        if not graphs["total"] and not eager["total"]:
            lines.append("      nothing new compiled: every graph and shape was compiled by an earlier call")
        else:
            new = [
                _phases(c, noun) for c, noun in ((graphs, "new graph(s)"), (eager, "new eager shape(s)")) if c["total"]
            ]
            lines.append(f"      {'; '.join(new)}; after step 1: {len(call['later_step_compiles'])}")
            versus = f" (vs #{call['compared_with']})" if call["compared_with"] else ""
            for cause in call["causes"]:
                if cause["param"] in CAUSES:
                    lines.append(
                        f"      cause{versus}: {cause['param']} {cause['before']} -> {cause['after']}: {cause['why']}"
                    )
                    lines.append(f"        fix: {cause['fix']['message']}")
                else:
                    lines.append(f"      cause: {cause['why']}")
        if call["later_step_compiles"]:
            lines.append(
                f"      BUG: {len(call['later_step_compiles'])} graph(s) compiled after step 1 "
                f"({', '.join(sorted(set(call['later_step_compiles'])))})"
            )
            lines.append(f"        fix: {call['later_step_fix']['message']}")
        placement = [text for text in [_vae_text(call["vae"])] if text]
        placement += [
            f"{t['name']} on {t['device']}" + ("" if t["calls"] else " (not run: prompt_embeds given)")
            for t in call["text_encoders"]
        ]
        if placement and placement != placed:  # said again only when it changes
            lines.append(f"      {'; '.join(placement)}")
        placed = placement
        for note in call["notes"]:
            lines.append(f"      NOTE: {note['what']}")
            if note["fix"]["id"] not in advised:
                lines.append(f"        fix: {note['fix']['message']}")
            advised.add(note["fix"]["id"])
    return lines


def render_latents(check: dict[str, Any] | None) -> list[str]:
    if check is None:
        return []
    ranks = ", ".join(map(str, check["ranks"]))
    if check["identical"]:
        return [f"initial latents: identical on ranks {ranks} in all {check['calls']} pipeline call(s)"]
    calls_text = ", ".join(f"#{i}" for i in check["differ_in_calls"])
    return [
        f"initial latents DIFFER between ranks {ranks} in pipeline call(s) {calls_text}",
        f"  fix: {check['fix']['message']}",
    ]
