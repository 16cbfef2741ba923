"""The simulate report's judgement: which fix a churning location gets, and rejected graphs flagged."""

from __future__ import annotations

import pytest
import torch

from neuroncompat.simulate import report
from neuroncompat.simulate.advice import diagnose
from neuroncompat.simulate.record import Recorder


def _batches(*shapes: tuple[int, ...]) -> list[list[tuple[str, tuple[int, ...], str]]]:
    return [[("input_ids", shape, "int64"), ("attention_mask", shape, "int64")] for shape in shapes]


@pytest.mark.parametrize(
    ("shapes", "fixes", "finding"),
    [
        (((2, 129), (2, 130), (2, 131), (2, 132), (2, 133)), ["static_cache"], "growing one at a time"),
        (
            ((4, 89), (4, 262), (4, 126), (4, 92), (4, 130)),
            ["pad_to_multiple_of", "padding_max_length"],
            "unpadded lengths",
        ),
        (((4, 128), (4, 512), (4, 256), (4, 384), (4, 640)), ["padding_max_length"], "in steps of 128: already padded"),
        (((8, 256), (3, 256)), ["dataloader_drop_last"], "(batch): 3 and 8, a smaller last batch"),
    ],
    ids=["decode-loop", "unpadded", "bucketed", "last-batch"],
)
def test_the_fix_follows_how_the_shapes_vary(
    shapes: tuple[tuple[int, ...], ...], fixes: list[str], finding: str
) -> None:
    diagnosis = diagnose(_batches(*shapes))
    assert [fix.id for fix in diagnosis.fixes] == fixes
    assert any(finding in line for line in diagnosis.findings), diagnosis.findings


def test_flattened_tokens_are_lengths_not_batches() -> None:
    """A loss graph sees batch x (length - 1) tokens; 254 vs 510 is two 128-buckets, not a last batch."""
    diagnosis = diagnose([[("logits", (n, 63), "bfloat16"), ("labels", (n,), "int64")] for n in (254, 510)])
    assert [fix.id for fix in diagnosis.fixes] == ["padding_max_length"]


def test_dynamic_graphs_are_flagged_as_rejected_with_the_fix(neuron: object) -> None:
    recorder = Recorder()
    recorder.start()
    try:
        # the documented escape hatch runs a rejected graph eagerly, so the dry run can report it
        double = torch.compile(lambda x: x * 2, backend="neuron", dynamic=True, options={"fallback_execution": True})
        double(torch.ones(3, device="neuron"))
    finally:
        recorder.stop()
    built = report.build([recorder.snapshot()], ["python", "dyn.py"], 0)
    (rank,) = built["ranks"]
    assert (rank["compiled_graphs"], rank["rejected_graphs"], rank["estimated_compile_seconds"]) == (0, 1, 0)
    (warning,) = rank["warnings"]
    assert warning["kind"] == "rejected" and warning["where"].endswith(
        "(test_dynamic_graphs_are_flagged_as_rejected_with_the_fix)"
    )
    assert [fix["id"] for fix in warning["fixes"]] == ["automatic_dynamic_shapes"]
    text = report.render_text(built)
    assert "1 graph(s) Neuron would REJECT (dynamic shapes)" in text and "REJECTED: dynamic shapes" in text


def test_a_stopped_recorder_leaves_torch_compile_of_a_module_silent(neuron: object) -> None:
    """torch.compile(module) warns while global module hooks exist; the recorder's are gone once it stops, including
    the with_kwargs flag torch's own handle leaves behind (record._register_exit_hook)."""
    import warnings

    recorder = Recorder()
    recorder.start()
    recorder.stop()
    model = torch.nn.Linear(2, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        torch.compile(model, backend="eager")(torch.ones(1, 2))
