"""Resource quality: Tarcil §3.2, equations (1)-(5).

Pressures are fractions in ``[0, 1]``; the encoding works on the paper's two-digit
levels ``0..99`` (:func:`digits`). For a job W the resources are ranked by W's
sensitivity, most sensitive first; a vector is encoded order-preservingly as the
concatenation of its two-digit levels in that rank order (eq. 1), so the resource
W cares most about dominates every comparison.

* target ``T_W = enc(sensitivity, sorted descending) / (100^N - 1)`` (eq. 2): high
  for jobs that need a clean RU.
* RU quality ``U_H = 1 - enc(C_H in W's order) / (100^N - 1)`` (eq. 4), where
  ``C_H`` is the contention the RU sees from the other RUs of its server (eq. 3:
  ``C_i = sum of caused_i over the server's other occupied RUs / (M - 1)``).
* match ``Q`` (eq. 5): ``1 - (U_H - T_W)`` when ``U_H >= T_W`` (the RU is clean
  enough; ``Q = 1`` is the tightest fit), else ``U_H``.

Eq. 5 as printed gives ``T_W - U_H`` below the target, which would rate the most
contended RU (``U_H = 0``) above one just short of the target; the paper's own
reading of the range ("``Q`` within ``[0, T_W]`` degrades the job") is kept with the
monotone form ``U_H``, so more contention never scores better.

With ``sensitivity == caused`` this is exactly the paper's ``t_i = 99 - c_i``
simplification; with a separate sensitivity vector, T_W and the rank order come
from the sensitivity (what the job suffers from), and the RU's contention from what
its neighbours cause.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from yarn_adapt.placement.profiles import N_RESOURCES, InterferenceProfile

FloatArray = npt.NDArray[np.float64]
LEVELS = 99  # the paper's pressure levels 0..99, two decimal digits each
_BASE = 100.0


def digits(pressure: npt.ArrayLike) -> FloatArray:
    """Pressure fractions to the paper's integer levels 0..99 (as floats)."""
    levels: FloatArray = np.rint(np.asarray(pressure, dtype=np.float64) * LEVELS)
    np.clip(levels, 0, LEVELS, out=levels)
    return levels


def encode(levels: npt.ArrayLike) -> float:
    """Eq. (1): ``c_j 100^(N-1) + c_k 100^(N-2) + ... + c_n`` for levels already in
    rank order (e.g. ``[84, 31]`` -> 8431)."""
    total = 0.0
    for level in np.asarray(levels, dtype=np.float64):
        total = total * _BASE + float(level)
    return total


def encoding_scale(n: int = N_RESOURCES) -> float:
    """``10^(2N) - 1``: the largest encoding, which normalises into [0, 1]."""
    return float(_BASE**n - 1)


@dataclass(frozen=True, eq=False)
class QualityKernel:
    """A job's view of RU quality, precomputed once per profile so that scoring
    ``k`` sampled RUs is one matrix-vector product."""

    target: float
    weights: FloatArray  # weight of each resource's level: 100^(N-1-rank)
    scale: float

    @classmethod
    def for_profile(cls, profile: InterferenceProfile) -> QualityKernel:
        sensitivity = digits(profile.sensitivity)
        # Most sensitive first; ties by resource order (a stable, documented order).
        order = np.argsort(-sensitivity, kind="stable")
        n = len(sensitivity)
        weights = np.empty(n)
        weights[order] = _BASE ** np.arange(n - 1, -1, -1, dtype=np.float64)
        scale = encoding_scale(n)
        return cls(float(sensitivity @ weights) / scale, weights, scale)

    def ru_quality(self, contention_levels: FloatArray) -> FloatArray:
        """Eq. (4) for each row of contention levels (k x N, levels 0..99)."""
        quality: FloatArray = 1.0 - (contention_levels @ self.weights) / self.scale
        return quality

    def match(self, contention_levels: FloatArray) -> FloatArray:
        """Eq. (5): the match Q of each RU for this job (see the module docstring)."""
        u = self.ru_quality(contention_levels)
        q: FloatArray = np.where(u >= self.target, 1.0 - (u - self.target), u)
        return q

    def acceptable(self, contention_levels: FloatArray) -> npt.NDArray[np.bool_]:
        """RUs that do not degrade the job: ``U_H >= T_W`` (equivalently
        ``Q >= T_W``)."""
        return self.ru_quality(contention_levels) >= self.target


def target_quality(profile: InterferenceProfile) -> float:
    """Eq. (2): the job's target ``T_W``."""
    return QualityKernel.for_profile(profile).target
