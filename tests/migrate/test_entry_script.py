"""Which files count as entry scripts (`migrate.facts.is_entry_script`), so get `import neuroncompat`.

A script that runs its model at module level needs the shim even without a main guard; a
library module imported by such a script must not get it.
"""

from __future__ import annotations

import pytest

from migrate.engine import migrate_source
from migrate.facts import is_entry_script
from migrate.imports import SHIM_LINE

SAMPLE_PY = (  # karpathy/nanoGPT `sample.py`: no main guard, the run is inside nested blocks
    "import torch\nfrom model import GPT\n\nmodel = GPT.load('ckpt.pt')\nmodel.eval()\n\n"
    "with torch.no_grad():\n    with ctx:\n        for k in range(num_samples):\n"
    "            y = model.generate(x, max_new_tokens)\n            print(decode(y[0].tolist()))\n"
)

ENTRY_SCRIPTS = {
    "nested with/with/for": SAMPLE_PY,
    "main guard": "import torch\n\nif __name__ == '__main__':\n    main()\n",
    "column-0 call": "import torch\nmodel = AutoModel.from_pretrained('m')\n",
    "top-level loop": "for epoch in range(3):\n    for batch in loader:\n        loss(batch).backward()\n",
    "while loop": "while step < max_steps:\n    model.train()\n    step += 1\n",
    "if block": "if args.do_train:\n    trainer.train()\n",
    "else clause": "if args.skip:\n    pass\nelse:\n    trainer.train()\n",
    "try block": "try:\n    model.fit(x, y)\nexcept KeyboardInterrupt:\n    pass\n",
    "except clause": "try:\n    pass\nexcept ValueError:\n    model.fit(x, y)\n",
    "async with one-liner": "async with session:\n    out = model.generate(x)\n",
    "header split over lines": "with open(\n    path\n) as f:\n    pipe = pipeline('text-generation')\n",
    "call after a nested def": "if True:\n    def f():\n        pass\n    model.generate(x)\n",
    # issue 27 C5's class: scripts run as programs without a main guard
    "own main() at the end": "import torch\n\n\ndef main():\n    run_training()\n\n\nmain()\n",
    "fire.Fire": "import fire\nimport torch\n\n\ndef train(base_model=''):\n    pass\n\n\nfire.Fire(train)\n",
    "tyro.cli": "import tyro\n\n\ndef main(lr: float = 1e-4):\n    pass\n\n\ntyro.cli(main)\n",
    # lines as `str.splitlines` splits them: a block header after a lone carriage return or a form feed
    "block after a lone carriage return": "import torch\rwith torch.no_grad():\r    out = model.generate(x)\r",
    "block after a form feed": "import torch\n\x0cfor batch in loader:\n    loss(batch).backward()\n",
    "first line calls": "model = AutoModel.from_pretrained('m')\n",
}

LIBRARY_MODULES = {
    "with open reading a config": "import json\n\nwith open('config.json') as f:\n    CONFIG = json.load(f)\n",
    "functions only": "import torch\n\n\ndef sample(model, x):\n    return model.generate(x)\n",
    "def inside an if block": (
        "import torch\n\nif torch.__version__ >= '2':\n\n    def sample(model, x):\n"
        "        with torch.no_grad():\n            return model.generate(x)\n"
    ),
    "class inside a try block": (
        "try:\n    import torch\n\n    class Runner:\n        def run(self):\n            self.model.train()\n"
        "except ImportError:\n    torch = None\n"
    ),
    "decorated def inside an if block": (
        "if HAS_TORCH:\n    @torch.no_grad()\n    def sample(model, x):\n        return model.generate(x)\n"
    ),
    "optional import": "try:\n    import flash_attn\nexcept ImportError:\n    flash_attn = None\n",
    "a module-level call of a helper it does not define": "import torch\n\nmain()\n",
    "a module-level call of another own function": "import torch\n\n\ndef _setup():\n    pass\n\n\n_setup()\n",
    "a run call after the block ends inside a def": (
        "with open('vocab.txt') as f:\n    VOCAB = f.read().split()\n\n\ndef run(model):\n    model.train()\n"
    ),
}


@pytest.mark.parametrize("text", ENTRY_SCRIPTS.values(), ids=ENTRY_SCRIPTS.keys())
def test_entry_scripts(text: str) -> None:
    assert is_entry_script(text)


@pytest.mark.parametrize("text", LIBRARY_MODULES.values(), ids=LIBRARY_MODULES.keys())
def test_library_modules(text: str) -> None:
    assert not is_entry_script(text)


def test_sample_py_gets_the_shim_and_a_library_with_a_config_block_does_not() -> None:
    migrated = migrate_source(SAMPLE_PY.encode(), "sample.py")
    assert migrated.status == "changed" and migrated.new is not None
    assert migrated.new.decode() == SHIM_LINE + SAMPLE_PY
    library = "import json\n\nimport torch\n\nwith open('config.json') as f:\n    CONFIG = json.load(f)\n"
    assert migrate_source(library.encode(), "config.py").status == "unchanged"
