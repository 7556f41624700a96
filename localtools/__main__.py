"""``python -m localtools``: the ``localtools`` command."""

from .cli import main

raise SystemExit(main())
