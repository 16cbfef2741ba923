"""Route a file to the migrator for its kind: Python, notebook, YAML config or shell script.

The kind comes from the suffix; an explicit file without a known suffix is a shell script when
its first line is a `sh`/`bash` shebang or it holds `#SBATCH` directives (a SLURM batch script,
`job.slurm`, `train.sbatch` or no suffix at all), and Python otherwise (the CLI always accepted any file
named on the command line as Python). Each migrator returns the same `FileResult`, so the
runner, the writer and every report format treat all kinds alike.
"""

from __future__ import annotations

import re

from migrate.discover import SUFFIXES
from migrate.engine import FileResult, Options, migrate_source

_SHELL_SHEBANG = re.compile(rb"#![^\n]*\b(?:ba)?sh\b")
_SBATCH = re.compile(rb"^#SBATCH[ \t]", re.M)


def file_kind(path: str, data: bytes) -> str:
    """`python`, `notebook`, `yaml` or `shell` for the file at `path` holding `data`."""
    dot = path.rfind(".")
    kind = SUFFIXES.get(path[dot:].lower()) if dot > path.rfind("/") else None
    if kind is not None:
        return kind
    return "shell" if _SHELL_SHEBANG.match(data) or _SBATCH.search(data) else "python"


def migrate_file(data: bytes, path: str, options: Options = Options()) -> FileResult:
    """Migrate the bytes of one file of any supported kind."""
    kind = file_kind(path, data)
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
