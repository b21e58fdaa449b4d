"""Which analysed root a step of a finding's path lies in (every report
format gives steps the way it gives the finding's own file)."""

from __future__ import annotations

import os
from collections.abc import Mapping

from kvflowmap.check.model import Finding, Step


def step_root(step: Step, finding: Finding, roots: Mapping[str, str]) -> str:
    """The label of the root ``step``'s file lies in: the finding's when the
    file is the same, else the first root (by label) holding that file; ""
    when none does. ``roots``: label -> directory."""
    if step.file == finding.file:
        return finding.root
    for label in sorted(roots):
        if os.path.isfile(os.path.join(roots[label], step.file)):
            return label
    return ""
