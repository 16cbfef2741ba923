"""Render the rule registry as Markdown: `docs/rules.md` and `--explain`."""

from __future__ import annotations

from migrate.registry import Rule
from migrate.rule_families import all_rules

FAMILIES = {
    "NM1": "Device placement and the `torch.cuda` API",
    "NM2": "Precision, attention kernels, quantization",
    "NM3": "Generation and static shapes",
    "NM4": "Distributed",
    "NM5": "Optimum Neuron",
    "NM6": "PyTorch/XLA (torch_xla)",
    "NM7": "Version drift (transformers 5, TRL 1.x)",
    "NM8": "Config and launch files: accelerate/recipe YAML, shell launchers, notebook magics",
    "NM9": "Cannot migrate: TODO comments",
}


def safety_text(rule: Rule) -> str:
    """`safe` or `unsafe: <how it changes behaviour>`, as `--explain` and the reports show it."""
    return f"unsafe: {rule.safety_reason}" if rule.safety == "unsafe" else "safe"


def explain(rule: Rule) -> str:
    """One rule as Markdown."""
    return (
        f"## {rule.id} `{rule.name}`\n\n{rule.summary}\n\n{rule.rationale}\n\n"
        f"Fix safety: {safety_text(rule)}.\n\n"
        f"Before:\n\n```{rule.language}\n{rule.before}```\n\nAfter:\n\n```{rule.language}\n{rule.after}```\n"
    )


def rules_markdown() -> str:
    """The whole page; `tests/migrate/test_docs.py` checks docs/rules.md equals this."""
    out = [
        "# neuron-migrate rules\n\n",
        "Generated from the rule registry by `neuron-migrate --rules-doc > docs/rules.md`; "
        "do not edit by hand. `neuron-migrate --explain NM101` prints one rule.\n\n",
        "Select or ignore rules by id or prefix: `--select NM1,NM2 --ignore NM105`. "
        "`# neuron-migrate: skip` on a line (or the line above a statement) leaves that "
        "statement alone; `# neuron-migrate: skip-file` anywhere leaves the file alone. On a "
        "compound statement's header line (`if`, `with`, `def`) it skips the whole block. "
        "`# neuron-migrate: skip[NM202]` (or several ids and prefixes, `skip[NM305,NM2]`) switches "
        "off only those rules for that statement, so the other rules still rewrite it; config and "
        "launcher lines take both forms too.\n\n",
        "Fix safety, as in ruff: a *safe* rule keeps what the script does (a device or API renamed to "
        "its Neuron equivalent, a TODO comment); an *unsafe* one changes behaviour a reviewer should "
        "check (numerics, the data a run sees, memory, shapes), and says how. `--explain`, the JSON "
        "and SARIF reports show it for every rule.\n\n",
        "Names are resolved through the file's imports (`import torch as T`, `from torch import "
        "cuda`); rebinding an imported name by assignment is not tracked. `import neuroncompat` "
        "is added to migrated entry scripts: files with a module-level `if __name__ == "
        '"__main__":` or module-level code that calls `.train(`, `.generate(`, `pipeline(`, '
        "`.from_pretrained(`, `.backward(`, `.fit(` or runs a top-level loop. An entry script that "
        "imports torch, transformers, trl, accelerate, peft or diffusers gets it even when no rule "
        "rewrites anything: under `accelerate launch`/torchrun every worker runs the script, and "
        "without the import the workers start without the shim (`--no-shim` turns this off). "
        "The line goes where isort and ruff's `I001` sort it among the script's third-party imports, "
        "as `import neuroncompat  # noqa: F401  (...)`: the name is never used, and without the "
        "comment `ruff check --fix` (pyflakes' F401) deletes it; `--check` accepts it wherever a "
        "formatter moves it at module level. "
        "`DistributedDataParallel(model, device_ids=[r])` is left as written: with ids, DDP moves "
        "each CPU input batch to the model's NeuronCore.\n\n",
    ]
    rules = all_rules()
    out.append("| id | name | fix safety | summary |\n|---|---|---|---|\n")
    for rule in rules:
        summary = rule.summary.replace("|", "\\|")
        out.append(f"| [{rule.id}](#{rule.id.lower()}-{rule.name}) | `{rule.name}` | {rule.safety} | {summary} |\n")
    current = None
    for rule in rules:
        if rule.family != current:
            current = rule.family
            out.append(f"\n# {current}xx: {FAMILIES[current]}\n")
        out.append("\n" + explain(rule))
    return "".join(out)
