"""NM8xx rules for shell launchers (and, through `migrate.notebook`, for `!` magics).

Each rule reads the simple commands of the script (`shell_syntax.commands`) and splices its
edit into the original text. What a script computes at run time (a `$GPUS` value, a command
substitution) is never guessed at: it gets a TODO instead. The output is checked with
`bash -n` when bash is installed.

The training flags a migrated script no longer accepts (NM816 Optimum's, NM817 transformers 5 /
TRL 1.x drift) come from the tables the Python rules use (`optimum_training`, `drift`), so a
field dropped from `NeuronTrainingArguments(...)` and its `--flag` on the launch line go together.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass

from migrate.configs import cluster_shell, cores
from migrate.configs.catalog import TODO_TEXT
from migrate.configs.edits import Changes
from migrate.configs.shell_syntax import Command, Word, commands, is_assignment
from migrate.configs.textfile import migrate_text
from migrate.options import Options
from migrate.results import FileResult
from migrate.rules.drift import FIELDS as DRIFT
from migrate.rules.optimum_training import ARGUMENT_FIELDS, DROPPED, lost_capability
from migrate.rules.todo_catalogue import MESSAGES as TODO_MESSAGES

CUDA_ENV, CORES_ENV = "CUDA_VISIBLE_DEVICES", "NEURON_RT_VISIBLE_CORES"
_EXPANSION = re.compile(r"\$\{?CUDA_VISIBLE_DEVICES\b")
_DECLARE = frozenset({"export", "declare", "typeset", "local", "readonly"})
# commands whose `--fp16`/`--mixed_precision fp16` arguments configure a training run
_LAUNCHERS = frozenset(
    {
        "python",
        "python3",
        "torchrun",
        "accelerate",
        "deepspeed",
        "bash",
        "sh",
        "srun",
        "mpirun",
        "uv",
        "trl",
        "llamafactory-cli",
    }
)
CUDA_ONLY_PACKAGES = frozenset(
    {
        "flash-attn",
        "flash-attn-3",
        "flashinfer-python",
        "bitsandbytes",
        "vllm",
        "xformers",
        "unsloth",
        "unsloth-zoo",
        "liger-kernel",
        "deepspeed",
        "triton",
        "auto-gptq",
        "autoawq",
        "gptqmodel",
        "apex",
        "mamba-ssm",
        "causal-conv1d",
    }
)
_PIP_VALUE_OPTIONS = frozenset(
    {
        "-r",
        "--requirement",
        "-c",
        "--constraint",
        "-e",
        "--editable",
        "-i",
        "--index-url",
        "--extra-index-url",
        "-f",
        "--find-links",
        "-t",
        "--target",
        "--prefix",
        "--root",
        "--platform",
        "--python-version",
        "--implementation",
        "--abi",
        "--upgrade-strategy",
        "--cache-dir",
        "--src",
    }
)
_PACKAGE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
# Launchers whose script arguments NM816/NM817 clean, and TRL's training commands (`trl sft ...`,
# or its scripts run directly) with the config class their TrlParser fills.
_TRAINING_LAUNCHERS = frozenset({"python", "python3", "torchrun", "accelerate", "trl"})
_TRL_CONFIGS = {
    "sft": "SFTConfig",
    "dpo": "DPOConfig",
    "grpo": "GRPOConfig",
    "kto": "KTOConfig",
    "reward": "RewardConfig",
    "rloo": "RLOOConfig",
    "distillation": "DistillationConfig",
}
_TRL_SCRIPT = re.compile(r"(?:^|/)trl/scripts/(\w+)\.py$")
# Flags only a script that parses TrainingArguments (or Optimum's copy) takes. A launch line
# with none of them runs some other CLI, whose own `--logging_dir` (diffusers) or
# `--tensor_parallel_size` (a vLLM script) must stay.
_TRAINING_MARKERS = frozenset(
    {
        "per_device_train_batch_size",
        "per_device_eval_batch_size",
        "do_train",
        "do_eval",
        "do_predict",
        "overwrite_output_dir",
        "evaluation_strategy",
        "eval_strategy",
        "save_strategy",
        "logging_strategy",
        "zero_1",
        "skip_cache_push",
    }
)
_REDIRECTION = re.compile(r"\d*(?:[<>]|&>)")
_NEGATIVE_NUMBER = re.compile(r"-\d+(?:\.\d*)?")
_TRUE, _FALSE = frozenset({"yes", "true", "t", "y", "1"}), frozenset({"no", "false", "f", "n", "0"})


def migrate_shell(data: bytes, path: str, options: Options) -> FileResult:
    """Migrate one shell script."""
    return migrate_text(data, path, "shell", options, shell_rules, _bash_problem)


def _bash_problem(text: str) -> str | None:
    if shutil.which("bash") is None:
        return None
    proc = subprocess.run(["bash", "-n"], input=text.encode("utf-8"), capture_output=True, timeout=30, check=False)
    if proc.returncode == 0:
        return None
    return proc.stderr.decode("utf-8", "replace").strip().splitlines()[0] if proc.stderr.strip() else "bash -n failed"


def shell_rules(changes: Changes, view: str | None = None, cluster: bool | None = None) -> None:
    """Apply every shell rule to `changes.text`.

    `view` is the same text as the shell should read it, character for character (a notebook
    passes its `!` magic lines with the `!` blanked out); edits apply to `changes.text`.
    `cluster` says the launch lines run on cluster nodes (NM821); by default, when the text is a
    SLURM batch script, whose `#SBATCH` lines are migrated too.
    """
    found = commands(view if view is not None else changes.text)
    lnc = 1 if re.search(r"NEURON_LOGICAL_NC_CONFIG=['\"]?1\b", changes.text) else 2
    # a script that pins its cores keeps NM803's one-logical-core-per-GPU count (NM821 is for whole nodes)
    pinned = re.search(r"\b(?:CUDA_VISIBLE_DEVICES|NEURON_RT_VISIBLE_CORES)=", changes.text)
    if cluster is None:
        cluster = cluster_shell.is_batch_script(changes.text)
        if cluster:
            cluster_shell.sbatch_headers(changes)
    for command in found:
        _visible_cores(changes, command, lnc)
        cluster_shell.environment(changes, command, _logical_start(changes, command.start))
        if any("nvidia-smi" in w.raw and ("$(" in w.raw or "`" in w.raw) for w in command.words):
            _todo(changes, "NM815", command, TODO_TEXT["NM815"])
        program = command.program()
        if program is None:
            continue
        name = command.words[program].literal
        if name == "srun":
            inner = cluster_shell.inner_program(command, program)
            if inner is None:
                continue
            program, name = inner, command.words[inner].literal
        compiled = name == "neuron_parallel_compile"
        if compiled and changes.enabled("NM812"):
            _drop_prefix(changes, command, program)
            program += 1
            if program == len(command.words):
                continue
            name = command.words[program].literal
        args = command.words[program + 1 :]
        literals = [w.literal for w in args]
        if name == "deepspeed" or any(a and a.split("=")[0] in ("--deepspeed", "--use_deepspeed") for a in literals):
            _todo(changes, "NM811", command, TODO_TEXT["NM811"])
        if name == "optimum-cli" and literals[:2] == ["export", "neuron"]:
            _todo(changes, "NM813", command, _export_todo(literals))
        if name == "optimum-cli":
            cluster_shell.optimum_cli(changes, literals, _logical_start(changes, command.start))
        if name == "module":
            cluster_shell.module_load(changes, literals, _logical_start(changes, command.start))
        if (
            cluster
            and pinned is None
            and (
                name == "torchrun"
                or literals[:2] in (["-m", "torch.distributed.run"], ["-m", "torch.distributed.launch"])
            )
        ):
            cluster_shell.processes_per_node(changes, _logical_start(changes, command.start), args)
        if name == "accelerate" and literals[:1] == ["launch"]:
            _gpu_ids(changes, command, args)
        if name == "nvidia-smi":
            if args:
                _todo(changes, "NM815", command, TODO_TEXT["NM815"])
            elif changes.enabled("NM815"):
                word = command.words[program]
                changes.replace("NM815", word.start, word.end, "neuron-ls")
        if name in _LAUNCHERS or (name or "").endswith((".py", ".sh")):
            _bf16(changes, args, literals)
            _cuda_kernels(changes, args, literals)
        if name in _TRAINING_LAUNCHERS:
            _training_flags(changes, command, name, program, compiled)
        _pip(changes, command, program, found)


def _visible_cores(changes: Changes, command: Command, lnc: int) -> None:
    """NM803 `CUDA_VISIBLE_DEVICES` -> `NEURON_RT_VISIBLE_CORES` (GPU i -> core i); NM804 sets that cannot work or are unknown."""
    words = command.words
    program = command.program()
    assignments = [w for w in words[: program if program is not None else len(words)] if is_assignment(w.raw)]
    if program is not None and words[program].raw in _DECLARE:
        assignments += [w for w in words[program + 1 :] if is_assignment(w.raw) or w.raw == CUDA_ENV]
    for word in assignments:
        name, _, value = word.raw.partition("=")
        value_word = Word(word.start + len(name) + 1, word.end, value)
        if name == CUDA_ENV and value not in ('""', "''") and (value or "=" not in word.raw):
            if not changes.enabled("NM803"):
                continue
            changes.replace("NM803", word.start, word.start + len(name), CORES_ENV)
            gpus = cores.parse(value_word.literal or "") if value else None
            if gpus is not None:
                inner = 1 if value[:1] in "'\"" else 0
                translated = cores.from_gpus(gpus)
                changes.replace(
                    "NM803", value_word.start + inner, value_word.end - inner, translated, anchor=word.start
                )
                problem = cores.problem(sorted(set(gpus)), lnc)
                if problem:  # the GPUs' set as NeuronCores cannot start: say so, never pick other cores
                    _todo(changes, "NM804", command, f"{CORES_ENV}={translated} (from {CUDA_ENV}={value}) is {problem}")
            elif value:
                _todo(changes, "NM804", command, TODO_TEXT["NM804"].format(value=value))
        elif name == CORES_ENV and value_word.literal:
            found = cores.parse(value_word.literal)
            problem = "not a core list (e.g. 0,1 or 0-3)" if found is None else cores.problem(found, lnc)
            if problem:
                _todo(changes, "NM804", command, f"{CORES_ENV}={value_word.literal} is {problem}")
    if changes.enabled("NM803"):
        for word in words:
            for match in _EXPANSION.finditer(word.raw):
                if not _single_quoted(word.raw, match.start()):
                    start = word.start + match.end() - len(CUDA_ENV)
                    changes.replace("NM803", start, start + len(CUDA_ENV), CORES_ENV)


def _single_quoted(raw: str, index: int) -> bool:
    """Whether `raw[index]` sits inside single quotes (where `$` does not expand)."""
    inside, double = False, False
    for i, c in enumerate(raw[:index]):
        if c == "'" and not double:
            inside = not inside
        elif c == '"' and not inside and (i == 0 or raw[i - 1] != "\\"):
            double = not double
    return inside


def _drop_prefix(changes: Changes, command: Command, program: int) -> None:
    """NM812: `neuron_parallel_compile torchrun ...` -> `torchrun ...`."""
    word = command.words[program]
    end = command.words[program + 1].start if program + 1 < len(command.words) else word.end
    changes.replace("NM812", word.start, end, "")
    changes.note("NM812", word.start, TODO_TEXT["NM812"])


def _gpu_ids(changes: Changes, command: Command, args: tuple[Word, ...]) -> None:
    values = _option_values(args, ("--gpu_ids", "--gpu-ids"))
    processes = _option_values(args, ("--num_processes", "--num-processes"))
    wanted = int(processes[0][1]) if processes and processes[0][1].isdigit() else None
    for _, value in values:
        problem = cores.gpu_ids_problem(value, wanted)
        if problem:
            _todo(changes, "NM804", command, problem)


def _option_values(args: tuple[Word, ...], names: tuple[str, ...]) -> list[tuple[Word, str]]:
    """`(word holding the value, literal value)` for `--name value` and `--name=value`."""
    found = []
    for i, word in enumerate(args):
        literal = word.literal or ""
        option, eq, value = literal.partition("=")
        if option in names:
            if eq:
                found.append((word, value))
            elif i + 1 < len(args) and args[i + 1].literal is not None:
                found.append((args[i + 1], args[i + 1].literal or ""))
    return found


def _bf16(changes: Changes, args: tuple[Word, ...], literals: list[str | None]) -> None:
    """NM810: `--fp16` -> `--bf16` and `--mixed_precision fp16` -> `bf16` on a launch line."""
    if not changes.enabled("NM810") or any(a and a.startswith("--bf16") for a in literals):
        return
    for i, (word, literal) in enumerate(zip(args, literals)):
        if literal is None or not word.raw.startswith("--fp16"):
            continue
        _, eq, value = literal.partition("=")
        following = literals[i + 1] if i + 1 < len(literals) else None
        value = value if eq else (following or "")
        if literal.split("=")[0] == "--fp16" and value.lower() not in ("false", "0"):
            changes.replace("NM810", word.start, word.start + len("--fp16"), "--bf16")
    for word, value in _option_values(args, ("--mixed_precision", "--mixed-precision")):
        if value == "fp16":
            at = word.start + word.raw.rfind("fp16")
            changes.replace("NM810", at, at + len("fp16"), "bf16")


def _cuda_kernels(changes: Changes, args: tuple[Word, ...], literals: list[str | None]) -> None:
    """NM805 on a launch line: `--attn_implementation flash_attention_2` -> `sdpa`, Liger off."""
    if not changes.enabled("NM805"):
        return
    for word, value in _option_values(args, ("--attn_implementation", "--attn-implementation")):
        if value.startswith("flash_attention") and value in word.raw:
            at = word.start + word.raw.rfind(value)
            changes.replace("NM805", at, at + len(value), "sdpa")
    for i, (word, literal) in enumerate(zip(args, literals)):
        option, eq, value = (literal or "").partition("=")
        if not option.startswith("--") or option[2:].replace("-", "_") not in ("use_liger_kernel", "use_liger"):
            continue
        following = literals[i + 1] if not eq and i + 1 < len(literals) else None
        if eq:
            if value.lower() in _TRUE and value in word.raw:
                at = word.start + word.raw.rfind(value)
                changes.replace("NM805", at, at + len(value), "False")
        elif following is not None and following.lower() in _TRUE | _FALSE:
            if following.lower() in _TRUE:
                changes.replace("NM805", args[i + 1].start, args[i + 1].end, "False")
        else:  # a bool flag standing alone
            changes.replace("NM805", word.end, word.end, " False")


@dataclass(frozen=True)
class _Flag:
    """One `--name[=value]` / `--name value` / bool `--name` of a launch line, over `words[first:last + 1]`."""

    name: str  # the field: dashes read as underscores, a `--no_` prefix of a bool taken off
    first: int
    last: int
    value: str | None  # the literal value: "" for a bool standing alone; None when it expands at run time
    raw: str  # the value as written
    negated: bool  # `--no_<bool>`

    def setting(self, is_bool: bool) -> str | None:
        """The value as Python source (`True`, `8`), None when unknown until run time."""
        if not is_bool:
            return self.value
        if self.negated:
            return "False"
        if self.value is None:
            return None
        value = self.value.lower()
        if not value or value in _TRUE:
            return "True"
        return "False" if value in _FALSE else None


def _training_flags(changes: Changes, command: Command, launcher: str, program: int, compiled: bool) -> None:
    """NM816/NM817: flags the training script's `TrainingArguments` now rejects leave its launch line.

    Only lines whose script parses TrainingArguments, as far as the line shows: TRL's training
    commands, a `neuron_parallel_compile` run, or a flag only TrainingArguments has.
    """
    script = _script(launcher, command.words[program + 1 :])
    if script is None:
        _unseen_tensor_parallel(changes, command, program)
    if script is None or not (changes.enabled("NM816") or changes.enabled("NM817")):
        return
    trl, offset = script
    words, first = command.words, program + 1 + offset
    flags = _flags(words, first)
    given = {_option(word) for word in words[first:]}
    if not (trl or compiled or given & _TRAINING_MARKERS):
        return
    owner = _TRL_CONFIGS[trl] if trl else "TrainingArguments"  # the class the script's parser fills
    anchor = _logical_start(changes, command.start)
    for flag in flags:
        if flag.name in ARGUMENT_FIELDS:
            if changes.enabled("NM816"):
                _optimum_flag(changes, command, flag, anchor)
            continue
        removed = DRIFT[flag.name]
        if changes.enabled("NM817") and removed.owned_by(owner) and removed.new not in given:
            _drift_flag(changes, command, flag, anchor)


def _unseen_tensor_parallel(changes: Changes, command: Command, program: int) -> None:
    """NM816: `--tensor_parallel_size N` for a script named at run time (`"$TRAIN_SCRIPT"`): a TODO, the flag stays."""
    words = command.words[program + 1 :]
    named_at_run_time = any(
        word.literal is None and not word.raw.startswith("-") and (i == 0 or not words[i - 1].raw.startswith("-"))
        for i, word in enumerate(words)
    )
    if command.words[program].literal == "trl" or not named_at_run_time:
        return
    for flag in _flags(command.words, program + 1):
        if flag.name == "tensor_parallel_size" and flag.value != "1":
            _todo(changes, "NM816", command, TODO_TEXT["NM816_UNSEEN"].format(n=flag.raw))


def _optimum_flag(changes: Changes, command: Command, flag: _Flag, anchor: int) -> None:
    """NM816: remove one NeuronTrainingArguments flag, noted; a TODO where a capability goes with it."""
    words = command.words
    start, end = words[flag.first - 1].end, words[flag.last].end
    if not changes.untouched(start, end):
        return
    shown = changes.text[words[flag.first].start : end]
    setting = flag.setting(ARGUMENT_FIELDS[flag.name])
    changes.replace("NM816", start, end, "", anchor=anchor)
    if flag.name == "tensor_parallel_size":
        reason = "the degree moves to the script's from_pretrained(distributed_config=DistributedConfig(tp_size=...))"
        if setting != "1":
            _todo(changes, "NM816", command, TODO_TEXT["NM816"].format(n=flag.raw))
    else:
        reason = DROPPED[flag.name]
        lost = lost_capability(flag.name, setting)
        if lost is not None:
            _todo(changes, "NM816", command, f"{shown}: {TODO_MESSAGES[lost]}")
    changes.note("NM816", words[flag.first].start, f"removed {shown}: {reason}", anchor=anchor)


def _drift_flag(changes: Changes, command: Command, flag: _Flag, anchor: int) -> None:
    """NM817: a renamed flag takes its new name; a removed one goes, noted."""
    removed = DRIFT[flag.name]
    words = command.words
    word, end = words[flag.first], words[flag.last].end
    shown = changes.text[word.start : end]
    setting = flag.setting(removed.bool_field)
    if removed.new is None or (removed.on_value is not None and setting == "False"):
        if changes.untouched(words[flag.first - 1].end, end):
            changes.replace("NM817", words[flag.first - 1].end, end, "", anchor=anchor)
            changes.note("NM817", word.start, f"removed {shown}: {removed.why}", anchor=anchor)
    elif removed.on_value is None:
        spelled = word.raw[2 : 2 + len(flag.name)]
        if word.raw.startswith("--") and spelled.replace("-", "_") == flag.name:  # not quoted
            new = removed.new.replace("_", "-") if "-" in spelled else removed.new
            changes.replace("NM817", word.start + 2, word.start + 2 + len(spelled), new, anchor=anchor)
    elif setting == "True":
        if changes.untouched(word.start, end):
            changes.replace("NM817", word.start, end, f"--{removed.new} {removed.on_value}", anchor=anchor)
    else:
        _todo(changes, "NM817", command, f"{shown}: {removed.why}")


def _script(launcher: str, args: tuple[Word, ...]) -> tuple[str | None, int] | None:
    """(the TRL command the line runs or None, the index in `args` of the script's first argument).

    The script is the first `.py` word (`python x.py`, `torchrun ... x.py`, `accelerate launch
    ... x.py`, TRL's own `trl/scripts/sft.py`), or `trl <command>`; None for anything else.
    """
    literals = [w.literal for w in args]
    if not literals or (launcher == "accelerate" and literals[0] != "launch"):
        return None
    if launcher == "trl":
        return (literals[0], 1) if literals[0] in _TRL_CONFIGS else None
    for i, literal in enumerate(literals):
        if literal and literal.endswith(".py"):
            trl = _TRL_SCRIPT.search(literal)
            return (trl.group(1) if trl and trl.group(1) in _TRL_CONFIGS else None), i + 1
    return None


def _option(word: Word) -> str:
    """`--per-device-train-batch-size=8` -> `per_device_train_batch_size`; '' for a word that is no option."""
    text = word.literal if word.literal is not None else word.raw
    name = text.partition("=")[0][2:].replace("-", "_")
    return name if text.startswith("--") and name.isidentifier() else ""


def _flags(words: tuple[Word, ...], first: int) -> list[_Flag]:
    """The Optimum-only and drift flags among `words[first:]`, each with the words its value takes.

    As HfArgumentParser reads them: a bool takes the next word unless it is an option (argparse's
    `nargs="?"`), any other field always takes one; the arguments end at the first redirection.
    """
    found: list[_Flag] = []
    i = first
    while i < len(words) and not _REDIRECTION.match(words[i].raw):
        word, field = words[i], _option(words[i])
        base = field[3:] if field.startswith("no_") else ""
        negated = bool(ARGUMENT_FIELDS.get(base) or (base in DRIFT and DRIFT[base].bool_field))
        field = base if negated else field
        if field in ARGUMENT_FIELDS:
            is_bool = ARGUMENT_FIELDS[field]
        elif field in DRIFT:
            is_bool = DRIFT[field].bool_field
        else:
            i += 1
            continue
        if "=" in word.raw:
            raw = word.raw.partition("=")[2]
            found.append(
                _Flag(field, i, i, word.literal.partition("=")[2] if word.literal is not None else None, raw, negated)
            )
        elif negated or (is_bool and not _takes_value(words, i + 1, is_bool)):
            found.append(_Flag(field, i, i, "", "", negated))
        elif _takes_value(words, i + 1, is_bool):
            found.append(_Flag(field, i, i + 1, words[i + 1].literal, words[i + 1].raw, negated))
            i += 1
        i += 1
    return found


def _takes_value(words: tuple[Word, ...], i: int, bool_flag: bool) -> bool:
    """Whether `words[i]` is the value of the option before it: there, no redirection, not an option."""
    if i >= len(words) or _REDIRECTION.match(words[i].raw):
        return False
    raw = words[i].raw
    return not raw.startswith("-") or (not bool_flag and _NEGATIVE_NUMBER.fullmatch(raw) is not None)


def _pip(changes: Changes, command: Command, program: int, everything: list[Command]) -> None:
    """NM814: CUDA-only packages leave `pip install` lines (commented out when nothing is left)."""
    words = command.words
    literals = [w.literal for w in words]
    rest = literals[program:]
    if rest[:2] in (["pip", "install"], ["pip3", "install"]):
        first = program + 2
    elif rest[:4] in (["python", "-m", "pip", "install"], ["python3", "-m", "pip", "install"]) or rest[:3] == [
        "uv",
        "pip",
        "install",
    ]:
        first = program + (4 if rest[0] != "uv" else 3)
    else:
        return
    packages: list[tuple[int, str]] = []
    i = first
    while i < len(words):
        literal = literals[i]
        if literal is not None and literal.startswith("-"):
            i += 2 if literal in _PIP_VALUE_OPTIONS else 1
            continue
        match = _PACKAGE_NAME.match(literal or "")
        if match:
            packages.append((i, match.group(0).lower().replace("_", "-")))
        i += 1
    cuda = [
        (i, name) for i, name in packages if name in CUDA_ONLY_PACKAGES or name.startswith(("nvidia-", "cupy-cuda"))
    ]
    if not cuda or not changes.enabled("NM814"):
        return
    names = ", ".join(name for _, name in cuda)
    if len(cuda) < len(packages):
        for i, _ in cuda:
            changes.replace("NM814", words[i - 1].end, words[i].end, "", anchor=command.start)
        _todo(changes, "NM814", command, TODO_TEXT["NM814"].format(names=names, action="removed from this install"))
    elif _alone(changes, command, everything):
        line = changes.line_start(command.start)
        while line <= command.end:
            changes.replace("NM814", line, line, "# ", anchor=command.start)
            next_line = changes.text.find("\n", line)
            if next_line == -1:
                break
            line = next_line + 1
        _todo(changes, "NM814", command, TODO_TEXT["NM814"].format(names=names, action="this install is commented out"))
    else:
        _todo(changes, "NM814", command, TODO_TEXT["NM814"].format(names=names, action="remove this install"))


def _alone(changes: Changes, command: Command, everything: list[Command]) -> bool:
    """Whether the command stands alone at the top level of its lines, so commenting them out removes only it.

    Not inside a compound command (`then pip install ...`, or an indented body, which a comment
    would leave empty) and sharing no line with another command.
    """
    if command.program() != 0 and not is_assignment(command.words[0].raw):
        return False
    first, last = _logical_start(changes, command.start), changes.line_end(command.end)
    if changes.text[first : command.start] not in ("", "!", "%"):  # indented (a notebook magic keeps its `!`)
        return False
    return all(other is command or other.end <= first or other.start >= last for other in everything)


def _logical_start(changes: Changes, offset: int) -> int:
    """The start of the line holding `offset`, moved up past backslash-continued lines."""
    start = changes.line_start(offset)
    while start > 0 and changes.text[: start - 1].rstrip("\r").endswith("\\"):
        start = changes.line_start(start - 1)
    return start


_DIFFUSION_SHAPES = ("--height", "--width", "--num_images_per_prompt", "--batch_size")


def _export_todo(literals: list[str | None]) -> str:
    """NM813's text; for a diffusion export (`--height`/`--width`) with the model and the shapes to call with."""
    values: dict[str, str] = {}
    for i, word in enumerate(literals):
        flag, equals, value = (word or "").partition("=")
        if not equals and i + 1 < len(literals):
            value = literals[i + 1] or ""
        if flag in _DIFFUSION_SHAPES + ("--model", "-m") and value:
            values[flag.lstrip("-")] = value
    if "height" not in values and "width" not in values:
        return TODO_TEXT["NM813"]
    shapes = ", ".join(
        f"{name}={values[name]}" for name in ("height", "width", "num_images_per_prompt") if name in values
    )
    if "batch_size" in values:
        shapes += f"; batch_size={values['batch_size']} prompts per call"
    model = values.get("model") or values.get("m") or "the original model id"
    return TODO_TEXT["NM813_DIFFUSION"].format(model=model, shapes=shapes)


def _todo(changes: Changes, rule: str, command: Command, message: str) -> None:
    """A TODO above the command; above the whole logical line when the command continues one."""
    changes.todo(rule, _logical_start(changes, command.start), message)
