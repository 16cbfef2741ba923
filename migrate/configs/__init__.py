"""Migrators for the files around the Python: accelerate/recipe YAML configs and shell launchers.

They share `edits` (span edits and TODO comments spliced into the original text) and
`catalog` (the NM8xx rule records); `migrate.notebook` reuses the shell rules for `!` magics.
"""
