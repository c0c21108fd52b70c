"""``python -m zerto_rewind`` runs the CLI."""

import sys

from .cli import main

sys.exit(main())
