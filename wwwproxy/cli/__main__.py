"""``python -m wwwproxy.cli``: the same as ``wwwproxy``."""

import sys

from wwwproxy.cli import main

sys.exit(main())
