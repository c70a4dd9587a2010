"""The live co-location testbed (``yarn-adapt testbed``, ``yarn-adapt bench testbed``):
a latency-critical application beside CPU-burning batch work on a real two-node YARN
on one host, each NodeManager pinned to its own CPU, with the co-location guard off
and on. See :mod:`yarn_adapt.testbed.run`.
"""
