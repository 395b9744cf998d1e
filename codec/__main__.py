"""``python -m codec``: the ``modelcodec`` command line."""
from .tools.cli import main

raise SystemExit(main())
