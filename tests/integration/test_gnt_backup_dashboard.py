"""The dashboard (a real headless Chromium against corral-rapi) shows a running
export's progress as a bar per disk in the job's details, and drops the bar
when the disk's transfer ends."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
from selenium.webdriver import Chrome
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from tests.helpers.browser import chromium, text
from tests.helpers.cluster import running_cluster
from tests.helpers.osdef import make_os
from tests.helpers.two_clusters import DUMPER_SCRIPTS, OS_NAME, add_instance, gated_export

pytestmark = pytest.mark.slow

MIB = 1024 * 1024
BAR = '#job-progress .transfer[data-disk="disk/0"]'


def wait_for(driver: Chrome, condition: Any, what: str) -> Any:
    waiter = WebDriverWait(
        driver, 60, ignored_exceptions=(NoSuchElementException, StaleElementReferenceException)
    )
    return waiter.until(condition, f"timed out waiting for {what}")


def test_export_bar(tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    with running_cluster(tmp_path) as cl:
        make_os(cl.paths, OS_NAME, scripts={**DUMPER_SCRIPTS, "export": gated_export(gate)})
        add_instance(cl, "web1.example.com", os.urandom(4 * MIB))
        with cl.client() as client:
            job_id = client.submit_job([{
                "OP_ID": "OP_BACKUP_EXPORT", "instance_name": "web1.example.com",
                "target_node": cl.node_name,
            }])  # fmt: skip
        try:
            with chromium(tmp_path / "profile") as browser:
                browser.get(f"{cl.rapi_url}/ui/")
                row = f'#job-rows tr[data-job="{job_id}"] button.job-link'
                wait_for(browser, lambda d: d.find_element(By.CSS_SELECTOR, row), "the job")
                browser.find_element(By.CSS_SELECTOR, row).click()
                # The transfer waits at the gate: its bar shows what was sent so far.
                wait_for(browser, lambda d: text(d, f"{BAR} .figures"), "the progress bar")
                assert text(browser, f"{BAR} .disk") == "disk/0"
                assert text(browser, f"{BAR} .figures").startswith("0% 0M ")
                # Read at once: the page redraws the bar as the job's status comes.
                progress = browser.execute_script(
                    "const bar = document.querySelector(arguments[0]);"
                    " return bar && [bar.getAttribute('value'), bar.getAttribute('max')];",
                    f"{BAR} progress",
                )
                assert progress == ["0", "100"]
                gate.touch()
                wait_for(browser, lambda d: text(d, "#job-status") == "success", "the end")
                assert browser.find_elements(By.CSS_SELECTOR, BAR) == []
                assert "disk/0 finished sending data" in text(browser, "#job-log")
        finally:
            gate.touch()
