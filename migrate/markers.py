"""The comment markers the codemod reads and writes, shared by every file kind's migrator."""

from __future__ import annotations

import re

SKIP_MARKER = "neuron-migrate: skip"  # on a statement: leave it alone
SKIP_FILE = re.compile(rb"#\s*neuron-migrate:\s*skip-file")  # anywhere: leave the file alone
TODO_PREFIX = "# TODO(neuron-migrate "  # what every TODO the codemod writes starts with
