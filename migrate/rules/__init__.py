"""Rule families, one module each, or one folder each where a family is past ~500 lines (a module per
sub-topic, listed in order in its `__init__`'s `PARTS`): `RULES` (the rules as data) and the `@on` hooks that apply
them.

This package imports none of them; `migrate.rule_families` lists them in hook order.
"""
