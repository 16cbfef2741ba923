"""Per-rule suppression: `# neuron-migrate: skip[NM202]` switches off only the listed rules there.

A plain `# neuron-migrate: skip` still leaves the whole statement (or config line) alone; the
listed form keeps the other rules rewriting the same line. Ids and id prefixes work as with
`--ignore`, in any case.
"""

from __future__ import annotations

from migrate.dispatch import migrate_file
from migrate.engine import migrate_source
from migrate.markers import Skip, find_skip
from migrate.options import Options

LOAD = 'AutoModelForCausalLM.from_pretrained("m", torch_dtype=torch.float16).cuda()'
HEAD = "import torch\nfrom transformers import AutoModelForCausalLM\n\n"


def migrated(source: str, name: str = "t.py") -> str:
    result = migrate_file(source.encode(), name, Options(shim=False))
    assert result.status in ("changed", "unchanged"), result.error
    return (result.new or source.encode()).decode()


def test_a_listed_rule_is_kept_off_while_the_others_rewrite_the_same_line() -> None:
    out = migrated(f"{HEAD}model = {LOAD}  # neuron-migrate: skip[NM202]\n")
    # NM202 (fp16 -> bf16) is skipped; NM203 (torch_dtype -> dtype) and NM101 (.cuda()) still apply
    assert out.endswith(
        'model = AutoModelForCausalLM.from_pretrained("m", dtype=torch.float16).to("neuron")'
        "  # neuron-migrate: skip[NM202]\n"
    )


def test_prefixes_and_several_ids_in_any_case() -> None:
    out = migrated(f"{HEAD}model = {LOAD}  # neuron-migrate: skip[NM1, nm203]\n")
    assert out.endswith(
        'model = AutoModelForCausalLM.from_pretrained("m", torch_dtype=torch.bfloat16).cuda()'
        "  # neuron-migrate: skip[NM1, nm203]\n"
    )


def test_the_line_above_and_a_compound_header_cover_their_statement() -> None:
    source = (
        f"{HEAD}# neuron-migrate: skip[NM101]\nmodel = {LOAD}\n"
        "if torch.cuda.is_available():  # neuron-migrate: skip[NM104]\n    x = torch.zeros(2).cuda()\n"
    )
    out = migrated(source)
    assert 'model = AutoModelForCausalLM.from_pretrained("m", dtype=torch.bfloat16).cuda()\n' in out
    assert 'if torch.cuda.is_available():  # neuron-migrate: skip[NM104]\n    x = torch.zeros(2).to("neuron")\n' in out


def test_only_the_marked_statement_is_affected_and_counts_follow() -> None:
    source = f"{HEAD}a = {LOAD}  # neuron-migrate: skip[NM202]\nb = {LOAD}\n"
    result = migrate_source(source.encode(), "t.py", Options(shim=False))
    assert result.new.decode().endswith(
        'b = AutoModelForCausalLM.from_pretrained("m", dtype=torch.bfloat16).to("neuron")\n'
    )
    assert result.hits == {"NM101": 2, "NM202": 1, "NM203": 2}


def test_a_plain_skip_still_leaves_the_whole_statement() -> None:
    source = f"{HEAD}model = {LOAD}  # neuron-migrate: skip\n"
    assert migrated(source) == source


def test_config_and_launcher_lines_take_listed_rules_too() -> None:
    recipe = (
        "output_dir: out\nfp16: true  # neuron-migrate: skip[NM802]\n"
        "attn_implementation: flash_attention_2  # neuron-migrate: skip[NM802]\n"
    )
    assert migrated(recipe, "r.yaml") == recipe.replace("flash_attention_2", "sdpa")
    assert migrated(recipe.replace("[NM802]", "[NM8]"), "r.yaml") == recipe.replace("[NM802]", "[NM8]")
    launch = "# neuron-migrate: skip[NM817]\ntorchrun t.py --fp16 --evaluation_strategy steps\n"
    assert migrated(launch, "l.sh") == launch.replace("--fp16", "--bf16")


def test_the_marker_parser() -> None:
    assert find_skip("x = 1") is None
    assert find_skip("# neuron-migrate: skip") == Skip()
    assert find_skip("# neuron-migrate: skip[nm305, NM2]") == Skip(("NM305", "NM2"))
    assert find_skip("# neuron-migrate: skip[NM305] and neuron-migrate: skip").everything
    assert Skip(("NM2",)).covers("NM202") and not Skip(("NM2",)).covers("NM305")


def test_a_marker_inside_brackets_still_skips_its_statement() -> None:
    """The traversal passes over brackets and whitespace without visiting inside them, except in a file that has a
    marker: a comment after an opening bracket or a comma is inside such whitespace, and must still count."""
    source = (
        f"{HEAD}model = torch.nn.Linear(2, 2)\nmodel.to(  # neuron-migrate: skip\n"
        '    "cuda",\n)\nx = torch.ones(\n    2,  # neuron-migrate: skip\n    device="cuda",\n)\ny = x.cuda()\n'
    )
    out = migrated(source)
    assert out == source.replace("y = x.cuda()", 'y = x.to("neuron")')
