"""NM302 leaves a model's own ``generate(idx, max_new_tokens, ...)`` alone (nanoGPT, minGPT).

Found running karpathy/minGPT's ``projects/chargpt`` migrated: NM302 added
``cache_implementation="static"`` to minGPT's ``GPT.generate`` and the script died with
``TypeError: GPT.generate() got an unexpected keyword argument 'cache_implementation'``.
"""

from __future__ import annotations

from migrate.engine import migrate_source
from migrate.options import Options


def _migrate(src: str) -> str:
    result = migrate_source(src.encode(), "t.py", Options(shim=False))
    assert result.error is None
    return result.new.decode() if result.new else src


def test_own_sampling_loop_with_positional_max_new_tokens_is_left_alone() -> None:
    src = (
        "import torch\n"
        "from mingpt.model import GPT\n"
        "x = torch.tensor([[1, 2]], dtype=torch.long).to('cuda')\n"
        "y = model.generate(x, 500, temperature=1.0, do_sample=True, top_k=10)[0]\n"
    )
    out = _migrate(src)
    assert "cache_implementation" not in out and ".to('neuron')" in out


def test_transformers_generate_still_gets_the_static_cache() -> None:
    out = _migrate("out = model.generate(input_ids, max_new_tokens=32)\n")
    assert out == 'out = model.generate(input_ids, max_new_tokens=32, cache_implementation="static")\n'
