"""NM108/NM925: legacy CUDA tensor types (`torch.cuda.FloatTensor`, ...) in old GAN/RL scripts.

The rewrites must say what the type said (dtype and device); what cannot be rewritten safely
keeps its code with the NM925 TODO. `fixtures/cuda/legacy_tensor_types.py` is the whole-script
case; `tests/migrate/test_real_world_runs.py` runs its migration on the simulator.
"""

from __future__ import annotations

import ast

import pytest

from migrate.engine import migrate_source
from migrate.options import Options
from migrate.registry import Selection

TODO = "# TODO(neuron-migrate NM925): legacy CUDA tensor type: use torch.empty(*size"


NO_SHIM = Options(shim=False)


def migrate(src: str, options: Options = NO_SHIM) -> str:
    """The migrated text; it parses and a second run changes nothing."""
    result = migrate_source(src.encode(), "gan.py", options)
    assert result.error is None, result.error
    out = result.new.decode() if result.new is not None else src
    ast.parse(out)
    again = migrate_source(out.encode(), "gan.py", options)
    assert again.status == "unchanged", "a second run changed the output"
    return out


@pytest.mark.parametrize(
    "call, expected",
    [
        ("x.type(torch.cuda.FloatTensor)", 'x.to("neuron", torch.float32)'),
        ("x.type('torch.cuda.LongTensor')", 'x.to("neuron", torch.int64)'),
        ("x.type(dtype=torch.cuda.ByteTensor)", 'x.to("neuron", torch.uint8)'),
        ("x.type(torch.cuda.DoubleTensor, non_blocking=True)", 'x.to("neuron", torch.float64, non_blocking=True)'),
        ("torch.cuda.FloatTensor(n, 1)", 'torch.empty(n, 1, dtype=torch.float32, device="neuron")'),
        ("torch.cuda.FloatTensor(x.size(0))", 'torch.empty(x.size(0), dtype=torch.float32, device="neuron")'),
        ("torch.cuda.IntTensor(x.shape[0])", 'torch.empty(x.shape[0], dtype=torch.int32, device="neuron")'),
        ("torch.cuda.BoolTensor(len(xs))", 'torch.empty(len(xs), dtype=torch.bool, device="neuron")'),
        ("torch.cuda.FloatTensor()", 'torch.empty(0, dtype=torch.float32, device="neuron")'),
        ("torch.cuda.LongTensor([1, 2])", 'torch.tensor([1, 2], dtype=torch.int64, device="neuron")'),
        ("torch.cuda.FloatTensor((2, 3))", 'torch.tensor((2, 3), dtype=torch.float32, device="neuron")'),
        ("torch.cuda.FloatTensor(np.zeros(3))", 'torch.tensor(np.zeros(3), dtype=torch.float32, device="neuron")'),
        (
            "torch.cuda.FloatTensor(np.random.rand(2, 3))",
            'torch.tensor(np.random.rand(2, 3), dtype=torch.float32, device="neuron")',
        ),
        (
            "torch.cuda.LongTensor(np.random.randint(0, 10, size=b))",
            'torch.tensor(np.random.randint(0, 10, size=b), dtype=torch.int64, device="neuron")',
        ),
    ],
)
def test_casts_and_constructors(call: str, expected: str) -> None:
    src = f"import numpy as np\nimport torch\n\ny = {call}\n"
    assert migrate(src) == f"import numpy as np\nimport torch\n\ny = {expected}\n"


def test_gan_aliases_follow_their_condition_and_go_once_unused() -> None:
    src = (
        "import numpy as np\nimport torch\n\n"
        "cuda = True if torch.cuda.is_available() else False\n\n"
        "# tensor types\n"
        "Tensor = torch.cuda.FloatTensor if cuda else torch.Tensor\n"
        "LongTensor = torch.cuda.LongTensor if cuda else torch.LongTensor\n\n"
        "valid = Tensor(imgs.size(0), 1).fill_(1.0)\n"
        "z = Tensor(np.random.normal(0, 1, (imgs.shape[0], 100)))\n"
        "labels = labels.type(LongTensor)\n"
    )
    device = '"neuron" if cuda else "cpu"'
    assert migrate(src) == (
        "import numpy as np\nimport torch\n\n"
        "cuda = True if torch.neuron.is_available() else False\n\n"
        "# tensor types\n"
        f"valid = torch.empty(imgs.size(0), 1, dtype=torch.float32, device={device}).fill_(1.0)\n"
        f"z = torch.tensor(np.random.normal(0, 1, (imgs.shape[0], 100)), dtype=torch.float32, device={device})\n"
        f"labels = labels.to({device}, torch.int64)\n"
    )


def test_an_alias_on_the_cuda_check_itself_uses_the_neuron_check() -> None:
    src = (
        "import torch\n\nT = torch.cuda.FloatTensor if torch.cuda.is_available() else torch.FloatTensor\nx = T(2, 3)\n"
    )
    out = migrate(src)
    assert out == (
        'import torch\n\nx = torch.empty(2, 3, dtype=torch.float32, device="neuron" if torch.neuron.is_available() '
        'else "cpu")\n'
    )


