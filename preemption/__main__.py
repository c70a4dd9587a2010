"""``python -m preemption run|restore|discover --config FILE``: the node agent alone
(the same commands as ``yarn-adapt agent``, without loading the rest of the CLI)."""

import sys

from preemption.cli import main

sys.exit(main())
