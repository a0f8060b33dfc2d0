"""``python -m primenb.engine RUN_DIR``: train the run described by RUN_DIR/configs/resolved.json."""

from __future__ import annotations

import sys

from primenb.engine.runner import main

if __name__ == "__main__":
    sys.exit(main())
