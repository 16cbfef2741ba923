"""Idempotence (issue 27): running neuron-migrate on its own output changes nothing.

A rule's decision must not depend on what another rule writes in the same run. The engine runs
passes until one changes nothing (the result is a fixed point by construction), and facts are
read from the script, never from the TODOs a run wrote; these tests check both over every
fixture of every kind, and on the case found in real example trees.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from migrate import engine
from migrate.dispatch import file_kind, migrate_file
from migrate.engine import migrate_source
from migrate.options import Options
from migrate.results import FileResult, TextChange
from migrate.transform import MigrationTransformer

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
ALL_FIXTURES = sorted(
    p for p in FIXTURES.rglob("*") if p.is_file() and p.name != "README.md" and file_kind(str(p), p.read_bytes())
)


def _output(path: Path, data: bytes) -> bytes:
    result = migrate_file(data, str(path))
    assert result.status not in ("error", "internal-error"), result.error
    return result.new if result.new is not None else data


@pytest.mark.parametrize("path", ALL_FIXTURES, ids=[str(p.relative_to(FIXTURES)) for p in ALL_FIXTURES])
def test_every_fixture_migrates_to_a_fixed_point(path: Path):
    once = _output(path, path.read_bytes())
    again = migrate_file(once, str(path))
    assert again.new is None, f"a second run changed {path.name}"


def test_there_are_fixtures_of_every_kind():
    kinds = {file_kind(str(p), p.read_bytes()) for p in ALL_FIXTURES}
    assert kinds == {"python", "notebook", "yaml", "shell"}
    assert len(ALL_FIXTURES) > 100


# The 4 lines found in real example trees: the vLLM TODO names `device_map="neuron"`, and a second
# run read that as the script loading with a device_map, whose hooks move inputs (NM301).
VLLM_CASE = (
    "text = tokenizer.apply_chat_template(messages)\n"
    '_ = model.generate(**tokenizer(text, return_tensors="pt").to("cuda"))\n'
    "from vllm import SamplingParams\n"
    "output = model.fast_generate(text, sampling_params=SamplingParams())\n"
)


def test_a_todo_the_run_wrote_is_no_fact_about_the_script():
    once = engine._migrate_once(VLLM_CASE.encode(), "gen.py", Options())
    assert once.new is not None
    assert b'device_map="neuron"' in once.new  # the NM901 TODO's words
    assert b'.to("neuron")' in once.new  # the script loads with no device_map: its inputs must move
    assert engine._migrate_once(once.new, "gen.py", Options()).status == "unchanged"


def test_a_run_reports_every_pass_and_ends_at_the_fixed_point(monkeypatch: pytest.MonkeyPatch):
    """A rule that decides from what another wrote still gives, in one run, what two runs gave."""
    calls: list[bytes] = []
    real = engine._migrate_once

    def second_pass_changes(data: bytes, path: str, options: Options, compiled: bool = False) -> FileResult:
        calls.append(data)
        result = real(data, path, options, compiled)
        if len(calls) == 2:  # as if a rule changed its mind on seeing pass 1's output
            new = data.replace(b"x = 1", b"x = 2")
            change = TextChange(data.decode(), new.decode())
            return FileResult(path, "changed", new=new, hits=Counter({"NM999": 1}), changes=[change])
        return result

    monkeypatch.setattr(engine, "_migrate_once", second_pass_changes)
    source = b'import torch\nx = 1\ny = torch.zeros(1, device="cuda")\n'
    result = migrate_source(source, "s.py")
    assert result.status == "changed"
    assert result.new == b'import torch\nx = 2\ny = torch.zeros(1, device="neuron")\n'
    assert result.hits == {"NM102": 1, "NM999": 1}
    assert result.changes[0].old == source.decode()
    assert result.changes[0].new == result.new.decode()
    assert len(calls) == 3  # pass 3 changed nothing


def test_a_migration_that_never_settles_is_an_internal_error_and_changes_nothing(monkeypatch: pytest.MonkeyPatch):
    def always_changes(data: bytes, path: str, options: Options, compiled: bool = False) -> FileResult:
        new = data + b"#\n"
        return FileResult(path, "changed", new=new, changes=[TextChange(data.decode(), new.decode())])

    monkeypatch.setattr(engine, "_migrate_once", always_changes)
    result = migrate_source(b"import torch\n", "s.py")
    assert result.status == "internal-error"
    assert result.new is None
    assert "fixed point" in (result.error or "")


# Library code: the rewritten keyword beside a comparison no rule touches, which passes the prefilter again
LIBRARY = (
    b"def build(config, cls):\n"
    b'    model = cls.from_pretrained("gpt2", attn_implementation="flash_attention_2")\n'
    b'    if config._attn_implementation == "flash_attention_2":\n'
    b"        return model\n"
    b"    return None\n"
)


def passes_by(monkeypatch: pytest.MonkeyPatch, data: bytes) -> tuple[FileResult, int]:
    """The migration of `data` and how many passes traversed a libcst tree of it (the real transformer, counted)."""
    passes: list[int] = []

    class Counted(MigrationTransformer):
        def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
            passes.append(1)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(engine, "MigrationTransformer", Counted)
    return migrate_source(data, "lib.py", Options(shim=False)), len(passes)


def test_a_pass_that_only_swapped_literals_is_not_run_again(monkeypatch: pytest.MonkeyPatch):
    """NM207's `"sdpa"` is nothing a rule acts on: a confirming pass would parse and traverse the file for nothing."""
    result, passes = passes_by(monkeypatch, LIBRARY)
    assert result.hits == {"NM207": 1} and b'attn_implementation="sdpa"' in (result.new or b"")
    assert passes == 1
    confirmed = migrate_source(LIBRARY, "lib.py", Options(shim=False, prefilter=False))  # every pass in full
    assert (confirmed.new, confirmed.hits, confirmed.rewrites) == (result.new, result.hits, result.rewrites)
    assert migrate_source(result.new or b"", "lib.py", Options(shim=False)).status == "unchanged"


def test_a_rewrite_that_writes_a_name_is_confirmed(monkeypatch: pytest.MonkeyPatch):
    """`.cuda(dev)` -> `.to(dev)` makes `dev` a device variable a second pass follows: the fixed point is checked."""
    result, passes = passes_by(monkeypatch, LIBRARY.replace(b"return model\n", b"return model.cuda(dev)\n"))
    assert result.hits == {"NM207": 1, "NM101": 1}
    assert passes == 2
