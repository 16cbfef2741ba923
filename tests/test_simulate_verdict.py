"""The dry run ends on its verdict and the next command; findings that need no change are counted, not listed
(issue 45 item 2).

An int64 tensor on the device needs no change while its values fit in int32 (token ids, positions, labels), so it
is counted on one line (``--show-info`` lists it), never worded as a bug to report upstream, never a GitHub
annotation, and not one of the verdict's findings to act on. Runs on the simulated device (the ``neuron`` fixture)
with the recorder a dry run uses.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import jsonschema
import pytest
import torch

from neuroncompat.simulate import github, markdown, report, verdict
from neuroncompat.simulate.record import Recorder

SCHEMA = json.loads((Path(__file__).resolve().parents[1] / "docs" / "simulate-report.schema.json").read_text())


def _dry_run(work: Callable[[], object], exit_code: int = 0) -> dict:
    recorder = Recorder()
    recorder.start()
    try:
        work()
    finally:
        recorder.stop()
    return report.build([recorder.snapshot()], ["python", "train.py", "--steps", "2"], exit_code)


def _token_ids_only() -> None:
    """A compiled step over token ids: int64 on the device, nothing to change."""
    step = torch.compile(lambda input_ids: input_ids + 1, backend="neuron")
    step(torch.arange(3, device="neuron"))


def test_nothing_to_act_on_ends_with_the_command_to_run_on_a_trn2(neuron: object) -> None:
    built = _dry_run(_token_ids_only)
    jsonschema.validate(json.loads(report.render_json(built)), SCHEMA)
    (finding,) = built["ranks"][0]["findings"]
    assert finding["kind"] == "int64_on_device" and finding["informational"] is True
    lines = report.render_text(built).splitlines()
    assert lines[-3:] == [
        "1 finding(s) need no change (int64 on the device while the values fit in int32); --show-info lists them",
        "verdict: 1 compilation(s), about 60 s on trn2 at 60 s each (--graph-cost); 0 finding(s) to act on",
        "next: on a trn2, python train.py --steps 2",
    ]
    assert "int64_on_device" not in "\n".join(lines)
    listed = report.render_text(built, show_info=True).splitlines()
    assert any(line.startswith("  note: ") and ": int64_on_device " in line for line in listed)  # nothing to change
    assert github.render(built) == ""  # no annotation for a finding that needs no change
    assert markdown.render(built).endswith(
        "**verdict: 1 compilation(s), about 60 s on trn2 at 60 s each (--graph-cost); 0 finding(s) to act on**  \n"
        "next: on a trn2, python train.py --steps 2\n"
    )


def test_an_informational_finding_in_library_code_is_not_a_bug_to_report(neuron: object) -> None:
    finding = _dry_run(_token_ids_only)["ranks"][0]["findings"][0]
    in_a_library = {**finding, "owner": "transformers"}
    assert "report it to" not in report.fix_text(in_a_library)
    assert report.fix_text({**in_a_library, "informational": False}).startswith(
        "in transformers's code, not yours: report it to transformers"
    )


def test_a_finding_to_act_on_asks_for_the_fix_and_another_dry_run(neuron: object) -> None:
    built = _dry_run(lambda: torch.ones(3, dtype=torch.float64, device="neuron"))
    assert verdict.to_act_on(built) == 1
    lines = report.render_text(built).splitlines()
    assert lines[-2].endswith("; 1 finding(s) to act on")
    assert lines[-1] == (
        "next: fix them (each has its fix above), then dry-run again: neuroncompat simulate -- python train.py --steps 2"
    )
    assert "::warning " in github.render(built)


def test_a_failed_script_says_so_first(neuron: object) -> None:
    built = _dry_run(_token_ids_only, exit_code=3)
    assert report.render_text(built).splitlines()[-2:] == [
        "verdict: the script FAILED (exit code 3) after 1 compilation(s), about 60 s on trn2 at 60 s each "
        "(--graph-cost)",
        "next: fix the failure above, then dry-run again: neuroncompat simulate -- python train.py --steps 2",
    ]


def test_nothing_on_the_device_points_at_the_codemod() -> None:
    built = report.build([], ["python", "train.py"], 0)
    assert (
        report.render_text(built).splitlines()[-1] == "next: see what moves it to the device: neuron-migrate train.py"
    )


@pytest.mark.slow  # the quickstart: builds a model, migrates the example and dry-runs it
def test_the_quickstart_ends_on_the_verdict_within_15_lines() -> None:
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    done = subprocess.run(
        [sys.executable, str(root / "examples" / "quickstart.py")], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    last_screen = done.stdout[done.stdout.rindex("neuroncompat simulate: ") :].splitlines()
    assert len(last_screen) <= 15, "\n".join(last_screen)
    assert last_screen[-2].startswith("verdict: 3 compilation(s), about 3 min on trn2")
    assert last_screen[-2].endswith("; 0 finding(s) to act on")
    assert last_screen[-1] == "next: on a trn2, python finetune.py --model_name_or_path model --output_dir out"
