"""Charts as server-rendered SVG (pure: series in, markup out). No script, no
inline style, no asset from anywhere: the page's Content-Security-Policy allows
none, and the page must work on an air-gapped cluster.

Two kinds cover what the console draws, and any later section can use them:

* :func:`line_chart` -- numeric x (a round), one or more :class:`Series` drawn as
  lines through dots, gaps where a value is unknown, vertical :class:`Event`
  markers (an apply), optional dashed reference series (a guarantee).
* :func:`paired_chart` -- categorical x (a proposal), two values per category
  (predicted and realised), joined by a line so the miss is visible.

Every data point is a ``<circle class="pt">`` carrying ``data-series``, ``data-x``
and ``data-y`` (the exact value) and a ``<title>`` tooltip in words, so a browser
test reads the plotted values and a person reads them by hovering. Colours come
from classes (``s0``...``s5``) styled in ``static/style.css``.

A time axis (``y_steps=time_step``, ``y_format=duration``) ticks at round
durations -- 30 s, 5 m, 15 m, 1 h -- and says each in words, like the tooltips.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape

from markupsafe import Markup

WIDTH = 560
HEIGHT = 220
MARGIN_LEFT = 56
MARGIN_RIGHT = 16
MARGIN_TOP = 28
MARGIN_BOTTOM = 34
PALETTE = 6

Formatter = Callable[[float], str]
Stepper = Callable[[float], float]

TIME_STEPS_S = (
    1, 2, 5, 10, 15, 20, 30, 60, 120, 300, 600, 900, 1200, 1800, 3600, 7200, 10800, 21600,
    43200, 86400,
)  # fmt: skip
"""Tick steps of a time axis: seconds, minutes, hours, a day."""


@dataclass(frozen=True)
class Series:
    name: str
    points: tuple[tuple[float, float | None], ...]
    dashed: bool = False  # a reference (a configured guarantee), no dots
    notes: tuple[str, ...] = ()  # per point, appended to its tooltip


@dataclass(frozen=True)
class Event:
    x: float
    label: str


@dataclass(frozen=True)
class Pair:
    category: str
    series: str
    first: float | None  # predicted
    second: float | None  # realised
    note: str = ""


def _nice_step(span: float, ticks: int = 4) -> float:
    if span <= 0 or not math.isfinite(span):
        return 1.0
    raw = span / ticks
    power: float = 10.0 ** math.floor(math.log10(raw))
    for factor in (1, 2, 2.5, 5, 10):
        if factor * power >= raw:
            return factor * power
    return 10 * power


def time_step(span: float, ticks: int = 4) -> float:
    """A tick step of a time axis (seconds): the smallest round duration that covers
    ``span`` in about ``ticks`` steps."""
    if span <= 0 or not math.isfinite(span):
        return 1.0
    raw = span / ticks
    found = next((step for step in TIME_STEPS_S if step >= raw), None)
    return float(found) if found is not None else 86400.0 * math.ceil(raw / 86400.0)


def _y_scale(
    values: Sequence[float], floor_zero: bool = True, steps: Stepper = _nice_step
) -> tuple[float, float, float]:
    """(low, high, step) of a y axis with round ticks covering ``values``."""
    top = max(values) if values else 1.0
    low = 0.0 if floor_zero else min(values)
    step = steps(top - low if top > low else max(top, 1.0))
    high = math.ceil(top / step) * step if top > 0 else step
    return low, max(high, low + step), step


class _Frame:
    """Data coordinates to SVG pixels."""

    def __init__(self, x0: float, x1: float, y0: float, y1: float, width: int, height: int):
        self.x0, self.x1, self.y0, self.y1 = x0, x1, y0, y1
        self.left, self.right = MARGIN_LEFT, width - MARGIN_RIGHT
        self.top, self.bottom = MARGIN_TOP, height - MARGIN_BOTTOM

    def x(self, value: float) -> float:
        span = self.x1 - self.x0 or 1.0
        return round(self.left + (value - self.x0) / span * (self.right - self.left), 1)

    def y(self, value: float) -> float:
        span = self.y1 - self.y0 or 1.0
        return round(self.bottom - (value - self.y0) / span * (self.bottom - self.top), 1)


def _open(chart_id: str, title: str, width: int, height: int) -> list[str]:
    return [
        f'<svg id="{escape(chart_id)}" class="chart" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" role="img" aria-label="{escape(title)}" '
        'xmlns="http://www.w3.org/2000/svg">',
        f"<title>{escape(title)}</title>",
    ]


def _y_axis(frame: _Frame, step: float, y_format: Formatter) -> list[str]:
    parts = []
    value = frame.y0
    while value <= frame.y1 + step / 1000:
        y = frame.y(value)
        parts.append(
            f'<line class="grid" x1="{frame.left}" y1="{y}" x2="{frame.right}" y2="{y}"/>'
            f'<text class="tick" x="{frame.left - 6}" y="{y + 4}" text-anchor="end">'
            f"{escape(y_format(value))}</text>"
        )
        value += step
    return parts


def _legend(names: Sequence[tuple[str, int, bool]], frame: _Frame) -> list[str]:
    parts, x = [], float(frame.left)
    for name, colour, dashed in names:
        kind = "dash" if dashed else "swatch"
        parts.append(
            f'<line class="{kind} s{colour}" x1="{x}" y1="12" x2="{x + 14}" y2="12"/>'
            f'<text class="legend" x="{x + 18}" y="16">{escape(name)}</text>'
        )
        x += 26 + 7 * len(name)
    return parts


def _empty(chart_id: str, title: str, message: str, width: int, height: int) -> Markup:
    parts = _open(chart_id, title, width, height)
    parts.append(
        f'<text class="empty" x="{width / 2}" y="{height / 2}" text-anchor="middle">'
        f"{escape(message)}</text></svg>"
    )
    return Markup("".join(parts))


def line_chart(
    chart_id: str,
    title: str,
    series: Sequence[Series],
    *,
    events: Sequence[Event] = (),
    y_format: Formatter = lambda v: f"{v:g}",
    y_tick: Formatter | None = None,
    y_steps: Stepper = _nice_step,
    x_format: Formatter = lambda v: f"{v:g}",
    x_name: str = "round",
    y_max: float | None = None,
    empty: str = "no data yet",
    width: int = WIDTH,
    height: int = HEIGHT,
) -> Markup:
    """Lines through dots over a numeric x; ``None`` values leave a gap. Tooltips
    say a value with ``y_format``, ticks with ``y_tick`` (default the same)."""
    xs = [x for s in series for x, _ in s.points]
    ys = [y for s in series for _, y in s.points if y is not None]
    if not ys:
        return _empty(chart_id, title, empty, width, height)
    x0, x1 = min(xs), max(xs)
    if x0 == x1:
        x0, x1 = x0 - 1, x1 + 1
    low, high, step = _y_scale([*ys, *([y_max] if y_max is not None else [])], steps=y_steps)
    frame = _Frame(x0, x1, low, high, width, height)
    parts = _open(chart_id, title, width, height)
    parts += _y_axis(frame, step, y_tick or y_format)
    parts += _x_axis(frame, xs, x_format, x_name)
    parts += _events(frame, events)
    legend = []
    for index, one in enumerate(series):
        colour = index % PALETTE
        legend.append((one.name, colour, one.dashed))
        parts += _polyline(frame, one, colour)
        if not one.dashed:
            parts += _dots(frame, one, colour, y_format, x_name)
    parts += _legend(legend, frame)
    parts.append("</svg>")
    return Markup("".join(parts))


def _x_axis(frame: _Frame, xs: Sequence[float], x_format: Formatter, x_name: str) -> list[str]:
    distinct = sorted(set(xs))
    every = max(1, math.ceil(len(distinct) / 8))
    parts = [
        f'<line class="axis" x1="{frame.left}" y1="{frame.bottom}" '
        f'x2="{frame.right}" y2="{frame.bottom}"/>'
    ]
    for value in distinct[::every]:
        parts.append(
            f'<text class="tick" x="{frame.x(value)}" y="{frame.bottom + 14}" '
            f'text-anchor="middle">{escape(x_format(value))}</text>'
        )
    parts.append(
        f'<text class="axis-name" x="{frame.right}" y="{frame.bottom + 28}" '
        f'text-anchor="end">{escape(x_name)}</text>'
    )
    return parts


def _events(frame: _Frame, events: Sequence[Event]) -> list[str]:
    parts = []
    for event in events:
        if not frame.x0 <= event.x <= frame.x1:
            continue
        x = frame.x(event.x)
        parts.append(
            f'<g class="event" data-x="{event.x:g}" data-label="{escape(event.label)}">'
            f'<line x1="{x}" y1="{frame.top}" x2="{x}" y2="{frame.bottom}"/>'
            f'<text x="{x + 3}" y="{frame.top + 10}">{escape(event.label)}</text>'
            f"<title>{escape(event.label)}</title></g>"
        )
    return parts


def _polyline(frame: _Frame, series: Series, colour: int) -> list[str]:
    """One ``<polyline>`` per run of known values."""
    runs: list[list[str]] = [[]]
    for x, y in series.points:
        if y is None:
            runs.append([])
        else:
            runs[-1].append(f"{frame.x(x)},{frame.y(y)}")
    kind = "ref" if series.dashed else "line"
    return [
        f'<polyline class="{kind} s{colour}" points="{" ".join(run)}"/>'
        for run in runs
        if len(run) > 1
    ]


def _dots(
    frame: _Frame, series: Series, colour: int, y_format: Formatter, x_name: str
) -> list[str]:
    parts = []
    for index, (x, y) in enumerate(series.points):
        if y is None:
            continue
        note = series.notes[index] if index < len(series.notes) else ""
        tip = f"{series.name}, {x_name} {x:g}: {y_format(y)}" + (f" ({note})" if note else "")
        parts.append(
            f'<circle class="pt s{colour}" cx="{frame.x(x)}" cy="{frame.y(y)}" r="3" '
            f'data-series="{escape(series.name)}" data-x="{x:g}" data-y="{y!r}">'
            f"<title>{escape(tip)}</title></circle>"
        )
    return parts


def paired_chart(
    chart_id: str,
    title: str,
    pairs: Sequence[Pair],
    *,
    names: tuple[str, str] = ("predicted", "realised"),
    y_format: Formatter = lambda v: f"{v:g}",
    y_steps: Stepper = _nice_step,
    empty: str = "no data yet",
    width: int = WIDTH,
    height: int = HEIGHT,
) -> Markup:
    """Per category, the first value (hollow) and the second (filled), joined."""
    values = [v for p in pairs for v in (p.first, p.second) if v is not None]
    if not values:
        return _empty(chart_id, title, empty, width, height)
    categories = list(dict.fromkeys(p.category for p in pairs))
    groups = list(dict.fromkeys(p.series for p in pairs))
    low, high, step = _y_scale(values, steps=y_steps)
    frame = _Frame(-0.5, len(categories) - 0.5, low, high, width, height)
    parts = _open(chart_id, title, width, height)
    parts += _y_axis(frame, step, y_format)
    parts.append(
        f'<line class="axis" x1="{frame.left}" y1="{frame.bottom}" '
        f'x2="{frame.right}" y2="{frame.bottom}"/>'
    )
    for index, category in enumerate(categories):
        parts.append(
            f'<text class="tick" x="{frame.x(index)}" y="{frame.bottom + 14}" '
            f'text-anchor="middle">{escape(category)}</text>'
        )
    spread = 0.5 / max(1, len(groups))
    for pair in pairs:
        group_index = groups.index(pair.series)
        x = categories.index(pair.category) + (group_index - (len(groups) - 1) / 2) * spread
        parts += _pair(frame, pair, x, group_index % PALETTE, names, y_format)
    legend = [(f"{g}: {names[0]} ○ {names[1]} ●", i % PALETTE, False) for i, g in enumerate(groups)]
    parts += _legend(legend, frame)
    parts.append("</svg>")
    return Markup("".join(parts))


def _pair(
    frame: _Frame,
    pair: Pair,
    x: float,
    colour: int,
    names: tuple[str, str],
    y_format: Formatter,
) -> list[str]:
    px = frame.x(x)
    parts = []
    if pair.first is not None and pair.second is not None:
        parts.append(
            f'<line class="miss s{colour}" x1="{px}" y1="{frame.y(pair.first)}" '
            f'x2="{px}" y2="{frame.y(pair.second)}"/>'
        )
    for kind, value in ((names[0], pair.first), (names[1], pair.second)):
        if value is None:
            continue
        hollow = " hollow" if kind == names[0] else ""
        tip = f"{pair.series}, {pair.category}: {kind} {y_format(value)}"
        if pair.note and (kind == names[1] or pair.second is None):
            tip += f" ({pair.note})"
        parts.append(
            f'<circle class="pt s{colour}{hollow}" cx="{px}" cy="{frame.y(value)}" r="4" '
            f'data-series="{escape(pair.series)}" data-x="{escape(pair.category)}" '
            f'data-kind="{escape(kind)}" data-y="{value!r}"><title>{escape(tip)}</title></circle>'
        )
    return parts
