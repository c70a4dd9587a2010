"""The harness's branch of the project error tree."""

from __future__ import annotations

from yarn_adapt.errors import YarnError


class MiniClusterError(YarnError):
    """The real-YARN mini cluster could not be prepared, started or driven.

    A subclass of :class:`~yarn_adapt.errors.YarnError` because every failure here is
    a failure to get a working ResourceManager/NodeManager/JobHistory to talk to.
    """
