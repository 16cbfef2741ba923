"""A repository's own FlashAttention/xformers monkey patch goes with its import (and its `if`); a patch
whose result is used stays.
"""

from __future__ import annotations

from migrated import migrate_with_todos

# a repository's own attention monkey patch -----------------------------------------------------------------


def test_a_flash_attention_monkey_patch_goes_with_its_import():
    src = (
        "# Need to call this before importing transformers.\n"
        "from fastchat.train.llama2_flash_attn_monkey_patch import (\n"
        "    replace_llama_attn_with_flash_attn,\n"
        ")\n\n"
        "replace_llama_attn_with_flash_attn()\n\n"
        "from fastchat.train.train import train\n\n"
        'if __name__ == "__main__":\n    train()\n'
    )
    out, todos = migrate_with_todos(src)
    assert "flash_attn" not in out and todos == []
    assert "from fastchat.train.train import train\n" in out


def test_a_monkey_patch_behind_an_option_goes_with_its_if():
    src = (
        "import torch\n"
        "from utils.llama_patch import replace_attn_with_flash_attn\n"
        "from fastchat.train.llama_xformers_attn_monkey_patch import replace_llama_attn_with_xformers_attn\n\n\n"
        "def train(args, model):\n"
        "    if args.flash_attn:\n"
        "        replace_attn_with_flash_attn()\n"
        "    if args.xformers:\n"
        "        replace_llama_attn_with_xformers_attn()\n"
        "    model.to(torch.device('cuda'))\n"
    )
    out, _ = migrate_with_todos(src)
    assert "replace_" not in out and "args.flash_attn" not in out and "args.xformers" not in out
    assert "def train(args, model):\n    model.to(" in out


def test_a_patch_whose_result_is_used_stays():
    src = "import torch\nfrom patch import replace_llama_attn_with_flash_attn\n\nok = replace_llama_attn_with_flash_attn()\n"
    out, _ = migrate_with_todos(src)
    assert "ok = replace_llama_attn_with_flash_attn()" in out
