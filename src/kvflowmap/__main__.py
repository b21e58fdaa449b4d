"""``python -m kvflowmap``."""

from kvflowmap.cli import run

run()
