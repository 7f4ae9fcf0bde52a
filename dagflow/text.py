"""Characters no generated file can carry: a line break would start a new submit command or DAG line."""

from __future__ import annotations

import re

# C0 and C1 controls, DEL, and the Unicode line and paragraph separators.
CONTROL_CHARACTERS = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
