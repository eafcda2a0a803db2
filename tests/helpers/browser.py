"""A real headless Chromium driven through selenium and Debian's chromium-driver.

Typical use::

    with chromium(tmp_path) as driver:
        driver.get("https://127.0.0.2:5080/ui/")
        WebDriverWait(driver, 30).until(lambda d: d.find_elements(By.ID, "cluster-info"))

``scripts/setup.sh --tests`` installs the ``chromium`` and ``chromium-driver``
packages. The browser resolves no host name (only the IP literals of the test
clusters are reachable) and runs none of Google's background services.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from selenium import webdriver
from selenium.common.exceptions import NoSuchElementException
from selenium.webdriver.chrome.service import Service

CHROMEDRIVER = Path("/usr/bin/chromedriver")
# The binary itself, not Debian's /usr/bin/chromium wrapper (which adds API
# keys and flags from /etc/chromium.d)
CHROMIUM = Path("/usr/lib/chromium/chromium")

FLAGS = (
    "--headless=new",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--no-first-run",
    "--no-default-browser-check",
    "--no-proxy-server",
    # nothing but 127.0.0.0/8 IP literals: every host name fails to resolve
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.*",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--disable-default-apps",
    "--disable-domain-reliability",
    "--disable-client-side-phishing-detection",
    "--disable-features=Translate,OptimizationHints,MediaRouter,AutofillServerCommunication",
    "--window-size=1280,1024",
)


@contextmanager
def chromium(profile_dir: Path) -> Iterator[webdriver.Chrome]:
    """A headless Chromium with a fresh profile in ``profile_dir``, ended afterwards.

    It accepts self-signed certificates (the RAPI's ``rapi.pem``).
    """
    for binary in (CHROMEDRIVER, CHROMIUM):
        assert binary.exists(), f"{binary} is missing: run scripts/setup.sh --tests"
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile_dir}")
    if os.geteuid() == 0:
        options.add_argument("--no-sandbox")  # Chromium's sandbox refuses to run as root
    options.accept_insecure_certs = True
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(executable_path=str(CHROMEDRIVER)))
    try:
        yield driver
    finally:
        driver.quit()  # ends Chromium and the chromedriver process


def console_log(driver: webdriver.Chrome) -> list[dict[str, Any]]:
    """The page's console messages so far (to explain a failed wait)."""
    entries: list[dict[str, Any]] = driver.get_log("browser")  # type: ignore[no-untyped-call]
    return entries


def text(driver: webdriver.Chrome, css: str) -> str:
    """The rendered text of the element ``css`` selects, found and read in
    one script: the dashboard redraws as answers come, and an element found
    first and read after may be gone by then (StaleElementReferenceException).
    NoSuchElementException when there is none (a wait goes on)."""
    found = driver.execute_script(
        "const e = document.querySelector(arguments[0]); return e && e.innerText;", css
    )
    if found is None:
        raise NoSuchElementException(f"no element {css}")
    return str(found)
