"""``python -m reconciler``: see ``reconciler.cli``."""

import sys

from reconciler.cli import main

sys.exit(main())
