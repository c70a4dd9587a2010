"""Our validator reaches the verdict the agreement table records for each case (the
real RM is held to the same table in test_rm_agreement.py)."""

from __future__ import annotations

import pytest

from tests.schedconf.agreement_cases import ALL_CASES, CAPACITY_CASES, FAIR_CASES, AgreementCase
from tests.schedconf.verdicts import our_verdict


def test_the_table_is_large_enough() -> None:
    assert len(CAPACITY_CASES) >= 12 and len(FAIR_CASES) >= 3
    for scheduler in ("capacity", "fair"):
        verdicts = {c.verdict for c in ALL_CASES if c.scheduler == scheduler}
        assert {"accepted", "refused"} <= verdicts
    assert len({c.name for c in ALL_CASES}) == len(ALL_CASES)


@pytest.mark.parametrize("case", ALL_CASES, ids=lambda c: f"{c.scheduler}: {c.name}")
def test_our_validator_reaches_the_recorded_verdict(case: AgreementCase) -> None:
    verdict, reasons = our_verdict(case)
    assert verdict == case.verdict, reasons
