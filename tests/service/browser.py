"""What an operator does in the browser, as steps the browser tests share.

Every click that submits a form or follows a link waits until the browser has left
the page it clicked on, so the next read never meets an element of the old page
(a "stale element reference")."""

from __future__ import annotations

from typing import Any

from selenium.common.exceptions import WebDriverException
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import WebDriverWait

PAGE_LOAD_S = 30


def _left(old_page: Any) -> Any:
    """Selenium's ``staleness_of``, also when chromedriver reports the old page's
    node as "does not belong to the document" (an unknown error) instead of stale."""
    stale = expected_conditions.staleness_of(old_page)

    def predicate(driver: Any) -> bool:
        try:
            return bool(stale(driver))
        except WebDriverException as error:
            if "does not belong to the document" in str(error):
                return True
            raise

    return predicate


def click_and_wait_for_next_page(driver: Any, by: str, selector: str) -> None:
    old_page = driver.find_element(By.TAG_NAME, "html")
    driver.find_element(by, selector).click()
    WebDriverWait(driver, PAGE_LOAD_S).until(_left(old_page))
    WebDriverWait(driver, PAGE_LOAD_S).until(
        lambda d: d.execute_script("return document.readyState") == "complete"
    )


def open_first_proposal(driver: Any, base_url: str) -> None:
    driver.get(base_url + "/")
    click_and_wait_for_next_page(driver, By.CSS_SELECTOR, "#proposals a.proposal-link")


def sign_in(driver: Any, token: str) -> None:
    click_and_wait_for_next_page(driver, By.ID, "sign-in")
    driver.find_element(By.ID, "token").send_keys(token)
    click_and_wait_for_next_page(driver, By.ID, "sign-in-submit")


def text_of(driver: Any, element_id: str) -> str:
    return str(driver.find_element(By.ID, element_id).text)


def click(driver: Any, element_id: str) -> None:
    """Click a button that submits a form (approve, reject, apply, roll back)."""
    click_and_wait_for_next_page(driver, By.ID, element_id)
