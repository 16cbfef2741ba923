"""The byte-level prefilter never hides a change: what it skips, no rule would have touched.

The prefilter (`migrate.prefilter`) decides, before parsing, that a file has nothing to migrate.
It is only an optimisation, so a file it drops must come out of the full pipeline unchanged too.
Each file of the project's own corpus (every Python fixture and its expected output, the notebooks,
the examples, and every rule's documented `before` with only that rule on) is migrated twice, with
the prefilter and without it (`Options(prefilter=False)` parses every file), and the two results
must be the same.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from migrate.dispatch import migrate_file
from migrate.options import Options
from migrate.prefilter import docstring_lines, may_need_migration, only_forwarding_generate
from migrate.registry import Selection
from migrate.results import FileResult
from migrate.rule_families import all_rules
from migrate.rules.hub_kernels import EXAMPLE_KERNELS

ROOT = Path(__file__).resolve().parents[2]
FILES = sorted(
    p for folder in ("fixtures", "examples") for p in (ROOT / folder).rglob("*") if p.suffix in (".py", ".ipynb")
)
EXAMPLES = [rule for rule in all_rules() if rule.language == "python"]
KERNELS = tuple(EXAMPLE_KERNELS.items())


def outcome(result: FileResult) -> tuple[object, ...]:
    """What a user sees of a migration: status, new bytes, rewrites per rule, TODOs and notes."""
    return result.status, result.new, dict(result.hits), result.todos, result.warnings, result.error


def assert_same_without_prefilter(data: bytes, name: str, options: Options) -> None:
    filtered = migrate_file(data, name, options)
    unfiltered = migrate_file(data, name, Options(**{**vars(options), "prefilter": False}))
    assert outcome(filtered) == outcome(unfiltered), f"{name}: the prefilter changes the migration"


def test_the_corpus_is_the_projects_own_fixtures():
    assert len(FILES) >= 100 and any(p.suffix == ".ipynb" for p in FILES)
    assert len(EXAMPLES) >= 100


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(ROOT)) for p in FILES])
def test_a_fixture_migrates_the_same_without_the_prefilter(path: Path):
    assert_same_without_prefilter(path.read_bytes(), str(path), Options(shim=False))


@pytest.mark.parametrize("rule", EXAMPLES, ids=[r.id for r in EXAMPLES])
def test_a_rule_example_passes_the_prefilter_with_only_its_rule_on(rule):
    """The smallest file each rule changes: its own token must be in the prefilter, not another rule's."""
    options = Options(selection=Selection(select=(rule.id,)), shim=False, neuron_kernels=KERNELS)
    assert may_need_migration(rule.before.encode()), f"{rule.id}: its example is skipped before parsing"
    assert_same_without_prefilter(rule.before.encode(), "example.py", options)


def test_an_image_size_in_library_code_is_not_a_pipeline_argument():
    """`width = image.shape[-1]` is everywhere in model code; only diffusers' rules read `width=`, in diffusers files."""
    library = (
        b"def resize(image):\n    height, width = image.shape[-2:]\n    width = image.shape[-1]\n    return height\n"
    )
    assert not may_need_migration(library)
    script = b"from diffusers import FluxPipeline\nfor size in (512, 768):\n    pipe(prompt, height=size, width=size)\n"
    assert may_need_migration(script)


def test_a_doctest_mentioning_cuda_is_prose():
    assert not may_need_migration(b'def f():\n    """\n    >>> model.to("cuda")\n    """\n')
    assert may_need_migration(b'model.to("cuda")\n')


def test_a_token_inside_a_docstring_is_prose():
    """A library docstring's example (`model.generate(...)` without `>>>`) sends no file to libcst; the same call
    in code does, and so does one on a docstring's closing line, which code may share."""
    library = (
        b'def f(model):\n    """Generate.\n\n    ids = model.generate(inputs, max_length=30)\n    """\n    return 1\n'
    )
    tree = ast.parse(library)
    assert may_need_migration(library) and not may_need_migration(library, docstring_lines(tree))
    assert migrate_file(library, "lib.py", Options(shim=False)).status == "unchanged"
    code = library.replace(b"return 1", b"return model.generate(inputs)")
    assert may_need_migration(code, docstring_lines(ast.parse(code)))
    assert migrate_file(code, "lib.py", Options(shim=False)).status == "changed"
    shared = b'def f(model):\n    """Generate.\n\n    """; model.to("cuda")\n'
    assert may_need_migration(shared, docstring_lines(ast.parse(shared)))


_FORWARDING = b'''class Captioner:
    def generate(self, pixel_values, **generate_kwargs):
        """Caption images.

        inputs = processor(images, return_tensors="pt")
        """
        embeds = self.vision(pixel_values)
        return self.text_decoder.generate(
            encoder_hidden_states=embeds, pad_token_id=self.config.pad_token_id, **generate_kwargs
        )

    def speak(self, embeds, generation_config):
        return self.decoder.generate(embeds, generation_config=generation_config)
'''
_MOVED = b"embeds.to(self.device), generation_config=generation_config)\n        self.hf_device_map = None\n"
_TOKENIZED = b"""    def ask(self, prompt, generation_config):
        inputs = self.processor(prompt, return_tensors="pt")
        return self.decoder.generate(**inputs, generation_config=generation_config)
"""


@pytest.mark.parametrize(
    ("source", "status"),
    [
        (_FORWARDING, "unchanged"),
        # NM302 adds a static cache to a call that does not forward its settings
        (_FORWARDING.replace(b", **generate_kwargs", b""), "changed"),
        # NM301 drops the move of a generate input where accelerate's hooks (a `device_map`) move it back
        (_FORWARDING.replace(b"embeds, generation_config=generation_config)\n", _MOVED), "changed"),
        # NM303 pads a prompt tokenized in code, in a file that sets a pad token
        (_FORWARDING + _TOKENIZED, "changed"),
        # another token on the call's line
        (_FORWARDING.replace(b"generate(embeds,", b'generate(embeds.to("cuda"),'), "changed"),
    ],
    ids=["forwarding", "not-forwarding", "device-map", "tokenized-prompt", "cuda-on-the-line"],
)
def test_library_code_forwarding_its_settings_to_generate_is_not_parsed(source: bytes, status: str):
    """`self.text_decoder.generate(..., **generate_kwargs)` in a model class passes the byte-level prefilter, but no
    rule rewrites it: CPython's tree shows it forwards its settings, so libcst never parses the file. A call a rule
    does rewrite keeps the file; every variant migrates as it does without the prefilter."""
    tree = ast.parse(source)
    assert may_need_migration(source, docstring_lines(tree))
    assert only_forwarding_generate(source, docstring_lines(tree), tree) is (status == "unchanged")
    assert migrate_file(source, "modeling.py", Options(shim=False)).status == status
    assert_same_without_prefilter(source, "modeling.py", Options(shim=False))
