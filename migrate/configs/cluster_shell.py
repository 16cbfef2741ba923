"""NM819-NM827 in shell scripts: SLURM headers, cluster launch lines, NCCL and Optimum-era environment.

`shell_rules` calls these next to the local-launcher rules. A SLURM batch script is recognised
by its `#SBATCH` lines (sbatch reads them whatever the file is called); the `#SBATCH` lines are
comments to the shell, so they are read here line by line, not from `shell_syntax.commands`.
Records and texts: `migrate.configs.cluster_catalog`.
"""

from __future__ import annotations

import re

from migrate.configs.cluster_catalog import CLI_ADVICE, NEFF_CACHE_ENV, TODO_TEXT
from migrate.configs.edits import Changes
from migrate.configs.shell_syntax import Command, Word, is_assignment

_SBATCH = re.compile(r"^#SBATCH[ \t]+(\S+)(?:[ \t]+(\S+))?", re.M)
_GPU_REQUEST = re.compile(r"--(?:gres=(?:\S*,)?gpu\b|gpus(?:-per-(?:node|task|socket))?=)|-G")
_GPU_WORDS = re.compile(r"gpu|a100|h100|h200|v100|a10g?\b|l4\b|l40|t4\b|rtx|tesla|nvidia|cuda", re.I)
_GPU_ONLY_OPTIONS = ("--gpu-bind", "--gpu-freq", "--mem-per-gpu", "--cpus-per-gpu", "--ntasks-per-gpu")
_PLACEMENT = ("--constraint", "-C", "--partition", "-p", "--qos", "-q", "--account", "-A")
# srun options whose value is the next word when written without `=`
_SRUN_VALUED = frozenset(
    {
        "-N",
        "-n",
        "-c",
        "-w",
        "-p",
        "-t",
        "-J",
        "-o",
        "-e",
        "-A",
        "-G",
        "--nodes",
        "--ntasks",
        "--ntasks-per-node",
        "--cpus-per-task",
        "--nodelist",
        "--partition",
        "--time",
        "--job-name",
        "--output",
        "--error",
        "--account",
        "--gres",
        "--gpus",
        "--gpus-per-node",
        "--container-image",
        "--container-mounts",
        "--mpi",
        "--export",
        "--kill-on-bad-exit",
        "--distribution",
        "-m",
    }
)
_NPROC = ("--nproc_per_node", "--nproc-per-node")
_CACHE_FLAGS = ("--cache_dir", "--cache-dir")
_DECLARE = frozenset({"export", "declare", "typeset", "local", "readonly"})
_COMPILE_PASS_ENV = ("NEURON_PARALLEL_COMPILE", "NEURON_EXTRACT_GRAPHS_ONLY")
_BF16_ENV = ("XLA_USE_BF16", "XLA_DOWNCAST_BF16")
_NCCL_LINE = re.compile(r"[ \t]*(?:export[ \t]+)?(NCCL_\w+)=[^\n]*(?:\n|$)")
_CUDA_MODULE = re.compile(r"(?:cuda|cudnn|nccl|nvhpc)\b", re.I)


def is_batch_script(text: str) -> bool:
    """Whether `text` is a SLURM batch script: it has `#SBATCH` directive lines."""
    return _SBATCH.search(text) is not None


def sbatch_headers(changes: Changes) -> None:
    """NM819 GPU requests disabled; NM820 GPU-specific placement lines get a TODO.

    sbatch stops reading directives at the first command, but a directive after it is still
    GPU-specific to a reader, so every `#SBATCH` line is looked at.
    """
    for match in _SBATCH.finditer(changes.text):
        option, separate = match.group(1), match.group(2)
        if _GPU_REQUEST.match(option):
            if changes.enabled("NM819"):
                changes.replace("NM819", match.start(), match.start(), "#")
                changes.todo("NM819", match.start(), TODO_TEXT["NM819"])
            continue
        name, eq, value = option.partition("=")
        value = value if eq else ((separate or "") if name in _PLACEMENT else "")
        if name in _GPU_ONLY_OPTIONS or (name in _PLACEMENT and _GPU_WORDS.search(value)):
            shown = option if eq or name not in _PLACEMENT else f"{option} {value}"
            changes.todo("NM820", match.start(), TODO_TEXT["NM820"].format(line=shown))


def inner_program(command: Command, program: int) -> int | None:
    """The index of the program `srun [options] PROGRAM ...` runs; None when there is none."""
    i = program + 1
    words = command.words
    while i < len(words):
        literal = words[i].literal
        if literal is None or not literal.startswith("-"):
            return i
        i += 2 if literal in _SRUN_VALUED else 1
    return None


def processes_per_node(changes: Changes, anchor: int, args: tuple[Word, ...]) -> None:
    """NM821: `--nproc_per_node N` on a cluster launch line counted GPUs."""
    for i, word in enumerate(args):
        literal = word.literal if word.literal is not None else word.raw
        name, eq, value = literal.partition("=")
        if name not in _NPROC:
            continue
        if not eq:
            value = args[i + 1].raw if i + 1 < len(args) else ""
        if value != "1":
            changes.todo("NM821", anchor, TODO_TEXT["NM821"].format(value=value))


def assignments(command: Command) -> list[Word]:
    """`NAME=value` words of the command: prefixes, and the arguments of `export`/`declare`."""
    words = command.words
    program = command.program()
    found = [w for w in words[: program if program is not None else len(words)] if is_assignment(w.raw)]
    if program is not None and words[program].raw in _DECLARE:
        found += [w for w in words[program + 1 :] if is_assignment(w.raw)]
    return found


