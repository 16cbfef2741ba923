"""A `*args`/`**kwargs` splat is never taken for a call's positional argument (`rules.base.positional_args`).

Two rules once counted splats as positional arguments and one indexed past the end of them:
`.cuda(**kw)` became the invalid `.to(**f"neuron:{kw}")`, `model.generate(ids.to(*moves))` lost a
move that may carry a dtype, and `pl.MpDeviceLoader(loader, **opts)` crashed the migration.
"""

from __future__ import annotations

import ast

from migrate.engine import migrate_source
from migrate.options import Options


def run(src: str) -> str:
    result = migrate_source(src.encode(), "train.py", Options(shim=False))
    assert result.error is None, result.error
    out = result.new.decode() if result.new else src
    ast.parse(out)  # the migrated script is still Python
    return out


def test_cuda_with_a_splat_is_left_as_written():
    src = (
        "import torch\nx = torch.ones(2)\ny = x.cuda(*devices)\nz = x.cuda(**options)\nw = x.cuda(non_blocking=True)\n"
    )
    out = run(src)
    assert "y = x.cuda(*devices)\n" in out
    assert "z = x.cuda(**options)\n" in out
    assert 'w = x.to("neuron", non_blocking=True)\n' in out  # a keyword alone still migrates


def test_a_splatted_to_is_not_stripped_from_generate_inputs():
    src = (
        "from transformers import AutoModelForCausalLM\n"
        'model = AutoModelForCausalLM.from_pretrained("m", device_map="auto")\n'
        "out = model.generate(input_ids.to(*moves))\n"
        "out = model.generate(input_ids.to(device))\n"
    )
    out = run(src)
    assert "model.generate(input_ids.to(*moves), " in out  # `moves` may hold a dtype: the call stays
    assert "model.generate(input_ids, " in out  # a plain device move still goes (NM301)


def test_device_loader_with_splatted_options_is_kept():
    src = (
        "import torch_xla.core.xla_model as xm\n"
        "import torch_xla.distributed.parallel_loader as pl\n"
        "device = xm.xla_device()\n"
        "loader = pl.MpDeviceLoader(train_loader, **options)\n"
        "train_device_loader = pl.MpDeviceLoader(train_loader, device)\n"
    )
    out = run(src)
    assert "loader = pl.MpDeviceLoader(train_loader, **options)\n" in out
    assert "train_device_loader = train_loader\n" in out  # the plain wrapper still unwraps (NM605)
