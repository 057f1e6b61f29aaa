"""Headless Chromium for the browser tests: Debian's chromium + chromedriver (``scripts/setup.sh``)
driven by Selenium by path, with ``SE_OFFLINE`` so Selenium Manager never downloads a browser or a
driver; a full-page screenshot helper."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.remote.webdriver import WebDriver

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")


@contextmanager
def headless_chromium(width: int = 1280, height: int = 1000) -> Iterator[WebDriver]:
    """A driver (skips the test when the Debian packages are missing); quit on exit."""
    if CHROMIUM is None or CHROMEDRIVER is None:
        pytest.skip(
            "Debian packages chromium and chromium-driver are not installed (scripts/setup.sh does it)"
        )
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    size = f"--window-size={width},{height}"
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", size):
        options.add_argument(arg)
    with pytest.MonkeyPatch.context() as env:
        env.setenv("SE_OFFLINE", "true")  # Selenium Manager: use the given paths, download nothing
        driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def full_page_screenshot(driver: WebDriver, path: Path) -> None:
    """A PNG of the whole page (the window grows to the page's height for it, then shrinks back)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    width, height = driver.get_window_size()["width"], driver.get_window_size()["height"]
    page = driver.execute_script("return document.documentElement.scrollHeight;")
    driver.set_window_size(width, max(height, page + 140))  # + the browser's own frame
    try:
        driver.save_screenshot(str(path))
    finally:
        driver.set_window_size(width, height)
