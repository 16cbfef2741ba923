"""Every rule's documented before/after example is what the engine really does."""

from __future__ import annotations

import pytest

from migrate.dispatch import migrate_file
from migrate.docs import FAMILIES
from migrate.engine import Options, migrate_source
from migrate.registry import Selection, all_rules

RULES = all_rules()
SUFFIX = {"python": "py", "yaml": "yaml", "shell": "sh"}


@pytest.mark.parametrize("rule", RULES, ids=[r.id for r in RULES])
def test_example(rule):
    options = Options(selection=Selection(select=(rule.id,)), shim=False)
    name = f"example.{SUFFIX[rule.language]}"
    result = migrate_file(rule.before.encode(), name, options)
    assert result.status == "changed", result.error
    assert result.new.decode() == rule.after
    assert result.hits[rule.id] >= 1 or rule.todo
    again = migrate_file(result.new, name, options)
    assert again.status == "unchanged"


def test_rule_ids_are_in_their_family_ranges():
    for rule in RULES:
        assert rule.family in FAMILIES
        assert rule.todo == (rule.family == "NM9") or rule.family == "NM8"  # NM8xx: config rewrites and TODOs
        assert rule.summary and rule.rationale


def run(src: str, **kw) -> str:
    result = migrate_source(src.encode(), "t.py", Options(shim=kw.pop("shim", False), **kw))
    assert result.error is None
    return result.new.decode() if result.new else src


def test_prose_is_never_rewritten():
    src = 'import torch\nprint("moving to cuda")  # cuda\nlogger.info("cuda %s", x)\nd = {"cuda": 1}\n'
    assert run(src) == src


def test_alias_imports_are_resolved():
    src = "import torch as T\nfrom torch import cuda\nT.cuda.empty_cache()\ncuda.synchronize()\n"
    assert run(src) == "import torch as T\nfrom torch import cuda\nT.neuron.empty_cache()\nT.accelerator.synchronize()\n"


def test_from_import_only_adds_import_torch():
    src = "from torch.cuda import is_available\nif is_available():\n    pass\n"
    assert run(src) == "import torch\nfrom torch.cuda import is_available\nif torch.neuron.is_available():\n    pass\n"


def test_generate_input_kept_when_also_used_in_forward():
    src = (
        'def f(model, tok):\n'
        '    inputs = tok("hi", return_tensors="pt").to("cuda")\n'
        '    loss = model(**inputs).loss\n'
        '    return model.generate(**inputs, max_new_tokens=2)\n'
    )
    out = run(src)
    assert 'inputs = tok("hi", return_tensors="pt").to("neuron")' in out
    assert 'cache_implementation="static"' in out


def test_multi_process_device_map_is_per_rank():
    src = 'import torch.distributed as dist\ndist.init_process_group("nccl")\nm = AutoModel.from_pretrained("x", device_map="auto")\n'
    out = run(src)
    assert "import os\n" in out
    assert "device_map={\"\": f\"neuron:{int(os.environ.get('LOCAL_RANK', 0))}\"}" in out
    assert 'init_process_group("neuron")' in out


def test_device_map_dict_keeps_index_expression():
    src = 'm = AutoModel.from_pretrained("x", device_map={"": Accelerator().process_index})\n'
    assert 'device_map={"": f"neuron:{Accelerator().process_index}"}' in run(src)


def test_skip_comment_on_line():
    src = 'import torch\nx = torch.zeros(1).cuda()  # neuron-migrate: skip\ny = torch.zeros(1).cuda()\n'
    out = run(src)
    assert 'x = torch.zeros(1).cuda()  # neuron-migrate: skip' in out
    assert 'y = torch.zeros(1).to("neuron")' in out


def test_skip_file():
    src = '# neuron-migrate: skip-file\nimport torch\nx = torch.zeros(1).cuda()\n'
    assert migrate_source(src.encode(), "t.py").status == "skipped"


def test_todo_is_valid_python_and_not_duplicated():
    src = "import torch\n\ndef f():\n    with torch.cuda.stream(s):\n        pass\n"
    out = run(src)
    assert out.count("TODO(neuron-migrate NM903)") == 1
    compile(out, "t.py", "exec")
    assert run(out) == out


def test_shim_added_once_after_docstring_and_future():
    src = '"""Doc."""\nfrom __future__ import annotations\n\nimport torch\n\nif __name__ == "__main__":\n    torch.zeros(1).cuda()\n'
    out = run(src, shim=True)
    assert out.startswith('"""Doc."""\nfrom __future__ import annotations\n\nimport neuroncompat\nimport torch\n')
    assert run(out, shim=True) == out


def test_library_module_gets_no_shim():
    src = "import torch\n\ndef to_dev(x):\n    return x.cuda()\n"
    assert "neuroncompat" not in run(src, shim=True)


def test_select_and_ignore_prefixes():
    src = 'import torch\nx = torch.zeros(1).cuda()\ntorch.cuda.empty_cache()\n'
    out = run(src, selection=Selection(ignore=("NM104",)))
    assert "torch.cuda.empty_cache()" in out and '.to("neuron")' in out
    out = run(src, selection=Selection(select=("NM1",), ignore=("NM101",)))
    assert ".cuda()" in out and "torch.neuron.empty_cache()" in out
