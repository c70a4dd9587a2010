"""The one ``--set`` parser (yarn_adapt.set_keys): each kind, the one flag
spelling, defaults with and without --quick, and one-line errors naming the key."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import pytest

from yarn_adapt.errors import SettingsError
from yarn_adapt.set_keys import (
    SetSpec,
    custom,
    family_of_numbers,
    field_keys,
    flag,
    free_text,
    member,
    numeric,
    span,
    whole,
    wholes,
    word,
    words,
)


class Colour(StrEnum):
    RED = "red"
    DARK_BLUE = "dark-blue"


def odd_number(text: str) -> int:
    value = int(text)
    if value % 2 == 0:
        raise ValueError(text)
    return value


class Knobs:
    rounds = whole("rounds", 180, quick=30, low=2, high=1000)
    beta = numeric("beta", 0.75, low=0, high=1)
    step_s = numeric("step_s", 1.0, above=0)
    strategy = flag("strategy", True)
    part = word("part", ("swim", "google"), None)
    colour = member("colour", Colour, Colour.RED)
    url = free_text("url", None)
    traces = wholes("traces", (30_000,), quick=(3_000,))
    policies = words("policies", ("tarcil", "yarn"), ("tarcil", "yarn"))
    sizes = span("sizes", 10, (1, 10), quick=(1, 1))
    odd = custom("odd", odd_number, "an odd number", 1)
    horizon = family_of_numbers("horizon_", low=0)


SPEC = SetSpec.of("demo", Knobs)


@pytest.mark.parametrize(
    ("text", "value"),
    [("yes", True), ("no", False), ("true", True), ("false", False),
     ("1", True), ("0", False), ("YES", True), ("False", False)],
)  # fmt: skip
def test_a_flag_is_yes_no_true_false_or_1_0(text: str, value: bool) -> None:
    assert SPEC.read({"strategy": text})[Knobs.strategy] is value


@pytest.mark.parametrize("text", ["on", "off", "y", "maybe", "", "2"])
def test_any_other_flag_word_is_refused(text: str) -> None:
    with pytest.raises(SettingsError) as raised:
        SPEC.read({"strategy": text})
    assert str(raised.value) == (
        f"demo: --set strategy={text}: expected yes or no (true/false, 1/0)"
    )


def test_defaults_and_quick_defaults() -> None:
    full, quick = SPEC.read({}), SPEC.read({}, quick=True)
    assert (full[Knobs.rounds], quick[Knobs.rounds]) == (180, 30)
    assert (full[Knobs.traces], quick[Knobs.traces]) == ((30_000,), (3_000,))
    assert (full[Knobs.sizes], quick[Knobs.sizes]) == ((1, 10), (1, 1))
    assert full[Knobs.part] is None and full[Knobs.url] is None
    assert full[Knobs.colour] is Colour.RED and full[Knobs.beta] == 0.75
    assert not full.given(Knobs.rounds) and full.family(Knobs.horizon) == {}
    given = SPEC.read({"rounds": "40"}, quick=True)
    assert given[Knobs.rounds] == 40 and given.given(Knobs.rounds)


def test_each_kind_reads_its_values() -> None:
    values = SPEC.read(
        {"rounds": "7", "beta": "0.5", "step_s": "2", "part": "google", "colour": "dark-blue",
         "url": "redis://x", "traces": "40, 60,,80", "policies": "yarn", "sizes": "3-4",
         "odd": "3", "horizon_100": "60", "horizon_12000": "40"}
    )  # fmt: skip
    assert values[Knobs.rounds] == 7 and values[Knobs.beta] == 0.5
    assert values[Knobs.step_s] == 2.0 and values[Knobs.part] == "google"
    assert values[Knobs.colour] is Colour.DARK_BLUE and values[Knobs.url] == "redis://x"
    assert values[Knobs.traces] == (40, 60, 80) and values[Knobs.policies] == ("yarn",)
    assert values[Knobs.sizes] == (3, 4) and values[Knobs.odd] == 3
    assert values.family(Knobs.horizon) == {"100": 60.0, "12000": 40.0}
    assert SPEC.read({"sizes": "2"})[Knobs.sizes] == (1, 2)


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ({"rounds": "1"}, "rounds=1: expected a whole number 2-1000"),
        ({"rounds": "2.5"}, "rounds=2.5: expected a whole number 2-1000"),
        ({"beta": "nan"}, "beta=nan: expected a number 0-1"),
        ({"beta": "1.5"}, "beta=1.5: expected a number 0-1"),
        ({"step_s": "0"}, "step_s=0: expected a number > 0"),
        ({"step_s": "inf"}, "step_s=inf: expected a number > 0"),
        ({"part": "SWIM"}, "part=SWIM: expected one of swim, google"),
        ({"colour": "blue"}, "colour=blue: expected one of red, dark-blue"),
        ({"traces": "40,0"}, "traces=40,0: expected a comma list of whole numbers >= 1"),
        ({"traces": ""}, "traces=: expected a comma list of whole numbers >= 1"),
        ({"policies": "tarcil,magic"}, "policies=tarcil,magic: expected a comma list of tarcil"),
        ({"sizes": "3-2"}, "sizes=3-2: expected N or I-J within 1-10"),
        ({"sizes": "11"}, "sizes=11: expected N or I-J within 1-10"),
        ({"odd": "4"}, "odd=4: expected an odd number"),
        ({"horizon_100": "-1"}, "horizon_100=-1: expected a number >= 0"),
    ],
)
def test_a_wrong_value_is_one_line_naming_the_owner_key_and_kind(
    given: dict[str, str], expected: str
) -> None:
    with pytest.raises(SettingsError) as raised:
        SPEC.read(given)
    message = raised.value.one_line()
    assert message.startswith(f"demo: --set {expected}") and "\n" not in str(raised.value)


def test_unknown_keys_are_named_with_the_known_ones() -> None:
    with pytest.raises(SettingsError) as raised:
        SPEC.read({"zeta": "1", "alpha": "2", "horizon_x": "3", "horizon_10": "4"})
    assert str(raised.value) == (
        "demo: unknown --set alpha, horizon_x, zeta (known: beta, colour, horizon_N, odd, "
        "part, policies, rounds, sizes, step_s, strategy, traces, url)"
    )


def test_a_key_declared_twice_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="declared twice"):
        SetSpec("demo", (whole("a", 1), flag("a", True)))


@dataclass(frozen=True)
class Options:
    rate_rps: float = 20.0
    repeats: int = 3
    makespan: bool = True
    policy: str = "slack"
    pair: tuple[float, float] = (0.5, 1.0)


def test_field_keys_take_each_field_of_its_kind() -> None:
    spec = SetSpec("opts", field_keys(Options(), quick={"repeats": 1}))
    assert spec.known == ["makespan", "policy", "rate_rps", "repeats"]  # no key for a tuple
    assert spec.read({}, quick=True).by_name() == {
        "rate_rps": 20.0, "repeats": 1, "makespan": True, "policy": "slack"
    }  # fmt: skip
    values = spec.read({"rate_rps": "5", "makespan": "no", "policy": "x"}).by_name()
    assert values == {"rate_rps": 5.0, "repeats": 3, "makespan": False, "policy": "x"}
    with pytest.raises(SettingsError, match=r"opts: --set repeats=2\.0: expected a whole number"):
        spec.read({"repeats": "2.0"})
    only_given = SetSpec("opts", field_keys(Options(), given_only=True)).read({"repeats": "4"})
    assert only_given.by_name() == {
        "rate_rps": None, "repeats": 4, "makespan": None, "policy": None
    }  # fmt: skip


def test_with_keys_adds_to_an_owners_keys() -> None:
    more = SPEC.with_keys(flag("windows", False))
    assert more.read({"windows": "true"}).by_name()["windows"] is True
    with pytest.raises(SettingsError, match="unknown --set windows"):
        SPEC.read({"windows": "true"})
