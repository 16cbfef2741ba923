"""Rule families, one module each: `RULES` (the rules as data) and the `@on` hooks that apply them.

This package imports none of them; `migrate.rule_families` lists them in hook order.
"""
