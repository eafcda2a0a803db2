"""Cross-site request forgery against corral-rapi, in a real headless Chromium
(issue 20): once the browser holds a write user's Basic credentials for the
RAPI, a page of another site posting an empty text/plain form to
``/2/instances/NAME/reboot`` must not create a job; the dashboard, the RAPI's
own page, still can.  (A no-cors ``fetch`` from such a page created no job in
this Chromium even without the server's check: it is no case here.)"""

from __future__ import annotations

import base64
import http.server
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from selenium.webdriver import Chrome
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from tests.helpers.browser import chromium
from tests.helpers.cluster import TestCluster, running_cluster, unique_loopback
from tests.helpers.instances import add, ok
from tests.helpers.osdef import make_os

pytestmark = pytest.mark.slow

ADMIN = ("admin", "s3cret-admin")
INSTANCE = "web1"
WAIT = 60.0

# The other site's page: an empty text/plain form, posted as soon as it loads.
FORM = """<!doctype html><title>prize</title>
<form id="f" method="POST" enctype="text/plain" action="{rapi}/2/instances/{name}/reboot">
</form>
<script>document.getElementById("f").submit()</script>
"""


@contextmanager
def other_site(cl: TestCluster) -> Iterator[str]:
    """A plain HTTP server of another site, on an address of its own; its URL."""
    pages = {"/form.html": FORM.format(rapi=cl.rapi_url, name=INSTANCE).encode()}

    class Pages(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = pages.get(self.path)
            self.send_response(200 if body else 404)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(body or b"")

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer((unique_loopback(), 0), Pages)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        host, port = server.server_address[:2]
        yield f"http://{host!s}:{port}"
    finally:
        server.shutdown()
        server.server_close()


def job_ids(cl: TestCluster) -> set[int]:
    with cl.client() as client:
        return {row[0] for row in client.query_jobs(None, ["id"])}


def page_text(driver: Chrome) -> str:
    return str(driver.find_element(By.TAG_NAME, "body").text)


def wait_for(driver: Chrome, condition: Callable[[Chrome], object], what: str) -> object:
    return WebDriverWait(driver, WAIT).until(condition, f"timed out waiting for {what}")


@pytest.fixture
def cl(tmp_path: Path) -> Iterator[TestCluster]:
    with running_cluster(tmp_path) as cluster:
        make_os(cluster.paths, "plain")
        cluster.add_rapi_user(*ADMIN, "write")
        ok(add(cluster, INSTANCE, "-t", "diskless", "--no-start", "-o", "plain+default"))
        yield cluster


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Chrome]:
    with chromium(tmp_path / "chromium-profile") as driver:
        yield driver


def cache_credentials(driver: Chrome, cl: TestCluster) -> None:
    """Log in as a browser user does (answering the RAPI's challenge, here with
    credentials in the URL) and check that the browser now sends them by itself
    when challenged."""
    user, password = ADMIN
    host = cl.rapi_url.removeprefix("https://")
    driver.get(f"https://{user}:{password}@{host}/2/query/instance?fields=name")
    wait_for(driver, lambda d: INSTANCE in page_text(d), "a query with credentials")
    driver.get(f"{cl.rapi_url}/2/query/node?fields=name")
    wait_for(driver, lambda d: cl.node_name in page_text(d), "a query with remembered ones")


@pytest.mark.parametrize("origin", ["another site", "a data: URL"])
def test_a_page_of_another_site_cannot_write(cl: TestCluster, browser: Chrome, origin: str) -> None:
    cache_credentials(browser, cl)
    before = job_ids(cl)
    with other_site(cl) as site:
        if origin == "another site":
            browser.get(f"{site}/form.html")
        else:  # its origin is "null"
            page = FORM.format(rapi=cl.rapi_url, name=INSTANCE)
            browser.get("data:text/html;base64," + base64.b64encode(page.encode()).decode())
        # The RAPI's answer replaces the page: a refusal, in Ganeti's JSON.
        wait_for(browser, lambda d: d.current_url.startswith(cl.rapi_url), "the answer")
        answer = str(wait_for(browser, page_text, "the answer's text"))
    assert job_ids(cl) == before, answer
    assert '"code":403' in answer and "another site" in answer, answer


def test_the_dashboard_still_writes(cl: TestCluster, browser: Chrome) -> None:
    cache_credentials(browser, cl)
    before = job_ids(cl)
    browser.get(f"{cl.rapi_url}/ui/")
    wait_for(browser, lambda d: d.find_elements(By.ID, "login-user"), "the dashboard")
    browser.find_element(By.ID, "login-user").send_keys(ADMIN[0])
    browser.find_element(By.ID, "login-password").send_keys(ADMIN[1])
    browser.find_element(By.ID, "login-button").click()
    button = f'#instance-rows tr[data-instance="{INSTANCE}"] button[data-action="startup"]'
    wait_for(browser, lambda d: d.find_elements(By.CSS_SELECTOR, button), "the startup button")
    browser.find_element(By.CSS_SELECTOR, button).click()
    notice = wait_for(browser, lambda d: d.find_element(By.ID, "notice").text, "the job's notice")
    assert f"startup of {INSTANCE}" in str(notice)
    assert len(job_ids(cl) - before) == 1
