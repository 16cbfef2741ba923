"""`neuroncompat simulate` on the TRL Trainium guide's scenarios: the graph counts the guide promises.

The scenarios run in-process with the shim applied and the recorder on, exactly as each process
of ``neuroncompat simulate`` runs them (``bench/bench_simulate_compiles.py`` runs the same
scenarios through the CLI); the report is built from the recorder's snapshot.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from neuroncompat.simulate import report, scenarios
from neuroncompat.simulate.record import Recorder

pytestmark = pytest.mark.slow  # SFT and GRPO trainers run end to end


@pytest.fixture
def recorder(shim: ModuleType) -> Iterator[Recorder]:
    shim.apply()
    recorder = Recorder()
    recorder.start()
    try:
        yield recorder
    finally:
        recorder.stop()


def _rank(recorder: Recorder, **options: Any) -> dict[str, Any]:
    built = report.build([recorder.snapshot()], ["python", "-m", "neuroncompat.simulate.scenarios"], 0, **options)
    return built["ranks"][0]


def _lengths(graphs: list[dict[str, Any]]) -> set[int]:
    """The sequence lengths of the token-id inputs ([batch, seq] int64) of compiled graphs."""
    return {s["shape"][1] for g in graphs for s in g["inputs"] if s["dtype"] == "int64" and len(s["shape"] or ()) == 2}


def test_sft_padded_to_128_compiles_at_most_max_length_over_128_graphs(
    recorder: Recorder, tiny_qwen: Path, tmp_path: Path
) -> None:
    ran = scenarios.sft(tiny_qwen, tmp_path, pad_to_multiple_of=128)
    rank = _rank(recorder, max_shapes=1)
    buckets = ran["max_length"] // 128
    assert ran["batch_lengths"] == [128, 256]  # the data reaches both buckets
    # TRL's fused-loss forward compiles as a few functions; each compiles once per padded length.
    assert rank["compiled"] and all(len(group["graphs"]) == buckets for group in rank["compiled"])
    assert _lengths(g for group in rank["compiled"] for g in group["graphs"]) == {128, 256}
    assert rank["rejected_graphs"] == 0 and rank["eager_shapes"] == 0
    assert rank["estimated_compile_seconds"] == rank["compiled_graphs"] * 60
    assert len(rank["warnings"]) == len(rank["compiled"])  # over --max-shapes 1 each
    for warning in rank["warnings"]:  # already bucketed: only max_length padding cuts further
        assert [fix["id"] for fix in warning["fixes"]] == ["padding_max_length"]


def test_sft_unpadded_compiles_one_graph_per_length(recorder: Recorder, tiny_qwen: Path, tmp_path: Path) -> None:
    ran = scenarios.sft(tiny_qwen, tmp_path, pad_to_multiple_of=None)
    rank = _rank(recorder, max_shapes=2)
    assert len(ran["batch_lengths"]) == ran["steps"] == 3
    assert all(len(group["graphs"]) == 3 for group in rank["compiled"])
    assert _lengths(g for group in rank["compiled"] for g in group["graphs"]) == set(ran["batch_lengths"])
    # Over --max-shapes 2, every location is warned about, with the padding fixes, at the user's train() line.
    assert len(rank["warnings"]) == len(rank["compiled"])
    for warning in rank["warnings"]:
        assert warning["kind"] == "recompiles" and warning["shapes"] == 3
        assert [fix["id"] for fix in warning["fixes"]] == ["pad_to_multiple_of", "padding_max_length"]
        assert warning["where"].endswith(" (sft)") and "from neuroncompat/simulate/scenarios.py:" in warning["where"]


@pytest.mark.parametrize("cache", ["static", "dynamic"])
def test_grpo_decode_shapes_static_cache_bounded_dynamic_one_per_token(
    recorder: Recorder, tiny_qwen: Path, tmp_path: Path, cache: str
) -> None:
    ran = scenarios.grpo(tiny_qwen, tmp_path, cache=cache)
    rank = _rank(recorder)
    assert ran["pad_to_multiple_of"] == 128 and rank["compiled_graphs"] == 0  # TRL generates with disable_compile=True
    by_site = {
        entry["site"].split(" ")[1]: entry
        for entry in rank["eager"]
        if entry["site"].startswith("transformers/generation/")
    }
    prefill, decode = by_site["(_prefill)"], by_site["(_sample)"]
    tokens = ran["max_completion_length"]
    assert decode["calls"] == ran["steps"] * (tokens - 1)
    assert len(prefill["shapes"]) == 1  # prompts padded to 128
    if cache == "static":
        assert len(decode["shapes"]) == 1
        assert rank["warnings"] == []
    else:
        assert len(decode["shapes"]) == tokens - 1
        assert [s["inputs"][0]["shape"] for s in decode["shapes"]] == [[2, 128 + n] for n in range(1, tokens)]
        (warning,) = rank["warnings"]
        assert warning["kind"] == "eager_shapes" and "(_sample)" in warning["where"]
        assert [fix["id"] for fix in warning["fixes"]] == ["static_cache"]
