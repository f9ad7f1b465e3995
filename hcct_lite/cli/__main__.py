"""``python -m hcct_lite.cli``: the same as ``hcct-lite``."""

from . import main

raise SystemExit(main())
