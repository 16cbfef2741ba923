"""A usage or input error written in the report format the user asked for.

Schema of the JSON form: `docs/error.schema.json` (`{"tool", "error", "exit_code"}`). Every format also
writes the message on stderr, `TOOL: message`, for the person at the terminal; the report formats put a
document on stdout that a tool reading that format can parse: JSON, SARIF (a run that did not succeed, with
the message as its notification), a GitHub `::error` annotation, a markdown line.
"""

from __future__ import annotations

import json

import click

SARIF_SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"


def error_document(tool: str, message: str, exit_code: int) -> dict[str, object]:
    """The JSON form: what went wrong, which tool says so, and the status it exits with."""
    return {"tool": tool, "error": message, "exit_code": exit_code}


def _sarif(tool: str, message: str, exit_code: int) -> dict[str, object]:
    return {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {"driver": {"name": tool}},
                "invocations": [
                    {
                        "executionSuccessful": False,
                        "exitCode": exit_code,
                        "toolExecutionNotifications": [{"level": "error", "message": {"text": message}}],
                    }
                ],
                "results": [],
            }
        ],
    }


def render_error(tool: str, message: str, fmt: str, exit_code: int) -> str:
    """What goes to stdout for an error in `fmt`; nothing for text (the message goes to stderr)."""
    if fmt == "json":
        return json.dumps(error_document(tool, message, exit_code), indent=2, ensure_ascii=False) + "\n"
    if fmt == "sarif":
        return json.dumps(_sarif(tool, message, exit_code), indent=2, ensure_ascii=False) + "\n"
    if fmt == "github":
        # imported here: the GitHub writer brings the report model's dataclasses, which no other run needs at start-up
        from neuroncompat_report.github import escape

        return f"::error title={tool}::{escape(message)}\n"
    if fmt == "markdown":
        return f"**{tool}: error.** {message}\n"
    return ""


def write_error(tool: str, message: str, fmt: str, exit_code: int) -> None:
    """The message on stderr, and the format's document on stdout."""
    click.echo(f"{tool}: {message}", err=True)
    click.echo(render_error(tool, message, fmt, exit_code), nl=False)
