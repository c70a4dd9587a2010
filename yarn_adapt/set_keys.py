"""The one parser of ``--set KEY=VALUE`` (the benches' and the testbed's settings).

An owner (a bench, the testbed) declares its keys once, each with its kind and its
default (and, where ``--quick`` changes it, the quick default)::

    class Knobs:
        rounds = whole("rounds", 180, quick=30, low=2, high=100_000)
        strategy = flag("strategy", True)

    SET_KEYS = SetSpec.of("cilantro", Knobs)
    values = SET_KEYS.read(options.extra, quick=options.quick)
    values[Knobs.rounds]  # an int: the value given, else the default

Every owner spells a value alike: a flag is ``yes``/``no``, ``true``/``false`` or
``1``/``0`` (any case) and nothing else; a whole number is digits (with a sign);
a number is finite; a list is comma-separated. A wrong value or an unknown key is a
:class:`~yarn_adapt.errors.SettingsError` (exit 2) on one line naming the owner, the
key and what it accepts::

    search-scale: --set scale_jobs=maybe: expected yes or no (true/false, 1/0)
    trace-risk: unknown --set foo (known: error_rate, otlp_batch_spans, ...)
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from enum import Enum
from typing import Any, Generic, TypeVar, cast

from yarn_adapt.errors import SettingsError

T = TypeVar("T")
D = TypeVar("D")
E = TypeVar("E", bound=Enum)

FLAG_WORDS: Mapping[str, bool] = {
    "yes": True, "true": True, "1": True,
    "no": False, "false": False, "0": False,
}  # fmt: skip
FLAG_EXPECTED = "yes or no (true/false, 1/0)"
_WHOLE = re.compile(r"[+-]?[0-9]+")


@dataclass(frozen=True)
class Key(Generic[T]):
    """One ``--set`` key: ``parse`` turns the text into a value or raises
    ValueError; ``expected`` says what it accepts, for the error."""

    name: str
    parse: Callable[[str], T]
    expected: str
    default: T
    quick_default: T

    def default_for(self, quick: bool) -> T:
        return self.quick_default if quick else self.default


@dataclass(frozen=True)
class Family(Generic[T]):
    """Keys named ``prefix`` + a whole number (``horizon_100``), each of one kind."""

    prefix: str
    parse: Callable[[str], T]
    expected: str

    @property
    def label(self) -> str:
        return f"{self.prefix}N"

    def holds(self, name: str) -> bool:
        return name.startswith(self.prefix) and name[len(self.prefix) :].isdigit()


class SetValues:
    """The typed values of one owner's ``--set``: ``values[KEY]``."""

    def __init__(
        self,
        values: Mapping[str, Any],
        given: Iterable[str],
        families: Mapping[str, Mapping[str, Any]],
    ) -> None:
        self._values = dict(values)
        self._given = frozenset(given)
        self._families = {prefix: dict(found) for prefix, found in families.items()}

    def __getitem__(self, key: Key[T]) -> T:
        return cast(T, self._values[key.name])

    def given(self, key: Key[Any]) -> bool:
        """Whether ``--set`` named the key (else its value is the default)."""
        return key.name in self._given

    def family(self, family: Family[T]) -> Mapping[str, T]:
        """The family's keys given, by their number (``{"100": 1800.0}``)."""
        return cast(Mapping[str, T], self._families[family.prefix])

    def by_name(self) -> dict[str, Any]:
        """Every key's value by its name."""
        return dict(self._values)


