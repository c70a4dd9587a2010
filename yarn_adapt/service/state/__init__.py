"""What the service keeps: its SQLite file and the records in it.

- ``sqlitefile``: the service's SQLite file, opened one way for every store in it.
- ``database``: the configurator's file under every table family (integrity, backup
  copies, migrations); ``schema``: its tables, one migration per version.
- ``tables/``: the table families (rounds, proposals, applies, checks, console,
  tokens); ``store``: ``Store``, all of them over one file, and ``SqliteJournal``.
- ``records``: the frozen records the service decides, stores and shows.
- ``statemachine``: which action may move a proposal from which states to which, as
  the store enforces it (pure).
- ``series``: what the console keeps per round (queue usage, realized latency,
  scheduler versions, proposal origins).
- ``usage``: each queue's usage from one observation, as ``series`` rows (pure).
- ``versions``: every scheduler configuration that ran, and what each proposal
  stands for now.
- ``agent_tokens``: the node agents' tokens, one per node.
"""
