"""``yarn-adapt doctor``: is each piece of the co-location half in place?

The same split as the rest of the package: :mod:`.observe` reads (the RM, Redis, the
trace store, the running service's API) into the frozen readings of :mod:`.model`;
:mod:`.checks` decides, piece by piece, from those readings alone (so every check
runs on recorded data in the tests); the CLI (``yarn_adapt/cli/doctor.py``) prints one
line per piece and exits 0 (all ok), 1 (something is not) or 2 (a settings error).
"""
