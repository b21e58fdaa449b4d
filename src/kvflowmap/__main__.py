"""``python -m kvflowmap``."""

import sys

from kvflowmap.cli import main

sys.exit(main())
