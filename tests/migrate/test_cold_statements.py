"""Statements holding none of the file's family tokens are not visited, and come out exactly as written (issue 39).

Every fixture and rule example migrates the same with them skipped as with every statement visited
(`tests/migrate/test_prefilter.py` compares with the prefilter off, which visits everything); these tests show
what is skipped and that a statement a rule acts on through an imported alias is not.
"""

from __future__ import annotations

import ast

import libcst as cst

from migrate.cold_statements import cold_statements, statement_spans
from migrate.engine import migrate_source
from migrate.rule_families import active_families, statement_tokens

SOURCE = b"""import torch
from torch.cuda.amp import autocast as ac


def untouched(a,b):   # odd spacing, kept as written
    return  a+b  if a else  ( b )


def amp_step(model, x):
    with ac():
        return model(x)


def train(model, batch):
    return model(batch.to("cuda"))
"""


def _cold_names(source: bytes, functions_only: bool = False) -> set[str]:
    module = cst.parse_module(source)
    tokens = statement_tokens(active_families(source), source)
    assert tokens is not None
    spans = statement_spans(ast.parse(source).body)
    cold = cold_statements(module, source, spans, tokens, set(), functions_only)
    return {s.name.value for s in module.body if id(s) in cold and type(s) is cst.FunctionDef}


def test_a_statement_without_tokens_is_skipped_and_kept_exactly():
    assert _cold_names(SOURCE) == {"untouched"}  # `amp_step` reads `ac`, bound by an import with a token
    result = migrate_source(SOURCE, "train.py")
    assert result.status == "changed" and result.new is not None
    new = result.new.decode()
    assert "def untouched(a,b):   # odd spacing, kept as written\n    return  a+b  if a else  ( b )\n" in new
    assert 'with torch.autocast("neuron", dtype=torch.bfloat16):' in new  # through the alias
    assert 'batch.to("neuron")' in new


def test_a_file_with_a_family_reading_every_statement_has_none_skipped():
    # vLLM engines are named by `llm = LLM(...)`, which holds no token of the generate family
    source = SOURCE + b"from vllm import LLM\nllm = LLM(model='m')\n"
    assert statement_tokens(active_families(source), source) is None


def test_with_the_generate_data_flow_only_whole_functions_are_skipped():
    source = (
        SOURCE
        + b"\nclass Holder:\n    size = 3\n\n    def plain(self):\n        return self.size\n\nout = model.generate(**inputs)\n"
    )
    assert _cold_names(source, functions_only=True) == {"untouched"}
    module = cst.parse_module(source)
    tokens = statement_tokens(active_families(source), source)
    assert tokens is not None
    cold = cold_statements(module, source, statement_spans(ast.parse(source).body), tokens, set(), True)
    holder = next(s for s in module.body if type(s) is cst.ClassDef)
    assert id(holder) not in cold  # its `size = 3` counts as a use in the module's scope
    assert id(holder.body.body[1]) in cold  # `plain` is a scope of its own


def test_a_statement_that_only_reads_a_device_is_skipped():
    # library code: `device=x.device` and `x.device` switch the device family on but no hook of it changes them;
    # a device literal, `.to(`, `device_map` or a `pipeline` call is where its rewrites are
    source = b"""import torch


def make_mask(x):
    return torch.ones(x.shape, device=x.device)


def load(name):
    return AutoModel.from_pretrained(name, device_map="auto")


def place(model, rank):
    return model.to(rank)
"""
    assert _cold_names(source) == {"make_mask"}
    result = migrate_source(source, "lib.py")
    assert result.new is not None and b'device_map="neuron"' in result.new


def test_casts_and_names_that_only_contain_a_token_are_skipped():
    # model code: a dtype cast, `rotate_half`, `num_samples`, a kernel size and `hf_device_map` switch the device,
    # precision and hub-kernel families on, but no hook of theirs changes them; an index or a rank given to `.to(`,
    # on the next line too, `.half()` and `use_kernels=True` are what those families act on
    source = b"""import torch


def cast(attn_weights, value, num_samples, hf_device_map):
    out = rotate_half(attn_weights.to(value.dtype)) * num_samples
    return torch.nn.Conv1d(2, 2, kernel_size=3)(out), hf_device_map


def place(model, local_rank):
    return model.to(
        local_rank
    )


def first(model):
    return model.to(0).half()


def load(name):
    return AutoModel.from_pretrained(name, use_kernels=True)
"""
    assert _cold_names(source) == {"cast"}
    result = migrate_source(source, "lib.py")
    assert result.new is not None
    assert b'model.to(\n        "neuron"\n    )' in result.new
    assert b'model.to("neuron:0").to(torch.bfloat16)' in result.new
    assert [w.rule for w in result.warnings] == ["NM212"]
