"""The dashboard in a real browser: headless Chromium, driven by Selenium, against the
controller's page (HTTPS, its self-signed certificate) over the API double running the seed:
the page asks for a token, and shows the queues once given one the API server allows.
Skipped with the reason where no Chromium can be found or installed."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests import yamlc
from tests.controller.conftest import controller_process, eventually
from tests.controller.test_seed import complete_job
from tests.scrape import get, metrics_port

ROOT = Path(__file__).resolve().parents[2]
FLAVOR, CQ, LQ = yamlc.safe_load_all(
    (ROOT / "examples" / "quickstart" / "01-queues.yaml").read_text()
)


def chromium() -> tuple[str, str]:
    """Chromium and its driver, installed with apt-get where that is possible."""

    def found() -> tuple[str | None, str | None]:
        return (shutil.which("chromium") or shutil.which("chromium-browser"),
                shutil.which("chromedriver"))  # fmt: skip

    browser, driver = found()
    if (not browser or not driver) and shutil.which("apt-get") and os.geteuid() == 0:
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        for command in (["apt-get", "update", "-qq"],
                        ["apt-get", "install", "-y", "-qq", "chromium", "chromium-driver"]):  # fmt: skip
            try:
                subprocess.run(command, env=env, capture_output=True, timeout=300, check=True)
            except (subprocess.SubprocessError, OSError):
                break
        browser, driver = found()
    if not browser or not driver:
        pytest.skip("no Chromium here (apt-get install chromium chromium-driver could not run)")
    return browser, driver


@pytest.fixture
def browser():
    binary, driver_path = chromium()
    webdriver = pytest.importorskip("selenium.webdriver")
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    # The controller's certificate is self-signed (as Kueue's metrics server's).
    flags = ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1200,900",
             "--ignore-certificate-errors")  # fmt: skip
    for flag in flags:
        options.add_argument(flag)
    driver = webdriver.Chrome(service=webdriver.ChromeService(driver_path), options=options)
    yield driver
    driver.quit()


def text_of(driver: Any, selector: str) -> str:
    """The visible text of what matches, read in one step: the page redraws every 2 s, so
    elements found one call earlier may be gone by the next."""
    script = (
        "return Array.from(document.querySelectorAll(arguments[0]))"
        ".map(e => e.innerText).join('\\n')"
    )
    return str(driver.execute_script(script, selector))


def test_the_dashboard_shows_the_queue_and_updates_when_a_job_finishes(cluster, browser, tmp_path):
    cluster.apply(FLAVOR, CQ, LQ)
    proc = controller_process(cluster, "--dashboard")
    try:
        port = metrics_port(proc)
        # The first Job runs until the page has been checked with the second waiting (a
        # fixed run time would race the browser on a loaded machine).
        first = cluster.job("first", "3", duration="600s")
        eventually(lambda: cluster.get("jobs", "first", "default")["spec"]["suspend"] is False)
        cluster.job("second", "3", duration="1s")
        url = f"https://127.0.0.1:{port}/dashboard/"
        browser.get(url)
        # No data without credentials: the page says why and asks for a token.
        eventually(lambda: "Unauthorized" in text_of(browser, "#refused"), 20, "the token form")
        browser.find_element("id", "token").send_keys("admin")
        browser.find_element("css selector", "#login button").click()
        section = '[data-queue="cluster-queue"]'
        eventually(lambda: "needs 3 cpu" in text_of(browser, f"{section} .reason"), 20,
                   "the pending job and its reason on the page")  # fmt: skip
        assert text_of(browser, f"{section} .reason") == (
            "WaitingForQuota: needs 3 cpu in flavor default-flavor; 1 of 4 free in cluster-queue"
        )
        bars = text_of(browser, f'{section} [data-resource="default-flavor/cpu"] .usage')
        assert bars == "3 / 4"
        browser.save_screenshot(str(tmp_path / "dashboard-pending.png"))
        # Job 1 finishes: the page, polling, shows the second admitted and the queue empty.
        complete_job(cluster, "first")
        eventually(lambda: "nothing pending" in text_of(browser, section), 40,
                   "the page to show the queue empty")  # fmt: skip
        events = text_of(browser, "#events .event")
        assert "Finished" in events
        assert f"default/{cluster.workload_of(first)['metadata']['name']}" in events
        browser.save_screenshot(str(tmp_path / "dashboard-after.png"))
        assert (tmp_path / "dashboard-pending.png").stat().st_size > 10_000
        # The page's data has nothing of pods, templates or Secrets; none without a token.
        assert get(port, "/dashboard/api/state", token=None)[0] == 401
        status, body = get(port, "/dashboard/api/state")
        assert status == 200
        assert "template" not in json.dumps(json.loads(body))
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=20)
