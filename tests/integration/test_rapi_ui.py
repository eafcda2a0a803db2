"""The dashboard at /ui/ in a real headless Chromium, against a real cluster's
corral-rapi over HTTPS: logging in, the instance list, starting an instance and
following its job to the end, a read-only user being refused, names shown as
text (never markup) and a job followed live until it ends."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from selenium.common.exceptions import (
    NoSuchElementException,
    StaleElementReferenceException,
    TimeoutException,
)
from selenium.webdriver import Chrome
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from tests.helpers.browser import chromium, console_log, text
from tests.helpers.cluster import TestCluster, running_cluster
from tests.helpers.instances import add, ok, query
from tests.helpers.jobs import delay_gate_path, release_gate, wait_final
from tests.helpers.osdef import make_os

pytestmark = pytest.mark.slow

ADMIN = ("admin", "s3cret-admin")
VIEWER = ("viewer", "look-only")
# Generous: a loaded CI machine runs jobs slowly; the waits end as soon as the
# condition holds.
WAIT = 60.0
# The page re-renders its tables on refresh: an element found a moment ago may
# be gone, so waits look it up again.
RETRY_ON = (NoSuchElementException, StaleElementReferenceException)


@pytest.fixture(scope="module")
def cl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestCluster]:
    with running_cluster(tmp_path_factory.mktemp("rapi-ui")) as cluster:
        make_os(cluster.paths, "plain")
        cluster.add_rapi_user(*ADMIN, "write")
        cluster.add_rapi_user(*VIEWER, "read")
        yield cluster


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Chrome]:
    with chromium(tmp_path / "chromium-profile") as driver:
        yield driver


def wait_for(driver: Chrome, condition: Callable[[Chrome], Any], what: str) -> Any:
    """Wait until ``condition`` holds; a failure shows the page's error and console."""
    try:
        return WebDriverWait(driver, WAIT, ignored_exceptions=RETRY_ON).until(condition)
    except TimeoutException:
        error = driver.find_element(By.ID, "error").text
        raise AssertionError(
            f"timed out waiting for {what}; page error: {error!r}; console: {console_log(driver)}"
        ) from None


def instance_cell(name: str, cell: str) -> str:
    return f'#instance-rows tr[data-instance="{name}"] td.{cell}'


def open_dashboard(driver: Chrome, cl: TestCluster) -> None:
    driver.get(f"{cl.rapi_url}/ui/")
    wait_for(driver, lambda d: text(d, "#cluster-info dd[data-field=name]"), "the cluster's info")
    assert text(driver, "#cluster-info dd[data-field=name]") == cl.cluster_name
    assert text(driver, "#cluster-info dd[data-field=master]") == cl.node_name


def log_in(driver: Chrome, user: str, password: str) -> None:
    driver.find_element(By.ID, "login-user").send_keys(user)
    driver.find_element(By.ID, "login-password").send_keys(password)
    driver.find_element(By.ID, "login-button").click()


def click(driver: Chrome, by: str, selector: str) -> None:
    """Click the element (looked up again if the page re-rendered it meanwhile)."""

    def clicked(d: Chrome) -> bool:
        d.find_element(by, selector).click()
        return True

    wait_for(driver, clicked, selector)


def press(driver: Chrome, name: str, action: str) -> None:
    """Click ``action``'s button in ``name``'s row."""
    css = f'#instance-rows tr[data-instance="{name}"] button[data-action="{action}"]'
    click(driver, By.CSS_SELECTOR, css)


def job_ids(cl: TestCluster) -> set[int]:
    with cl.client() as client:
        return {row[0] for row in client.query_jobs(None, ["id"])}


