"""What the service keeps: its SQLite file and the records in it.

- ``sqlitefile``: the service's SQLite file, opened one way for every store in it.
- ``store``: the configurator's SQLite store and ``SqliteJournal``.
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
