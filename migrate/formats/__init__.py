"""Report formats, one module each: `text` (diff + summary), `json`, `markdown`, `github`, `sarif`.

Each module's `render(results, mode)` returns the whole report as a string; `mode` is `diff`,
`check` or `write`. Files come in `report.ordered` order and findings in line order, so the
same tree always gives the same bytes (the snapshot tests rely on it).
"""

FORMATS = ("text", "json", "markdown", "github", "sarif")
