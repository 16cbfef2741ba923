"""Route a file to the migrator for its kind: Python, notebook, YAML config or shell script.

The kind comes from the suffix. An explicit file without a known suffix is a shell script when
its first line is a `sh`/`bash` shebang or it holds `#SBATCH` directives (a SLURM batch script:
`job.slurm`, `train.sbatch` or no suffix at all), and Python when it has no suffix (scripts such
as `bin/train`) or a `python` shebang. A file with another suffix (`notes.txt`) is skipped with
the reason, never parsed as Python. So are binary files (a NUL byte) and files that do not decode
in their encoding (PEP 263 cookie or BOM for Python, UTF-8 otherwise): a directory walk passes
over them, and the CLI fails only for files the user named. Each migrator returns the same
`FileResult`, so the runner, the writer and every report format treat all kinds alike.
"""

from __future__ import annotations

import io
import re
import tokenize

from migrate.discover import SUFFIXES
from migrate.engine import migrate_source
from migrate.options import Options
from migrate.results import FileResult

_SHELL_SHEBANG = re.compile(rb"#![^\n]*\b(?:ba)?sh\b")
_PYTHON_SHEBANG = re.compile(rb"#![^\n]*\bpython")
_SBATCH = re.compile(rb"^#SBATCH[ \t]", re.M)
_CODING_COOKIE = re.compile(rb"^[ \t\f]*#.*?coding[:=]", re.MULTILINE)  # PEP 263


def file_kind(path: str, data: bytes) -> str | None:
    """`python`, `notebook`, `yaml` or `shell` for the file at `path` holding `data`; None for a
    suffix neuron-migrate does not handle (`notes.txt`) without a shebang saying otherwise."""
    name = path.replace("\\", "/").rsplit("/", 1)[-1]
    dot = name.rfind(".")
    suffix = name[dot:].lower() if dot > 0 else ""
    if suffix in SUFFIXES:
        return SUFFIXES[suffix]
    if _SHELL_SHEBANG.match(data) or _SBATCH.search(data):
        return "shell"
    if not suffix or _PYTHON_SHEBANG.match(data):
        return "python"
    return None


def unreadable(data: bytes, kind: str) -> str | None:
    """Why `data` cannot be migrated as text of `kind` (binary, undecodable), or None."""
    if b"\0" in data:
        return "binary file (contains NUL bytes)"
    encoding = "utf-8-sig"
    if kind == "python":
        try:
            encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        except SyntaxError as exc:  # a cookie naming no codec, or a first line that is not UTF-8
            if _CODING_COOKIE.search(b"\n".join(data.split(b"\n", 2)[:2])):
                return f"bad encoding declaration ({exc})"
            encoding = "utf-8"
    try:
        data.decode(encoding)
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        return f"cannot be decoded as {encoding.removesuffix('-sig')} (line {line}: {exc.reason})"
    return None


_DEFAULT_OPTIONS = Options()


def migrate_file(data: bytes, path: str, options: Options = _DEFAULT_OPTIONS) -> FileResult:
    """Migrate the bytes of one file of any supported kind."""
    kind = file_kind(path, data)
    if kind is None:
        return FileResult(path, "skipped", skip_reason="not a Python script, notebook, YAML config or shell script")
    reason = unreadable(data, kind)
    if reason is not None:
        return FileResult(path, "skipped", skip_reason=reason, kind=kind)
    if kind == "notebook":
        from migrate.notebook import migrate_notebook

        return migrate_notebook(data, path, options)
    if kind == "yaml":
        from migrate.configs.yaml_rules import migrate_yaml

        return migrate_yaml(data, path, options)
    if kind == "shell":
        from migrate.configs.shell_rules import migrate_shell

        return migrate_shell(data, path, options)
    return migrate_source(data, path, options)
