"""``python -m reconciler``: see ``reconciler.cli``."""

import sys

from reconciler.cli import main
from reconciler.collector import skip_final_collection

code = main()
if sys.argv[1:2] != ["run"]:
    skip_final_collection()
sys.exit(code)