def test_an_unconditional_alias_means_the_neuron_core() -> None:
    out = migrate("import torch\n\nTensor = torch.cuda.FloatTensor\nx = Tensor(3, 4)\n")
    assert out == 'import torch\n\nx = torch.empty(3, 4, dtype=torch.float32, device="neuron")\n'


def test_what_may_be_sizes_or_data_keeps_its_code_and_the_alias_with_a_todo() -> None:
    src = (
        "import numpy as np\nimport torch\n\n"
        "Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor\n"
        "a = Tensor(batch)\n"  # an int or a list: unknown
        "b = Tensor(np.random.randint(0, 10))\n"  # no size: a scalar
        "c = Tensor(2, 3)\n"
    )
    out = migrate(src)
    lines = out.splitlines()
    assert "Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor" in lines  # still read by a and b
    assert lines[lines.index("a = Tensor(batch)") - 1].startswith(TODO)
    assert lines[lines.index("b = Tensor(np.random.randint(0, 10))") - 1].startswith(TODO)
    assert lines[-1] == 'c = torch.empty(2, 3, dtype=torch.float32, device="neuron" if cuda else "cpu")'
    assert "NEURONCOMPAT_CUDA=redirect runs it unchanged meanwhile" in out
    assert out.count("NM925") == 2


def test_checks_keywords_and_passing_the_type_on_get_the_todo() -> None:
    src = (
        "import torch\n\n"
        "if isinstance(x, torch.cuda.FloatTensor):\n    pass\n"
        "y = torch.cuda.FloatTensor(2, device=1)\n"
        "build(torch.cuda.LongTensor)\n"
    )
    out = migrate(src)
    assert out.count(TODO) == 3
    assert "if isinstance(x, torch.cuda.FloatTensor):" in out and "build(torch.cuda.LongTensor)" in out


def test_a_test_on_is_cuda_is_no_alias() -> None:
    """`x.is_cuda` is False on a NeuronCore: following it would move the tensors to CPU."""
    src = "import torch\n\nT = torch.cuda.FloatTensor if mu.is_cuda else torch.FloatTensor\nalpha = T(2, 1)\n"
    out = migrate(src)
    assert out.splitlines()[2].startswith(TODO) and out.endswith("alpha = T(2, 1)\n")


def test_the_type_under_another_name_is_resolved_through_the_imports() -> None:
    out = migrate("import torch as T\nfrom torch.cuda import FloatTensor\n\nx = FloatTensor(2, 3)\n")
    assert out.endswith('x = T.empty(2, 3, dtype=T.float32, device="neuron")\n')


def test_with_nm108_off_every_use_gets_the_todo() -> None:
    src = "import torch\n\nx = torch.cuda.FloatTensor(2, 3)\ny = z.type(torch.cuda.FloatTensor)\n"
    out = migrate(src, Options(selection=Selection(ignore=("NM108",)), shim=False))
    assert out.count(TODO) == 2 and "torch.cuda.FloatTensor(2, 3)" in out


def test_scripts_without_legacy_types_are_untouched() -> None:
    src = "import torch\n\n\ndef f(x: torch.Tensor) -> torch.Tensor:\n    return x.type(torch.FloatTensor)\n"
    assert migrate(src) == src


def test_sizes_with_a_starred_rest_and_scaled_noise() -> None:
    src = (
        "import numpy as np\nimport torch\n\n"
        "valid = torch.cuda.FloatTensor(imgs.shape[0], *patch).fill_(1.0)\n"
        "fake = torch.cuda.FloatTensor(batch_size, *patch)\n"  # `patch` may be empty: batch_size may be data
        "zn = torch.cuda.FloatTensor(0.75 * np.random.normal(0, 1, (n, d)))\n"
    )
    lines = migrate(src).splitlines()
    assert lines[3] == 'valid = torch.empty(imgs.shape[0], *patch, dtype=torch.float32, device="neuron").fill_(1.0)'
    assert lines[4].startswith(TODO) and lines[5] == "fake = torch.cuda.FloatTensor(batch_size, *patch)"
    assert lines[6] == 'zn = torch.tensor(0.75 * np.random.normal(0, 1, (n, d)), dtype=torch.float32, device="neuron")'


def test_a_name_also_bound_to_something_else_is_no_alias() -> None:
    """`Tensor` is the CUDA type in one branch and the CPU type in the other: no single device to follow."""
    src = (
        "import torch\n\n"
        "if cuda:\n    Tensor = torch.cuda.FloatTensor\nelse:\n    Tensor = torch.FloatTensor\n"
        "x = Tensor(2, 3)\n"
    )
    out = migrate(src)
    assert "    Tensor = torch.cuda.FloatTensor\n" in out and out.endswith("x = Tensor(2, 3)\n")
    lines = out.splitlines()
    assert out.count(TODO) == 1 and lines[lines.index("    Tensor = torch.cuda.FloatTensor") - 1].startswith(
        "    " + TODO
    )
