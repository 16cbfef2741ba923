"""The shipped pre-commit hooks and the example GitHub Actions workflow, run for real, offline."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from migrate.formats.markdown import MARKER

ROOT = Path(__file__).resolve().parents[2]
CUDA = 'import torch\n\nif __name__ == "__main__":\n    x = torch.zeros(2).cuda()\n'
pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def env_with_tool(tmp_path: Path) -> dict[str, str]:
    """The test environment, with `neuron-migrate` on PATH and git/pre-commit kept inside tmp_path."""
    scripts = [sysconfig.get_path("scripts"), str(Path(sys.executable).parent)]
    env = dict(
        os.environ,
        PATH=os.pathsep.join([*scripts, os.environ.get("PATH", "")]),
        PRE_COMMIT_HOME=str(tmp_path / "pre-commit-home"),
        HOME=str(tmp_path),
        GIT_CONFIG_NOSYSTEM="1",
        GIT_AUTHOR_NAME="t",
        GIT_AUTHOR_EMAIL="t@example.invalid",
        GIT_COMMITTER_NAME="t",
        GIT_COMMITTER_EMAIL="t@example.invalid",
    )
    assert shutil.which("neuron-migrate", path=env["PATH"]), "neuron-migrate must be installed (pip install -e .)"
    return env


def git(*args: str, cwd: Path, env: dict[str, str]) -> str:
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout


def test_hook_manifest_is_valid():
    proc = subprocess.run(
        [sys.executable, "-m", "pre_commit", "validate-manifest", str(ROOT / ".pre-commit-hooks.yaml")],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_pre_commit_fails_on_an_unmigrated_script_and_passes_after_write(tmp_path: Path):
    env = env_with_tool(tmp_path)
    hooks = tmp_path / "hooks-repo"  # this repository's hook manifest, as a hook repository
    hooks.mkdir()
    shutil.copy(ROOT / ".pre-commit-hooks.yaml", hooks)
    git("init", "-q", cwd=hooks, env=env)
    git("add", ".", cwd=hooks, env=env)
    git("commit", "-q", "-m", "hooks", cwd=hooks, env=env)
    rev = git("rev-parse", "HEAD", cwd=hooks, env=env).strip()

    project = tmp_path / "project"
    project.mkdir()
    (project / "train.py").write_text(CUDA)
    (project / "accelerate.yaml").write_text("distributed_type: MULTI_GPU\nnum_processes: 2\n")
    (project / ".pre-commit-config.yaml").write_text(
        f"repos:\n- repo: {hooks}\n  rev: {rev}\n  hooks:\n  - id: neuron-migrate-system\n"
    )
    git("init", "-q", cwd=project, env=env)
    git("add", ".", cwd=project, env=env)

    def run_hooks() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "pre_commit", "run", "--all-files"],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
        )

    failed = run_hooks()
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "neuron-migrate (check, installed copy)" in failed.stdout and "Failed" in failed.stdout
    assert "2 would change" in failed.stdout  # train.py and accelerate.yaml; the pre-commit config is no config

    subprocess.run(["neuron-migrate", "--write", "."], cwd=project, env=env, check=True, capture_output=True)
    git("add", ".", cwd=project, env=env)
    passed = run_hooks()
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert "Passed" in passed.stdout


def test_example_workflow_step_writes_the_report_and_the_exit_code(tmp_path: Path):
    workflow = YAML(typ="safe").load((ROOT / "examples" / "ci" / "neuron-migrate.yml").read_text())
    steps = workflow["jobs"]["neuron-migrate"]["steps"]
    check = next(s for s in steps if s.get("id") == "migrate")
    post = next(s for s in steps if "github-script" in s.get("uses", ""))
    assert MARKER in post["with"]["script"]  # the comment is found again by the marker the report starts with

    env = env_with_tool(tmp_path)
    project = tmp_path / "project"
    project.mkdir()
    (project / "train.py").write_text(CUDA)
    env.update(GITHUB_OUTPUT=str(tmp_path / "output"), GITHUB_STEP_SUMMARY=str(tmp_path / "summary"))
    proc = subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", check["run"]],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
    )  # as Actions runs `run:`
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "output").read_text() == "exit_code=1\n"
    report = (project / "neuron-migrate.md").read_text()
    assert report.startswith(MARKER) and "`train.py`" in report and "```diff" in report
    assert (tmp_path / "summary").read_text() == report
    assert "::error file=train.py,line=4,title=NM101 cuda-method::would rewrite" in proc.stdout  # at the rewrite