def test_admin_starts_an_instance_and_follows_its_job(cl: TestCluster, browser: Chrome) -> None:
    ok(add(cl, "web1", "-t", "diskless", "--no-start", "-o", "plain+default"))
    open_dashboard(browser, cl)
    # anonymous: the list, but no buttons
    wait_for(browser, lambda d: text(d, instance_cell("web1", "status")) == "ADMIN_down", "web1")
    assert text(browser, instance_cell("web1", "oper-state")) == "no"
    assert not browser.find_elements(By.CSS_SELECTOR, "#instance-rows button")
    node_row = browser.find_element(By.CSS_SELECTOR, f'#node-rows tr[data-node="{cl.node_name}"]')
    assert "master" in node_row.text

    log_in(browser, *ADMIN)
    wait_for(browser, lambda d: d.find_element(By.ID, "session").is_displayed(), "the session")
    assert text(browser, "#session-user") == ADMIN[0]
    press(browser, "web1", "startup")

    notice = wait_for(browser, lambda d: text(d, "#notice"), "the job's notice")
    job_id = notice.split()[1]
    assert notice == f"Job {job_id} submitted: startup of web1"
    wait_for(browser, lambda d: text(d, "#job-id") == job_id, "the job's details")
    wait_for(browser, lambda d: text(d, "#job-status") == "success", "the job's success")
    assert text(browser, "#job-summary") == "INSTANCE_STARTUP(web1)"
    job_row = f'#job-rows tr[data-job="{job_id}"]'
    wait_for(browser, lambda d: text(d, f"{job_row} td.status") == "success", "the job's row")
    wait_for(browser, lambda d: text(d, instance_cell("web1", "status")) == "running", "running")
    assert text(browser, instance_cell("web1", "oper-state")) == "yes"
    assert not browser.find_element(By.ID, "error").is_displayed()
    # what the page shows is what the cluster did
    assert query(cl, ["status"], "web1") == {"web1": {"status": "running"}}
    assert int(job_id) in job_ids(cl)

    # selecting another job shows its log
    click(browser, By.XPATH, '//tr[td="INSTANCE_CREATE(web1)"]//button[@class="job-link"]')
    wait_for(browser, lambda d: text(d, "#job-summary") == "INSTANCE_CREATE(web1)", "the job")
    assert "adding instance web1 to cluster config" in text(browser, "#job-log")


def test_read_only_user_is_refused_and_nothing_changes(cl: TestCluster, browser: Chrome) -> None:
    ok(add(cl, "web2", "-t", "diskless", "--no-start", "-o", "plain+default"))
    open_dashboard(browser, cl)
    # a wrong password does not log in
    log_in(browser, VIEWER[0], "wrong")
    wait_for(browser, lambda d: "HTTP 401" in text(d, "#error"), "the login's refusal")
    assert not browser.find_element(By.ID, "session").is_displayed()
    browser.find_element(By.ID, "login-user").clear()
    browser.find_element(By.ID, "login-password").clear()

    log_in(browser, *VIEWER)
    wait_for(browser, lambda d: d.find_element(By.ID, "session").is_displayed(), "the session")
    jobs_before = job_ids(cl)
    press(browser, "web2", "startup")
    wait_for(browser, lambda d: "HTTP 403" in text(d, "#error"), "the refusal")
    assert "read-only" in text(browser, "#error")
    assert not browser.find_element(By.ID, "notice").is_displayed()
    assert job_ids(cl) == jobs_before
    assert query(cl, ["status"], "web2") == {"web2": {"status": "ADMIN_down"}}
    assert text(browser, instance_cell("web2", "status")) == "ADMIN_down"


def test_names_from_users_are_shown_as_text(cl: TestCluster, browser: Chrome) -> None:
    markup = '<b id="injected">web3</b>'
    with cl.client() as client:
        job_id = client.submit_job([{"OP_ID": "OP_INSTANCE_STARTUP", "instance_name": markup}])
        wait_final(client, [job_id])
    open_dashboard(browser, cl)
    job_row = f'#job-rows tr[data-job="{job_id}"]'
    wait_for(browser, lambda d: text(d, f"{job_row} td.status") == "error", "the failed job")
    assert text(browser, f"{job_row} td.summary") == f"INSTANCE_STARTUP({markup})"
    click(browser, By.CSS_SELECTOR, f"{job_row} button.job-link")
    wait_for(browser, lambda d: text(d, "#job-status") == "error", "the job's details")
    assert text(browser, "#job-result") == (
        f"OpPrereqError: Instance '{markup}' not known (unknown_entity)"
    )
    assert not browser.find_elements(By.ID, "injected")


def test_a_selected_job_is_followed_live(cl: TestCluster, browser: Chrome) -> None:
    with cl.client() as client:
        job_id = client.submit_job(
            [{"OP_ID": "OP_TEST_DELAY", "duration": 600, "interruptible": True, "on_master": True}]
        )
        gate = delay_gate_path(client, job_id)
    open_dashboard(browser, cl)  # anonymous: following a job is a plain read
    job_row = f'#job-rows tr[data-job="{job_id}"]'
    wait_for(browser, lambda d: text(d, f"{job_row} td.status") == "running", "the running job")
    click(browser, By.CSS_SELECTOR, f"{job_row} button.job-link")
    wait_for(browser, lambda d: text(d, "#job-status") == "running", "the job's details")
    # the delay's log entry (its socket's path) is shown as it was logged
    assert gate in text(browser, "#job-log")
    release_gate(gate)
    wait_for(browser, lambda d: text(d, "#job-status") == "success", "the job's end, live")
    wait_for(browser, lambda d: text(d, f"{job_row} td.status") == "success", "the job's row")
