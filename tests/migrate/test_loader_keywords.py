"""Keywords a migration adds beside others: no `drop_last` beside `**kwargs` that may carry a batch sampler,
no keyword beside `**kwargs` anywhere; a module-level `parse_args` script is an entry script and gets the
shim.
"""

from __future__ import annotations

from migrated import migrate

from migrate.imports import SHIM_LINE

# C6: no drop_last beside **kwargs ------------------------------------------------------------


def test_c6_drop_last_is_not_added_beside_kwargs_that_may_carry_a_batch_sampler():
    src = (
        "import torch\n\n"
        'if __name__ == "__main__":\n'
        '    kw = {"batch_sampler": sampler}\n'
        "    train_dl = torch.utils.data.DataLoader(train_ds, num_workers=0, **kw)\n"
        "    train_dl2 = torch.utils.data.DataLoader(train_ds, shuffle=True)\n"
    )
    out = migrate(src)
    assert "DataLoader(train_ds, num_workers=0, **kw)\n" in out
    assert "DataLoader(train_ds, shuffle=True, drop_last=True)" in out


def test_c6_no_keyword_added_beside_kwargs_anywhere():
    """The same class in the other rules that add a keyword: collators, torch.compile, tokenizers, autocast."""
    src = (
        "import torch\n\n"
        "collator = DataCollatorWithPadding(tokenizer, **collate_kwargs)\n"
        "model = torch.compile(model, **compile_kwargs)\n"
        'with torch.autocast("cuda", **amp_kwargs):\n    pass\n'
    )
    out = migrate(src)
    assert "pad_to_multiple_of" not in out
    assert "torch.compile(model, **compile_kwargs)" in out
    assert 'torch.autocast("neuron", **amp_kwargs)' in out


# C5: module-level parse_args is an entry script --------------------------------------------------


def test_c5_module_level_argparse_script_training_from_a_try_gets_the_shim():
    src = (
        "import argparse\nimport torch\n\n"
        "parser = argparse.ArgumentParser()\n"
        'parser.add_argument("--cuda", action="store_true")\n'
        "args = parser.parse_args()\n"
        'device = torch.device("cuda" if args.cuda else "cpu")\n'
        "model = torch.nn.Linear(2, 2).to(device)\n\n"
        "def train():\n    model(torch.randn(4, 2, device=device)).sum().backward()\n\n"
        "try:\n    for epoch in range(2):\n        train()\nexcept KeyboardInterrupt:\n    print('stop')\n"
    )
    assert migrate(src).startswith("import argparse\n" + SHIM_LINE + "import torch\n")