class SetSpec:
    """The ``--set`` keys one owner accepts; ``read`` checks and types them."""

    def __init__(
        self, owner: str, keys: Iterable[Key[Any]], families: Iterable[Family[Any]] = ()
    ) -> None:
        self.owner = owner
        self.keys = tuple(keys)
        self.families = tuple(families)
        names = [key.name for key in self.keys]
        if len(set(names)) != len(names):
            raise ValueError(f"{owner}: a --set key is declared twice")

    @classmethod
    def of(cls, owner: str, *namespaces: type) -> SetSpec:
        """The keys and families declared as attributes of ``namespaces`` (classes
        used as lists), in their order."""
        found = [value for space in namespaces for value in vars(space).values()]
        keys = [value for value in found if isinstance(value, Key)]
        return cls(owner, keys, [value for value in found if isinstance(value, Family)])

    def with_keys(self, *keys: Key[Any]) -> SetSpec:
        """The same keys and ``keys`` besides (one owner building on another's)."""
        return SetSpec(self.owner, (*self.keys, *keys), self.families)

    @property
    def known(self) -> list[str]:
        return sorted([key.name for key in self.keys] + [f.label for f in self.families])

    def read(self, given: Mapping[str, str], *, quick: bool = False) -> SetValues:
        """The value of every key (given or default); SettingsError for an unknown
        key or a value that is not of its kind."""
        self._refuse_unknown(given)
        values = {key.name: self._value(key, given, quick) for key in self.keys}
        families = {f.prefix: self._family(f, given) for f in self.families}
        named = [name for name in given if name in values]
        return SetValues(values, named, families)

    def _refuse_unknown(self, given: Mapping[str, str]) -> None:
        names = {key.name for key in self.keys}
        unknown = sorted(
            name
            for name in given
            if name not in names and not any(f.holds(name) for f in self.families)
        )
        if unknown:
            raise SettingsError(
                f"{self.owner}: unknown --set {', '.join(unknown)} (known: {', '.join(self.known)})"
            )

    def _value(self, key: Key[T], given: Mapping[str, str], quick: bool) -> T:
        if key.name not in given:
            return key.default_for(quick)
        return self._parsed(key.name, given[key.name], key.parse, key.expected)

    def _family(self, family: Family[T], given: Mapping[str, str]) -> dict[str, T]:
        return {
            name[len(family.prefix) :]: self._parsed(name, text, family.parse, family.expected)
            for name, text in given.items()
            if family.holds(name)
        }

    def _parsed(self, name: str, text: str, parse: Callable[[str], T], expected: str) -> T:
        try:
            return parse(text)
        except ValueError:
            raise SettingsError(f"{self.owner}: --set {name}={text}: expected {expected}") from None


# --------------------------------------------------------------------------- kinds


def parse_flag(text: str) -> bool:
    """``yes``/``no``, ``true``/``false``, ``1``/``0`` in any case."""
    try:
        return FLAG_WORDS[text.strip().lower()]
    except KeyError:
        raise ValueError(text) from None


def parse_whole(text: str) -> int:
    if not _WHOLE.fullmatch(text.strip()):
        raise ValueError(text)
    return int(text)


