"""``python -m zerto_rewind.sim``."""

import sys

from zerto_rewind.sim.app import main

if __name__ == "__main__":
    sys.exit(main())
