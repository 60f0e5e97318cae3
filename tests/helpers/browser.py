"""Headless Chromium driven by Selenium, offline: Debian's ``chromium`` and ``chromium-driver`` (``make
install-browser``), never a downloaded browser or driver (Selenium Manager is not asked: both paths are given)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

CHROMIUM = os.environ.get("GEAR_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("GEAR_CHROMEDRIVER", "/usr/bin/chromedriver")


def browser_missing() -> str | None:
    """Why the browser cannot start (what to install), or None."""
    for path, pkg in ((CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")):
        if not (Path(path).is_file() or shutil.which(path)):
            return f"{path} not found (Debian package {pkg}: make install-browser)"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium not installed (make install-browser)"
    return None


def start_chromium(width: int = 1500, height: int = 1000) -> Any:
    """A headless Chromium WebDriver with a fixed window size (screenshots), no sandbox (root in a container)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                f"--window-size={width},{height}", "--no-first-run", "--disable-extensions",
                "--disable-background-networking", "--disable-component-update", "--disable-sync"):
        opts.add_argument(arg)
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)


def wait_for(driver: Any, script: str, timeout: float = 20.0) -> Any:
    """Poll ``script`` (JavaScript returning a value) until it is truthy; its value."""
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout, poll_frequency=0.02).until(lambda d: d.execute_script(script))