def environment(changes: Changes, command: Command, anchor: int) -> None:
    """NM822-NM826: NCCL settings, NEURON_CC_FLAGS, Optimum's cache and compile-pass variables, XLA bf16."""
    nccl = []
    for word in assignments(command):
        name, _, value = word.raw.partition("=")
        if name.startswith("NCCL_"):
            nccl.append(name)
        elif name == "NEURON_CC_FLAGS":
            _cc_flags(changes, word, value, anchor)
        elif name == "NEURON_COMPILE_CACHE_URL":
            _cache_url(changes, word, value, anchor)
        elif name == "CUSTOM_CACHE_REPO":
            changes.todo("NM824", anchor, TODO_TEXT["NM824"].format(name=name, value=value, what="a Hub repository"))
        elif name in _COMPILE_PASS_ENV:
            changes.todo("NM825", anchor, TODO_TEXT["NM825"].format(name=name))
        elif name in _BF16_ENV:
            changes.todo("NM826", anchor, TODO_TEXT["NM826"].format(name=name))
    if nccl and not _NCCL_LINE.match(changes.text, _previous_line(changes, anchor)):
        position = changes.line_end(command.end) + 1
        while (line := _NCCL_LINE.match(changes.text, position)) and line.end() > position:
            nccl.append(line.group(1))  # a block of NCCL lines gets one TODO, naming them all
            position = line.end()
        changes.todo("NM822", anchor, TODO_TEXT["NM822"].format(names=", ".join(dict.fromkeys(nccl))))
    for word in command.words:
        if "NEURON_EXTRACT_GRAPHS_ONLY" in word.raw and not is_assignment(word.raw):
            changes.todo("NM825", anchor, TODO_TEXT["NM825"].format(name="NEURON_EXTRACT_GRAPHS_ONLY"))
            break


def _previous_line(changes: Changes, start: int) -> int:
    """The start of the line before the one starting at `start` (0 for the first line)."""
    return changes.line_start(start - 1) if start > 0 else len(changes.text)


def module_load(changes: Changes, literals: list[str | None], anchor: int) -> None:
    """NM820: `module load cuda/12.1` (environment modules) on a cluster node."""
    if literals[:1] in (["load"], ["add"]):
        cuda = [m for m in literals[1:] if m and _CUDA_MODULE.match(m)]
        if cuda:
            changes.todo(
                "NM820",
                anchor,
                TODO_TEXT["NM820"]
                .replace(
                    "name the partition or constraint of your Trainium (trn2) nodes instead",
                    "load the Neuron SDK's environment instead, or delete it",
                )
                .format(line="module load " + " ".join(cuda)),
            )


def optimum_cli(changes: Changes, literals: list[str | None], anchor: int) -> None:
    """NM827: `optimum-cli neuron consolidate|cache ...`."""
    if literals[:1] == ["neuron"] and len(literals) > 1 and literals[1] in CLI_ADVICE:
        command = literals[1]
        changes.todo("NM827", anchor, TODO_TEXT["NM827"].format(command=command, advice=CLI_ADVICE[command]))


def _cc_flags(changes: Changes, word: Word, value: str, anchor: int) -> None:
    """NM823: note each flag; `--cache_dir` leaves the value for TORCH_NEURONX_NEFF_CACHE_DIR, the retry flag goes."""
    value_word = Word(word.start + len("NEURON_CC_FLAGS="), word.end, value)
    literal = value_word.literal
    if literal is None:
        changes.todo("NM823", anchor, TODO_TEXT["NM823"])
        return
    tokens = literal.split()
    kept: list[str] = []
    cache: str | None = None
    i = 0
    while i < len(tokens):
        flag, eq, flag_value = tokens[i].partition("=")
        if flag in _CACHE_FLAGS:
            cache = flag_value if eq else (tokens[i + 1] if i + 1 < len(tokens) else "")
            i += 1 if eq else 2
            changes.note(
                "NM823", word.start, f"{flag} {cache}: the NEFF cache directory is now {NEFF_CACHE_ENV}", anchor=anchor
            )
            continue
        if flag == "--retry_failed_compilation":
            changes.note(
                "NM823",
                word.start,
                f"removed {flag}: an option of torch_xla's compile cache, which native TorchNeuron does not have",
                anchor=anchor,
            )
        else:
            kept.append(tokens[i])
            if tokens[i].startswith("-"):
                changes.note(
                    "NM823",
                    word.start,
                    f"{tokens[i]}: still passed to neuronx-cc; check that it applies to TorchNeuron's graphs",
                    anchor=anchor,
                )
        i += 1
    if len(kept) == len(tokens) or not changes.enabled("NM823"):
        return
    moved = f" {NEFF_CACHE_ENV}={cache}" if cache else ""
    if kept:
        quote = value[:1] if value[:1] in "'\"" else '"'
        changes.replace(
            "NM823", value_word.start, value_word.end, f"{quote}{' '.join(kept)}{quote}{moved}", anchor=anchor
        )
    else:
        changes.replace("NM823", word.start, word.end, moved.strip() or 'NEURON_CC_FLAGS=""', anchor=anchor)


def _cache_url(changes: Changes, word: Word, value: str, anchor: int) -> None:
    """NM824: a local cache directory keeps its meaning under TorchNeuron's name; S3 and run-time values get a TODO."""
    literal = Word(word.start, word.end, value).literal
    if literal and "://" not in literal:
        if changes.enabled("NM824"):
            changes.replace(
                "NM824", word.start, word.start + len("NEURON_COMPILE_CACHE_URL"), NEFF_CACHE_ENV, anchor=anchor
            )
    else:
        what = "an S3 bucket" if literal and literal.startswith("s3://") else "a remote cache"
        message = TODO_TEXT["NM824"].format(name="NEURON_COMPILE_CACHE_URL", value=value, what=what)
        changes.todo("NM824", anchor, message)
