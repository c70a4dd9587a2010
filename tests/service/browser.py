"""What an operator does in the browser, as steps the browser tests share."""

from __future__ import annotations

from typing import Any

from selenium.webdriver.common.by import By


def open_first_proposal(driver: Any, base_url: str) -> None:
    driver.get(base_url + "/")
    driver.find_element(By.CSS_SELECTOR, "#proposals a.proposal-link").click()


def sign_in(driver: Any, token: str) -> None:
    driver.find_element(By.ID, "sign-in").click()
    driver.find_element(By.ID, "token").send_keys(token)
    driver.find_element(By.ID, "sign-in-submit").click()


def text_of(driver: Any, element_id: str) -> str:
    return str(driver.find_element(By.ID, element_id).text)


def click(driver: Any, element_id: str) -> None:
    driver.find_element(By.ID, element_id).click()
