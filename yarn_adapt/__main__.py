"""``python -m yarn_adapt``: the ``yarn-adapt`` command (as the console script)."""

from yarn_adapt.cli import main

raise SystemExit(main())
