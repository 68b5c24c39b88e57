"""``python -m statekit.cli``: the ``statekit`` command (``python -m statekit`` runs it too)."""

import sys

from statekit.cli._main import main

sys.exit(main())
