"""Each command's published JSON schema is the one its report types generate (`neuroncompat_report.schema`).

A field added to a report is added to its types; the committed schema file then differs from the generated one
and this test says how to regenerate it, so the schema a tool validates against cannot lag behind the report.
The reports themselves are validated against these files where the commands' JSON is tested (neuron-migrate's in
`tests/migrate/test_formats.py`, simulate's in `tests/test_simulate_findings.py` and its neighbours, check's in
`tests/test_check.py`).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Literal

if sys.version_info >= (3, 11):
    from typing import NotRequired, TypedDict
else:  # typing's TypedDict knows NotRequired from 3.11; torch installs typing_extensions
    from typing_extensions import NotRequired, TypedDict

import jsonschema
import pytest

from migrate.formats.json_types import PUBLISHED as MIGRATE
from neuroncompat.check.report_types import PUBLISHED as CHECK
from neuroncompat.simulate.report_types import PUBLISHED as SIMULATE
from neuroncompat_report.schema import Field, Published, document, text

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("published", [MIGRATE, SIMULATE, CHECK], ids=lambda p: p.path)
def test_the_committed_schema_is_the_one_its_types_generate(published: Published) -> None:
    committed = (ROOT / published.path).read_text(encoding="utf-8")
    assert committed == text(published), (
        f"{published.path} differs from its types: python -m neuroncompat_report.schema . "
        f"{published.record.__module__}:PUBLISHED"
    )
    jsonschema.Draft202012Validator.check_schema(json.loads(committed))


class _Done(TypedDict):
    """A step that ran."""

    status: Literal["done"]
    seconds: Annotated[float, Field("How long it took.", minimum=0)]
    note: NotRequired[str]


class _Skipped(TypedDict):
    status: Literal["skipped"]


class _Report(TypedDict):
    steps: list[_Done | _Skipped]
    where: Annotated[str | None, Field("`path:line`, or null.")]


def test_a_record_becomes_a_closed_object_and_a_union_of_records_one_of_them() -> None:
    schema = document(Published(_Report, "report.json", "urn:report", "a report"))
    validator = jsonschema.Draft202012Validator(schema)
    validator.validate({"steps": [{"status": "done", "seconds": 1.5}, {"status": "skipped"}], "where": None})
    assert schema["$defs"]["_Done"]["properties"]["seconds"] == {
        "type": "number",
        "minimum": 0,
        "description": "How long it took.",
    }
    assert schema["$defs"]["_Done"]["required"] == ["status", "seconds"]  # `note` is NotRequired
    wrong = [
        {"steps": [{"status": "done"}], "where": "a.py:1"},  # seconds is required
        {"steps": [{"status": "done", "seconds": -1}], "where": "a.py:1"},  # below its minimum
        {"steps": [{"status": "skipped", "seconds": 1}], "where": None},  # not a field of a skipped step
        {"steps": [], "where": 3},  # a string or null
        {"steps": []},  # where is required
    ]
    for report in wrong:
        assert not validator.is_valid(report), report