def parse_number(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(text)
    return value


def _bounded(
    parse: Callable[[str], T], low: float | None, high: float | None, above: float | None
) -> Callable[[str], T]:
    def bounded(text: str) -> T:
        value = parse(text)
        number = cast(float, value)
        if (low is not None and number < low) or (high is not None and number > high):
            raise ValueError(text)
        if above is not None and number <= above:
            raise ValueError(text)
        return value

    return bounded


def _range_words(noun: str, low: float | None, high: float | None, above: float | None) -> str:
    if low is not None and high is not None:
        return f"{noun} {_show(low)}-{_show(high)}"
    if above is not None:
        return f"{noun} > {_show(above)}"
    if low is not None:
        return f"{noun} >= {_show(low)}"
    if high is not None:
        return f"{noun} <= {_show(high)}"
    return noun


def _show(bound: float) -> str:
    return str(int(bound)) if float(bound).is_integer() else f"{bound:g}"


def _key(
    name: str, parse: Callable[[str], Any], expected: str, default: Any, quick: Any
) -> Key[Any]:
    return Key(name, parse, expected, default, default if quick is None else quick)


def flag(name: str, default: bool, *, quick: bool | None = None) -> Key[bool]:
    """A yes/no switch."""
    return cast(Key[bool], _key(name, parse_flag, FLAG_EXPECTED, default, quick))


def whole(
    name: str,
    default: D,
    *,
    quick: D | None = None,
    low: int | None = None,
    high: int | None = None,
) -> Key[int | D]:
    """A whole number, within ``low``..``high`` where given."""
    parse = _bounded(parse_whole, low, high, None)
    expected = _range_words("a whole number", low, high, None)
    return cast(Key[int | D], _key(name, parse, expected, default, quick))


def numeric(
    name: str,
    default: D,
    *,
    quick: D | None = None,
    low: float | None = None,
    high: float | None = None,
    above: float | None = None,
) -> Key[float | D]:
    """A finite number, within ``low``..``high`` (and ``> above``) where given."""
    parse = _bounded(parse_number, low, high, above)
    expected = _range_words("a number", low, high, above)
    return cast(Key[float | D], _key(name, parse, expected, default, quick))


def word(name: str, choices: Sequence[str], default: D) -> Key[str | D]:
    """One of ``choices`` (as written)."""

    def parse(text: str) -> str:
        if text not in choices:
            raise ValueError(text)
        return text

    return cast(Key[str | D], _key(name, parse, f"one of {', '.join(choices)}", default, None))


def member(name: str, kind: type[E], default: E) -> Key[E]:
    """A member of the enum ``kind``, by its value."""
    by_value = {str(item.value): item for item in kind}

    def parse(text: str) -> E:
        if text not in by_value:
            raise ValueError(text)
        return by_value[text]

    return Key(name, parse, f"one of {', '.join(by_value)}", default, default)


def free_text(name: str, default: D) -> Key[str | D]:
    """Any text (a path, a URL, a name checked where it is used)."""
    return cast(Key[str | D], _key(name, str, "text", default, None))


def custom(
    name: str, parse: Callable[[str], T], expected: str, default: T, *, quick: T | None = None
) -> Key[T]:
    """A kind of one's own: ``parse`` raises ValueError for a wrong text."""
    return cast(Key[T], _key(name, parse, expected, default, quick))


def split_list(text: str) -> list[str]:
    """A comma list's items, stripped; empty items dropped."""
    return [item.strip() for item in text.split(",") if item.strip()]


def wholes(
    name: str, default: tuple[int, ...], *, quick: tuple[int, ...] | None = None, low: int = 1
) -> Key[tuple[int, ...]]:
    """A comma list of whole numbers, each at least ``low``; one at least."""
    item = _bounded(parse_whole, low, None, None)

    def parse(text: str) -> tuple[int, ...]:
        found = tuple(item(part) for part in split_list(text))
        if not found:
            raise ValueError(text)
        return found

    expected = f"a comma list of whole numbers >= {low}"
    return cast(Key[tuple[int, ...]], _key(name, parse, expected, default, quick))


def words(name: str, choices: Sequence[str], default: tuple[str, ...]) -> Key[tuple[str, ...]]:
    """A comma list of ``choices``; one at least."""

    def parse(text: str) -> tuple[str, ...]:
        found = tuple(split_list(text))
        if not found or any(part not in choices for part in found):
            raise ValueError(text)
        return found

    expected = f"a comma list of {', '.join(choices)}"
    return cast(Key[tuple[str, ...]], _key(name, parse, expected, default, None))


def span(
    name: str, count: int, default: tuple[int, int], *, quick: tuple[int, int] | None = None
) -> Key[tuple[int, int]]:
    """``N`` (1 to N) or ``I-J`` (I to J), 1-based and inclusive, within 1-``count``."""

    def parse(text: str) -> tuple[int, int]:
        first, dash, last = text.partition("-")
        if not first.isdigit() or (dash and not last.isdigit()):
            raise ValueError(text)
        low, high = (int(first), int(last)) if dash else (1, int(first))
        if not 1 <= low <= high <= count:
            raise ValueError(text)
        return low, high

    expected = f"N or I-J within 1-{count}"
    return cast(Key[tuple[int, int]], _key(name, parse, expected, default, quick))


def family_of_numbers(prefix: str, *, low: float | None = None) -> Family[float]:
    """``prefix`` + N keys whose values are finite numbers (>= ``low``)."""
    return Family(
        prefix, _bounded(parse_number, low, None, None), _range_words("a number", low, None, None)
    )


def field_keys(
    instance: Any, *, given_only: bool = False, quick: Mapping[str, Any] | None = None
) -> list[Key[Any]]:
    """A key per field of the dataclass ``instance`` that holds a flag, a whole
    number, a number or text, of that kind (other fields have none). Its default is
    the instance's value (``quick``'s where it has one), or None with ``given_only``
    (the owner then changes only the fields given)."""
    quick = quick or {}
    keys: list[Key[Any]] = []
    for item in fields(instance):
        value = getattr(instance, item.name)
        default = None if given_only else value
        make = _FIELD_KINDS.get(type(value))
        if make is not None:
            keys.append(make(item.name, default, quick.get(item.name)))
    return keys


def _whole_key(name: str, default: Any, quick: Any) -> Key[Any]:
    return whole(name, default, quick=quick)


def _number_key(name: str, default: Any, quick: Any) -> Key[Any]:
    return numeric(name, default, quick=quick)


def _flag_key(name: str, default: Any, quick: Any) -> Key[Any]:
    return flag(name, default, quick=quick)


def _text_key(name: str, default: Any, quick: Any) -> Key[Any]:
    return _key(name, str, "text", default, quick)


_FIELD_KINDS: Mapping[type, Callable[[str, Any, Any], Key[Any]]] = {
    bool: _flag_key, int: _whole_key, float: _number_key, str: _text_key,
}  # fmt: skip
