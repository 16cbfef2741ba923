"""Whole-file facts that decide between context-dependent rewrites (context rules 4-6).

They are read from the source text with a few regexes before parsing, so the single
rewriting traversal already knows them when it reaches the first `from_pretrained`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Context rule 4: a script is multi-process when it reads its rank or sets up a process group.
_MULTI_PROCESS = re.compile(
    r"LOCAL_RANK|local_rank|init_process_group|DistributedDataParallel|\bDDP\(|"
    r"FullyShardedDataParallel|fully_shard|WORLD_SIZE|\bAccelerator\(|PartialState|"
    r"process_index|torchrun|accelerate launch"
)
# Context rule 5/6: Trainer-family scripts get device placement from the Trainer.
_TRAINER = re.compile(r"\b\w*Trainer\(")
# The `if __name__ == "__main__":` guard, in either quote style.
_MAIN_GUARD = re.compile(r"^if\s+__name__\s*==\s*['\"]__main__['\"]\s*:", re.M)
# The calls that run training or inference, and the command-line parse of a script run as a program (a
# module never parses `sys.argv` when imported: pytorch/examples' `word_language_model` parses at module level
# and trains from a top-level `try:` calling its own `train()`).
_RUN_CALL = (
    r"(?:\.train\(|\.generate\(|\bpipeline\(|\.from_pretrained\(|\.backward\(|\.fit\("
    r"|\.parse_args\(|\.parse_known_args\(|\.parse_args_into_dataclasses\(|\.parse_args_and_config\("
    # command-line launchers: alpaca-lora's `fire.Fire(train)`, tyro, typer, jsonargparse
    r"|\bFire\(|\btyro\.cli\(|\btyper\.run\(|\bCLI\()"
)
# A column-0 call of the file's own entry function with no main guard (`main()` as a script's last line): at the start
# of the file, or after a line break. Every file the prefilter passes over is asked whether it wants the shim (issue 39),
# and a pattern that starts with the literal line break is searched for at C speed, where one anchored with `^` under
# re.M is tried at every position of the file (a tenth of the time on transformers' model files).
_OWN_ENTRY_CALL = re.compile(r"(main|train|run|cli|finetune|inference|evaluate|generate)\([^\n]*$", re.M)
_OWN_ENTRY_CALL_AFTER_BREAK = re.compile(r"\n" + _OWN_ENTRY_CALL.pattern, re.M)
# Top-level code that runs training or inference when the file is executed: a statement that
# starts in column 0 (so not inside a def/class) and calls one of these.
# (At the start of the file, or after a line break: searched for from the literal, as `_OWN_ENTRY_CALL`.)
_TOP_LEVEL_RUN = re.compile(r"(?!def |class |async |@|import |from |#)(?=\S)[^\n]*" + _RUN_CALL)
_TOP_LEVEL_RUN_AFTER_BREAK = re.compile(r"\n" + _TOP_LEVEL_RUN.pattern)
# A top-level compound statement whose block may hold such a call (nanoGPT's `sample.py` runs
# `with torch.no_grad():` / `with ctx:` / `for k in ...:` / `y = model.generate(...)`), and the
# clauses that continue it in column 0.
_BLOCK_HEADER = re.compile(r"(?:async[ \t]+)?(?:for|while|with|if|try)\b")
# such a header after any line break `str.splitlines` splits at: without one (most library modules) no block runs
_BLOCK_HEADER_AFTER_BREAK = re.compile(r"[\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]" + _BLOCK_HEADER.pattern)
_BLOCK_CLAUSE = re.compile(r"(?:elif|else|except|finally)\b")
_NESTED_DEFINITION = re.compile(r"(?:async[ \t]+)?(?:def|class)\b|@")
_RUN = re.compile(_RUN_CALL)


def _block_runs(text: str) -> bool:
    """A top-level `for`/`while`/`with`/`async with`/`if`/`try` block that calls a run call.

    The call may sit at any depth of the block, but not inside a `def` or `class` nested in it
    (defining a function runs nothing). A module-level `with open(...) as f: cfg = json.load(f)`
    calls nothing that runs, so a library module holding one stays a library module.
    """
    if not (_BLOCK_HEADER.match(text) or _BLOCK_HEADER_AFTER_BREAK.search(text)):
        return False  # no line starts a top-level block: the walk below would find none
    in_block = False
    definition_indent = -1  # the indentation of a def/class inside the block, whose body is skipped
    for line in text.splitlines():
        stripped = line.lstrip()
        if not stripped or stripped.startswith("#"):
            continue
        indent = len(line) - len(stripped)
        if indent == 0 and stripped[0] in ")]}":
            continue  # the closing line of a header split over lines, `) as f:`
        if indent == 0:
            definition_indent = -1
            if _BLOCK_HEADER.match(line):
                in_block = True
            elif not (in_block and _BLOCK_CLAUSE.match(line)):
                in_block = False
                continue
            if _RUN.search(line):  # a one-line block, `async with x: model.generate(y)`
                return True
            continue
        if not in_block or (definition_indent >= 0 and indent > definition_indent):
            continue
        definition_indent = indent if _NESTED_DEFINITION.match(stripped) else -1
        if definition_indent < 0 and _RUN.search(stripped):
            return True
    return False


# The libraries whose scripts the shim patches: an entry script importing one gets the shim.
_SHIMMED_IMPORT = re.compile(
    r"^[ \t]*(?:import|from)[ \t]+(?:torch|transformers|trl|accelerate|peft|diffusers)\b", re.M
)


def is_entry_script(text: str) -> bool:
    """A file that is run, not imported (see `FileFacts.entry_script`)."""
    return bool(
        ("__main__" in text and _MAIN_GUARD.search(text))  # the substring test first: C speed, as for the entry call
        or _TOP_LEVEL_RUN.match(text)
        or _TOP_LEVEL_RUN_AFTER_BREAK.search(text)
        or _block_runs(text)
        or _own_entry(text)
    )


def _own_entry(text: str) -> bool:
    """`main()` at column 0 of a file that defines `def main(`: the script runs it when executed."""
    first = _OWN_ENTRY_CALL.match(text)
    calls = ([first[1]] if first else []) + [call[1] for call in _OWN_ENTRY_CALL_AFTER_BREAK.finditer(text)]
    return any(re.search(rf"^(?:async[ \t]+)?def[ \t]+{name}\(", text, re.M) for name in calls)


def wants_shim(text: str) -> bool:
    """An entry script that imports a library the shim patches.

    Such a script needs `import neuroncompat` even when no rule rewrites it: under
    `accelerate launch`/torchrun each worker runs the script itself, and without the import
    the workers start without the shim (no Neuron device for accelerate, no patches).
    """
    return bool(_SHIMMED_IMPORT.search(text)) and is_entry_script(text)


@dataclass(frozen=True)
class FileFacts:
    """What the rules need to know about the whole file.

    `entry_script` decides whether `import neuroncompat` is added: a file that is run, not
    imported. It is true when the file has a module-level `if __name__ == "__main__":` guard,
    or module-level code that calls `.train(`, `.generate(`, `pipeline(`, `.from_pretrained(`,
    `.backward(`, `.fit(`, parses its command line (`parser.parse_args()`, `parse_known_args`,
    HfArgumentParser's and TrlParser's) or hands it to a CLI launcher (`fire.Fire`, `tyro.cli`, `typer.run`,
    jsonargparse's `CLI`): a column-0 statement, or a call anywhere in the block of a
    module-level `for`/`while`/`with`/`if`/`try` (nanoGPT-style training loops, `sample.py`'s
    `with torch.no_grad():` generation, notebook exports); or a column-0 call of its own `main`/`train`/...
    function (a script that ends in `main()`). Library modules that only define
    functions and classes, or run nothing at module level (`with open(...)` reading a config),
    never get the shim.
    """

    multi_process: bool
    trainer: bool
    entry_script: bool
    shim_wanted: bool = False  # an entry script importing torch/transformers/trl/accelerate/...

    @classmethod
    def from_text(cls, text: str) -> FileFacts:
        """Scan the source once per fact; cheap next to parsing."""
        trainer = bool(_TRAINER.search(text))
        return cls(
            # Trainer scripts are usually launched with `accelerate launch`/torchrun; the
            # per-rank device_map form is also right for one process (LOCAL_RANK unset -> 0).
            multi_process=bool(_MULTI_PROCESS.search(text)) or trainer,
            trainer=trainer,
            entry_script=is_entry_script(text),
            shim_wanted=wants_shim(text),
        )
