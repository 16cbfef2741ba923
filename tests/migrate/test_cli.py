"""The CLI as a user runs it: modes, exit codes, config, discovery, and files that misbehave."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from migrate.cli import main

CUDA = b'import torch\n\nif __name__ == "__main__":\n    x = torch.zeros(2).cuda()\n    torch.cuda.empty_cache()\n'
CLEAN = b"import os\n\nprint(os.getcwd())\n"


def invoke(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "train.py").write_bytes(CUDA)
    (tmp_path / "clean.py").write_bytes(CLEAN)
    return tmp_path


def test_diff_is_default_and_writes_nothing(project):
    result = invoke(str(project))
    assert result.exit_code == 0
    assert '+    x = torch.zeros(2).to("neuron")' in result.stdout
    assert "+import neuroncompat" in result.stdout
    assert (project / "train.py").read_bytes() == CUDA


def test_check_then_write_then_check(project):
    assert invoke("--check", str(project)).exit_code == 1
    result = invoke("--write", str(project))
    assert result.exit_code == 0
    assert "1 changed" in result.stderr
    assert b"torch.neuron.empty_cache()" in (project / "train.py").read_bytes()
    assert invoke("--check", str(project)).exit_code == 0
    assert (project / "clean.py").read_bytes() == CLEAN


def test_diff_applies_with_patch(project):
    diff = invoke(str(project / "train.py")).stdout
    subprocess.run(
        ["patch", "-p1", "-s", "-d", "/"], input=diff.encode(), check=True
    ) if project.is_absolute() else None
    assert b'.to("neuron")' in (project / "train.py").read_bytes()


def test_json_format(project):
    data = json.loads(invoke("--format", "json", str(project)).stdout)
    by_path = {Path(f["path"]).name: f for f in data["files"]}
    assert by_path["train.py"]["status"] == "changed"
    assert by_path["train.py"]["rewrites"] == {"NM101": 1, "NM104": 1}
    assert by_path["clean.py"]["status"] == "unchanged"


def test_no_shim_and_select(project):
    out = invoke("--no-shim", "--select", "NM104", str(project)).stdout
    assert "neuroncompat" not in out
    assert "+    torch.neuron.empty_cache()" in out
    assert '.to("neuron")' not in out


def test_pyproject_config(project):
    (project / "pyproject.toml").write_text('[tool.neuron-migrate]\nignore = ["NM101"]\nshim = false\n')
    out = invoke(str(project)).stdout
    assert "torch.neuron.empty_cache()" in out
    assert '.to("neuron")' not in out and "neuroncompat" not in out
    (project / "pyproject.toml").write_text("[tool.neuron-migrate]\nbogus = 1\n")
    assert invoke(str(project)).exit_code == 2


def test_default_excludes_and_gitignore(project):
    for d in (".venv", "build", "site-packages", "generated"):
        (project / d).mkdir()
        (project / d / "m.py").write_bytes(CUDA)
    (project / ".gitignore").write_text("generated/\n*_skip.py\n")
    (project / "x_skip.py").write_bytes(CUDA)
    data = json.loads(invoke("--format", "json", str(project)).stdout)
    assert sorted(Path(f["path"]).name for f in data["files"]) == ["clean.py", "train.py"]


def test_robustness_mixed_tree(tmp_path: Path):
    """Bad files are reported and skipped; the good files are still migrated; nothing is lost."""
    (tmp_path / "a_good.py").write_bytes(CUDA)
    (tmp_path / "b_broken.py").write_bytes(b"import torch\ndef f(:\n    torch.cuda.empty_cache()\n")
    latin = '# -*- coding: latin-1 -*-\r\nimport torch\r\n\r\ndef f():\r\n    print("café")\r\n    return torch.zeros(1).cuda()\r\n'.encode(
        "latin-1"
    )
    (tmp_path / "c_latin1_crlf.py").write_bytes(latin)
    bom = b"\xef\xbb\xbfimport torch\nx = torch.zeros(1).cuda()\n"
    (tmp_path / "d_bom.py").write_bytes(bom)
    (tmp_path / "e_empty.py").write_bytes(b"")
    readonly = tmp_path / "f_readonly.py"
    readonly.write_bytes(CUDA)
    readonly.chmod(0o444)
    script = tmp_path / "g_exec.py"
    script.write_bytes(CUDA)
    script.chmod(0o755)
    (tmp_path / "loop").mkdir()
    os.symlink(tmp_path, tmp_path / "loop" / "back")  # a symlink loop

    result = invoke("--write", "--jobs", "1", str(tmp_path))
    assert result.exit_code == 2  # the syntax error and the read-only file are errors
    err = result.stderr
    assert "b_broken.py:2:" in err and "syntax error" in err
    assert "f_readonly.py" in err and "not writable" in err
    assert (tmp_path / "b_broken.py").read_bytes().startswith(b"import torch\ndef f(:")
    assert readonly.read_bytes() == CUDA
    assert b'.to("neuron")' in (tmp_path / "a_good.py").read_bytes()
    new_latin = (tmp_path / "c_latin1_crlf.py").read_bytes()
    assert new_latin == latin.replace(b".cuda()", b'.to("neuron")')  # cookie, é, CRLF kept
    assert (tmp_path / "d_bom.py").read_bytes() == bom.replace(b".cuda()", b'.to("neuron")')
    assert (tmp_path / "e_empty.py").read_bytes() == b""
    assert stat.S_IMODE(script.stat().st_mode) == 0o755
    assert b"neuroncompat" in script.read_bytes()
    assert not list(tmp_path.glob(".*.neuron-migrate"))  # no temp files left behind
    readonly.chmod(0o644)


def test_parallel_jobs_same_result(tmp_path: Path):
    for i in range(12):
        (tmp_path / f"s{i}.py").write_bytes(CUDA)
    serial = json.loads(invoke("--format", "json", "-j", "1", str(tmp_path)).stdout)
    parallel = json.loads(invoke("--format", "json", "-j", "2", str(tmp_path)).stdout)
    assert serial == parallel


def test_console_entry_point_runs(tmp_path: Path):
    (tmp_path / "train.py").write_bytes(CUDA)
    proc = subprocess.run([sys.executable, "-m", "migrate", "--check", str(tmp_path)], capture_output=True, text=True)
    assert proc.returncode == 1
    assert "1 would change" in proc.stderr


def test_dash_h_is_help():
    short, long = invoke("-h"), invoke("--help")
    assert short.exit_code == 0 and short.stdout == long.stdout
    assert "Usage: main [OPTIONS] [PATHS]..." in short.stdout and "--check" in short.stdout


def test_check_lists_each_file_that_would_change(project, monkeypatch):
    (project / "sub").mkdir()
    (project / "sub" / "eval.py").write_bytes(CUDA)
    monkeypatch.chdir(project)
    result = invoke("--check", ".")
    assert result.exit_code == 1
    lines = result.stderr.splitlines()
    assert lines[0] == "neuron-migrate: 3 files scanned, 2 would change, 1 unchanged, 0 skipped, 0 errors"
    assert lines[1:3] == ["  would change: sub/eval.py", "  would change: train.py"]
    written = invoke("--write", ".").stderr.splitlines()
    assert written[1:3] == ["  changed: sub/eval.py", "  changed: train.py"]
    summary = invoke("--check", "train.py").stderr
    assert summary.startswith("neuron-migrate: 1 file scanned, 0 would change, 1 unchanged")


UNREADABLE = {
    "random.py": (bytes(range(256)) * 4, "binary file (contains NUL bytes)"),
    "latin_no_cookie.py": ("x = 'café'\ny = torch.zeros(1).cuda()\n".encode("latin-1"), "cannot be decoded as utf-8"),
    "bad_cookie.py": (b"# -*- coding: nonsense -*-\nx = 1\n", "bad encoding declaration"),
    "cells.ipynb": (b"\xff\xfe{\x00}", "binary file"),
    "launch.sh": (b"#!/bin/bash\nCUDA_VISIBLE_DEVICES=0 python t.py\n\xe9\n", "cannot be decoded as utf-8"),
}


@pytest.mark.parametrize("name", sorted(UNREADABLE))
def test_binary_and_undecodable_files_are_skipped_with_the_reason(tmp_path: Path, name: str, monkeypatch):
    """Named on the command line: skipped with the reason, exit 2 (the user asked for that file).
    Found in a directory: the same line, exit 0, and the other files are still migrated."""
    data, reason = UNREADABLE[name]
    (tmp_path / name).write_bytes(data)
    monkeypatch.chdir(tmp_path)
    for args in (["--check", name], [name]):
        named = invoke(*args)
        assert named.exit_code == 2
        assert f"  skipped: {name}: {reason}" in named.stderr and "1 skipped, 0 errors" in named.stderr
        assert named.stdout == ""
    report = json.loads(invoke("--format", "json", name).stdout)
    assert report["files"][0]["status"] == "skipped" and report["files"][0]["skip_reason"].startswith(reason)
    (tmp_path / "train.py").write_bytes(CUDA)
    walked = invoke("--write", ".")
    assert walked.exit_code == 0
    assert f"  skipped: {name}: {reason}" in walked.stderr
    assert (tmp_path / name).read_bytes() == data
    assert b'.to("neuron")' in (tmp_path / "train.py").read_bytes()


def test_a_named_file_of_another_kind_is_not_migrated_as_python(tmp_path: Path, monkeypatch):
    notes = b"Remember: model.cuda() before training\n"
    (tmp_path / "notes.txt").write_bytes(notes)
    (tmp_path / "train").write_bytes(CUDA)  # no suffix: a Python script, as always
    (tmp_path / "run.cfg").write_bytes(b"#!/usr/bin/env python\n" + CUDA)  # a python shebang says so
    monkeypatch.chdir(tmp_path)
    result = invoke("--write", "notes.txt", "train", "run.cfg")
    assert result.exit_code == 2
    assert "  skipped: notes.txt: not a Python script, notebook, YAML config or shell script" in result.stderr
    assert "2 changed" in result.stderr
    assert (tmp_path / "notes.txt").read_bytes() == notes
    assert b'.to("neuron")' in (tmp_path / "train").read_bytes()
    assert b'.to("neuron")' in (tmp_path / "run.cfg").read_bytes()


BROKEN = {
    "bad.py": (b"import torch\ndef f(:\n    x = torch.zeros(1).cuda()\n", "bad.py:2:7: syntax error"),
    "bad.sh": (b"CUDA_VISIBLE_DEVICES=0 python t.py\nif [ -n x ]; then\n", "bad.sh:3: bash: line 3: syntax error"),
    "accelerate.yaml": (
        b"distributed_type: MULTI_GPU\nmixed_precision: [fp16\n",
        "accelerate.yaml:3: YAML syntax error",
    ),
}


@pytest.mark.skipif(shutil.which("bash") is None, reason="shell files are checked with bash -n")
def test_a_broken_file_of_any_kind_is_an_error_at_its_line_and_the_run_goes_on(tmp_path: Path, monkeypatch):
    """A file that does not parse before migration is never written (not even where a rule would apply to
    the lines before the break), its error names file:line and the cause, and the other files migrate."""
    for name, (data, _) in BROKEN.items():
        (tmp_path / name).write_bytes(data)
    (tmp_path / "train.py").write_bytes(CUDA)
    monkeypatch.chdir(tmp_path)
    result = invoke("--write", ".")
    assert result.exit_code == 2
    for name, (data, error) in BROKEN.items():
        assert f"  error: {error}" in result.stderr
        assert (tmp_path / name).read_bytes() == data
    assert b'.to("neuron")' in (tmp_path / "train.py").read_bytes()
    assert "1 changed" in result.stderr and "3 errors" in result.stderr
