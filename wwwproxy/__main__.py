"""``python -m wwwproxy``."""

import sys

from wwwproxy.cli import main

sys.exit(main())
