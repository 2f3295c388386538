"""The dashboard in a real browser: Debian's Chromium driven by Selenium through Debian's
chromedriver (``scripts/infra/setup.sh browser``; nothing downloads a browser). A real
``xcore ui`` process serves a store holding a 100-trial sweep and a live xlocal experiment
with a hostile title and argument. Screenshots of each page go to test-artifacts/ui/."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from core_helpers import REPO
from xcore.testing import require_service

HOSTILE = "<script>window.__xss=1</script><img src=x onerror=\"window.__xss=2\">'\"&"
ARTIFACTS = Path(os.environ.get("XCORE_TEST_ARTIFACTS", REPO / "test-artifacts")) / "ui"
CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")

LAUNCH = textwrap.dedent('''
    import sys
    import xcore as xm
    import xlocal

    HOSTILE = {hostile!r}
    with xm.create_experiment("live " + HOSTILE, tags=["browser"]) as experiment:
        talk = "import json; print('hello log'); print('XCORE_RESULT', json.dumps({{'loss': 0.5}}))"
        sleep = "import time; print('sleeping', flush=True); time.sleep(300)"
        [talker, sleeper] = experiment.package([xm.binary(xlocal.Local.Spec(), sys.executable, args=["-c", talk]),
                                                xm.binary(xlocal.Local.Spec(), sys.executable, args=["-c", sleep])])
        experiment.add(xm.Job(talker, xlocal.Local(), args={{"note": HOSTILE}}))
        experiment.add(xm.Job(sleeper, xlocal.Local(), args={{"note": "sleeps"}}))
        experiment.add(xm.Job(sleeper, xlocal.Local(), args={{"note": "sleeps too"}}))
''')


def _until(condition, timeout: float = 20.0, what: str = "condition"):
    """Polls ``condition``; an element the live page replaced between finding and reading it is read again."""
    from selenium.common.exceptions import StaleElementReferenceException

    deadline = time.monotonic() + timeout
    while True:
        try:
            value = condition()
        except StaleElementReferenceException:
            value = None
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.1)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, object]]:
    root = tmp_path_factory.mktemp("ui-browser")
    env = {**os.environ, "XCORE_HOME": str(root / "home"), "XCORE_CONFIG_DIR": str(root / "config"),
           "XCORE_QUIET": "1"}
    env.pop("XCORE_STORE", None)
    seed = ("from xcore.launch.registry import open_store; from xcore.ui.sample import sample_sweep; "
            "print(sample_sweep(open_store(), 100, title='lr x batch sweep (100 trials)', tags=['sweep'], "
            "curves=True))")
    sweep_id = int(subprocess.run([sys.executable, "-c", seed], env=env, check=True, capture_output=True,
                                  text=True).stdout)
    script = root / "live_launch.py"
    script.write_text(LAUNCH.format(hostile=HOSTILE))
    subprocess.run([sys.executable, "-m", "xcore.cli.main", "launch", str(script)], env=env, check=True,
                   capture_output=True, text=True, timeout=120)
    ui = subprocess.Popen([sys.executable, "-m", "xcore.cli.main", "ui", "--port", "0", "--poll", "0.5"], env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = ui.stdout.readline() if ui.stdout else ""
        match = re.search(r"(http://[^/\s]+)/\?token=(\S+)", line)  # a token on loopback too
        assert match, f"xcore ui printed no URL with its token: {line!r}"
        yield {"url": match.group(1), "token": match.group(2), "sweep": sweep_id, "live": sweep_id + 1, "env": env}
    finally:
        ui.terminate()
        ui.wait(10)
        subprocess.run([sys.executable, "-m", "xcore.cli.main", "cancel", str(sweep_id + 1)], env=env,
                       capture_output=True, timeout=60)  # the sleepers, if a test failed before cancelling them


@pytest.fixture(scope="module")
def browser(server: dict[str, object]) -> Iterator[object]:
    """Chromium that opened the printed URL once, so it holds the dashboard's token cookie."""
    require_service("browser", bool(CHROMIUM and CHROMEDRIVER),
                    "run `sudo bash scripts/infra/setup.sh browser` (Debian chromium + chromium-driver)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1400,1000",
                 "--disable-gpu", "--no-first-run", "--disable-extensions"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(30)
    try:
        driver.get(f"{server['url']}/?token={server['token']}")
        yield driver
    finally:
        driver.quit()


def _shot(driver, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(ARTIFACTS / f"{name}.png"))


def _no_script_ran(driver) -> None:
    assert driver.execute_script("return window.__xss === undefined"), "a hostile value ran as script"


def test_experiments_list(server, browser):
    from selenium.webdriver.common.by import By

    browser.get(server["url"] + "/")
    titles = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "#experiments a.title")]
    assert titles[0] == "live " + HOSTILE  # newest first, and the title is text
    assert "lr x batch sweep (100 trials)" in titles
    _no_script_ran(browser)
    _shot(browser, "01-experiments")


def test_sweep_page_sorts_by_a_result_and_draws_plot_and_timeline(server, browser):
    from selenium.webdriver.common.by import By

    browser.get(f"{server['url']}/experiments/{server['sweep']}")
    _until(lambda: browser.find_elements(By.CSS_SELECTOR, "#plot .uplot canvas"), what="the plot")
    _until(lambda: browser.find_elements(By.CSS_SELECTOR, "#timeline .uplot canvas"), what="the timeline")
    assert "page 1 of 2" in browser.find_element(By.CSS_SELECTOR, "#units-table .pager").text
    assert len(browser.find_elements(By.CSS_SELECTOR, "#units tbody tr")) == 50
    browser.find_element(By.CSS_SELECTOR, 'a.sort[data-sort="result:loss"]').click()
    _until(lambda: "sort=result%3Aloss" in browser.current_url, what="the sorted page")

    def losses() -> list[float]:
        return [float(c.text) for c in browser.find_elements(By.CSS_SELECTOR, '#units td[data-result="loss"]')
                if c.text]

    ascending = losses()
    assert len(ascending) > 10 and ascending == sorted(ascending)
    browser.find_element(By.CSS_SELECTOR, 'a.sort[data-sort="result:loss"]').click()
    _until(lambda: "sort=-result%3Aloss" in browser.current_url, what="the descending sort")
    descending = losses()
    assert descending == sorted(descending, reverse=True) and descending[0] > ascending[0]
    _until(lambda: browser.find_elements(By.CSS_SELECTOR, "#plot .uplot canvas"), what="the plot")
    _shot(browser, "02-sweep")


def test_hostile_argument_renders_as_text(server, browser):
    from selenium.webdriver.common.by import By

    browser.get(f"{server['url']}/experiments/{server['live']}")
    _until(lambda: browser.find_elements(By.CSS_SELECTOR, "#units tbody tr"), what="the units")
    assert browser.find_element(By.TAG_NAME, "h1").text.endswith("live " + HOSTILE)
    cells = [c.text for c in browser.find_elements(By.CSS_SELECTOR, "#units td.arg")]
    assert any(HOSTILE in c for c in cells), cells
    assert not browser.find_elements(By.CSS_SELECTOR, "#units img")  # the <img> is text, not an element
    _no_script_ran(browser)
    _shot(browser, "03-hostile")


def test_log_is_shown(server, browser):
    from selenium.webdriver.common.by import By

    browser.get(f"{server['url']}/experiments/{server['live']}/units/1")
    _until(lambda: "hello log" in browser.find_element(By.ID, "log").text, what="the log")
    _until(lambda: _reload_has(browser, "#results", "0.5"), timeout=20, what="the reported result")
    _no_script_ran(browser)
    _shot(browser, "04-log")


def _reload_has(browser, selector: str, text: str) -> bool:
    from selenium.webdriver.common.by import By

    browser.refresh()
    found = browser.find_elements(By.CSS_SELECTOR, selector)
    return bool(found) and text in found[0].text


def test_cancel_a_running_unit(server, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    page = f"{server['url']}/experiments/{server['live']}/units/2"
    browser.get(page)
    _until(lambda: _reload_has(browser, "#unit-status", "RUNNING") and "sleeping" in
           browser.find_element(By.ID, "log").text, timeout=30, what="the sleeper to run")
    browser.find_element(By.ID, "cancel-unit").click()
    alert = WebDriverWait(browser, 5).until(lambda d: d.switch_to.alert)
    assert "Cancel work unit" in alert.text
    alert.accept()
    _until(lambda: _reload_has(browser, "#unit-status", "CANCELLED"), timeout=30, what="CANCELLED")
    assert not browser.find_elements(By.ID, "cancel-unit")
    _shot(browser, "05-cancelled")


def test_the_experiment_page_updates_itself(server, browser):
    from selenium.webdriver.common.by import By

    browser.get(f"{server['url']}/experiments/{server['live']}")
    row = '#units tr[data-unit="3"] .status'
    _until(lambda: browser.find_element(By.CSS_SELECTOR, row).text in ("PENDING", "RUNNING"), what="unit 3 active")
    browser.execute_script("window.__notReloaded = true")
    subprocess.run([sys.executable, "-m", "xcore.cli.main", "cancel", f"{server['live']}/3"], env=server["env"],
                   check=True, capture_output=True, timeout=60)
    _until(lambda: browser.find_element(By.CSS_SELECTOR, row).text == "CANCELLED", timeout=20,
           what="the row to turn CANCELLED without a reload")
    assert browser.execute_script("return window.__notReloaded === true")
    assert "1 cancelled" in browser.find_element(By.ID, "counts").text or "2 cancelled" in \
        browser.find_element(By.ID, "counts").text
    _shot(browser, "06-live-update")


def test_a_long_coloured_log_with_progress_lines_reads_as_a_terminal_shows_it(server, browser):
    """Issue 26: colour codes were shown raw, ``\\r`` progress updates ran together and a log
    over 2 MiB was cut without a word. Unit 1 has ended, so its log file is rewritten here."""
    import json

    from selenium.webdriver.common.by import By

    shown = subprocess.run([sys.executable, "-m", "xcore.cli.main", "show", f"{server['live']}/1", "--json"],
                           env=server["env"], check=True, capture_output=True, text=True, timeout=60)
    [unit] = json.loads(shown.stdout)["work_units"]
    log_path = Path(unit["jobs"][0]["log_path"])
    log_path.write_bytes(b"x" * 99 + b"\n" + b"y" * 3 * 1024 * 1024 + b"\n"  # 3 MiB: over the 2 MiB sent at once
                         + b"\x1b[31mred\x1b[0m done\r\n 10%|#   |\r 90%|### |")
    browser.get(f"{server['url']}/experiments/{server['live']}/units/1")
    log = _until(lambda: browser.find_element(By.ID, "log").text.endswith("red done\n 90%|### |") and
                 browser.find_element(By.ID, "log").text, what="the log's last lines")
    assert "\x1b" not in log and "[31m" not in log and "10%" not in log and not log.startswith("x")
    notice = browser.find_element(By.ID, "log-skipped")
    assert notice.is_displayed() and "MiB" in notice.text
    assert "whole=1" in browser.find_element(By.ID, "log-whole").get_attribute("href")
    _no_script_ran(browser)
    _shot(browser, "07-long-log")


def _sweep_units(server, where: str) -> list[int]:
    """The ids ``where`` selects, in Python over ``xcore show --json`` (not the filter language)."""
    import json

    shown = subprocess.run([sys.executable, "-m", "xcore.cli.main", "show", str(server["sweep"]), "--json"],
                           env=server["env"], check=True, capture_output=True, text=True, timeout=60)
    units = json.loads(shown.stdout)["work_units"]
    assert where == "lr<=0.03 loss<0.05"
    return [u["id"] for u in units if u["args"]["lr"] <= 0.03 and u["results"].get("loss", 1) < 0.05]


def test_the_filter_box_selects_what_python_selects_and_says_what_is_wrong(server, browser):
    """Issue 26: the filter language in the dashboard, the same function as ``show --where``."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    expected = _sweep_units(server, "lr<=0.03 loss<0.05")
    assert 0 < len(expected) <= 50
    browser.get(f"{server['url']}/experiments/{server['sweep']}")
    box = browser.find_element(By.ID, "where")
    box.send_keys("lr<=0.03 loss<0.05", Keys.ENTER)
    _until(lambda: "where=" in browser.current_url, what="the filtered page")
    rows = [int(r.get_attribute("data-unit")) for r in browser.find_elements(By.CSS_SELECTOR, "#units tbody tr")]
    assert rows == expected
    assert browser.find_element(By.ID, "matching").text == f"{len(expected)} of 100 work units"
    _shot(browser, "08-filter")
    box = browser.find_element(By.ID, "where")
    box.clear()
    box.send_keys("lr<=0.03 loss<", Keys.ENTER)
    error = _until(lambda: browser.find_elements(By.ID, "filter-error"), what="the filter's message")[0]
    assert error.is_displayed() and "expected a value after 'loss<' at the end" in error.text
    assert not browser.find_elements(By.CSS_SELECTOR, "#units tbody tr")
    assert browser.find_element(By.ID, "where").get_attribute("value") == "lr<=0.03 loss<"  # kept, to fix


def _traces(browser) -> str:
    from selenium.webdriver.common.by import By

    found = browser.find_elements(By.CSS_SELECTOR, "#curves")
    return (found[0].get_attribute("data-traces") or "") if found and \
        found[0].find_elements(By.CSS_SELECTOR, ".uplot canvas") else ""


def test_curves_overlay_the_first_trials_then_the_ticked_ones_and_compare(server, browser):
    """Issue 26: learning curves on the experiment page (the first 10 shown, or those ticked),
    the compare view of ticked trials, and a unit's own curves."""
    from selenium.webdriver.common.by import By

    browser.get(f"{server['url']}/experiments/{server['sweep']}?sort=result:loss")
    _until(lambda: _traces(browser) == "10", what="10 curves")
    ticks = browser.find_elements(By.CSS_SELECTOR, '#units input[name="unit"]')
    first, second = ticks[0].get_attribute("value"), ticks[3].get_attribute("value")
    ticks[0].click()
    ticks[3].click()
    _until(lambda: _traces(browser) == "2", what="the two ticked trials' curves")
    _shot(browser, "09-curves")
    browser.find_element(By.ID, "compare").click()
    _until(lambda: "/compare?" in browser.current_url, what="the compare page")
    heads = [h.text for h in browser.find_elements(By.CSS_SELECTOR, "#compare-table thead th")]
    assert heads == ["", f"WU {first}", f"WU {second}"]
    assert [r.text.split()[0] for r in browser.find_elements(By.CSS_SELECTOR, "#compare-table tr.result")] == \
        ["loss", "accuracy"]
    _until(lambda: _traces(browser) == "2", what="the compared curves")
    _shot(browser, "10-compare")
    browser.get(f"{server['url']}/experiments/{server['sweep']}/units/{first}")
    _until(lambda: _traces(browser) == "1", what="the unit's curve")
    _no_script_ran(browser)


def test_group_means_draw_bands_over_the_curves(server, browser):
    """Issue 26: grouped by lr, the curve overlay adds each group's mean curve with a band of
    ±1 std (uPlot bands), and the table lists the groups."""
    from selenium.webdriver.common.by import By

    browser.get(f"{server['url']}/experiments/{server['sweep']}?group_by=lr")
    _until(lambda: browser.execute_script(
        "const c = document.getElementById('curves'); return c && c.uplot && c.dataset.bands === '5'"),
        what="five group bands")
    labels = browser.execute_script("return document.getElementById('curves').uplot.series.map((s) => s.label)")
    assert [label for label in labels if label.endswith("(mean)")] == \
        [f"lr={lr} (mean)" for lr in ("0.1", "0.03", "0.01", "0.003", "0.3")]
    assert browser.execute_script("return document.getElementById('curves').uplot.bands.length") == 5
    assert len(browser.find_elements(By.CSS_SELECTOR, "#groups tr.group")) == 5
    _shot(browser, "11-group-bands")
    first = browser.find_element(By.CSS_SELECTOR, "#groups tr.group")
    lr = first.find_elements(By.CSS_SELECTOR, "td.arg")[0].text
    first.find_element(By.CSS_SELECTOR, "button.expand").click()  # the group opens in place
    members = _until(lambda: browser.find_elements(By.CSS_SELECTOR, "#groups tr.members table.members tbody tr"),
                     what="the group's trials")
    assert len(members) == 20 and {m.find_elements(By.CSS_SELECTOR, "td.arg")[0].text for m in members} == {lr}
    assert len(browser.find_elements(By.CSS_SELECTOR, "#units tbody tr")) == 50  # the table below is as it was
    browser.execute_script("arguments[0].scrollIntoView()", first)
    _shot(browser, "11b-group-open")
    browser.find_element(By.CSS_SELECTOR, "#groups button.expand").click()
    _until(lambda: not browser.find_elements(By.CSS_SELECTOR, "#groups tr.members"), what="the group to close")


def _parcoords(browser, what: str) -> str:
    return browser.execute_script(
        "const c = document.querySelector('#parcoords canvas'); return c ? c.dataset[arguments[0]] || '' : ''", what)


def _click_at(browser, element, x: float, y: float) -> None:
    """A click at (x, y) pixels from ``element``'s top left (Selenium offsets from its centre)."""
    from selenium.webdriver.common.action_chains import ActionChains

    size = element.size
    ActionChains(browser).move_to_element_with_offset(element, int(x - size["width"] / 2),
                                                      int(y - size["height"] / 2)).click().perform()


def test_parallel_coordinates_draw_failed_trials_dashed_and_a_click_opens_the_trial(server, browser):
    """Issue 26: one line per trial over its arguments and results; failed trials apart (grey,
    dashed); clicking a line opens that trial's page."""
    import json

    from selenium.webdriver.common.by import By

    shown = subprocess.run([sys.executable, "-m", "xcore.cli.main", "show", str(server["sweep"]), "--json"],
                           env=server["env"], check=True, capture_output=True, text=True, timeout=60)
    units = json.loads(shown.stdout)["work_units"]
    failed = sum(u["status"] == "FAILED" for u in units)
    browser.get(f"{server['url']}/experiments/{server['sweep']}")
    _until(lambda: _parcoords(browser, "lines") == "100", what="100 lines")
    assert _parcoords(browser, "failed") == str(failed) and failed > 0
    canvas = browser.find_element(By.CSS_SELECTOR, "#parcoords canvas")
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", canvas)
    _shot(browser, "12-parallel-coordinates")
    seed_axis = 2  # lr, batch_size, seed, loss, accuracy: each trial has its own seed
    lines = browser.execute_script("return document.getElementById('parcoords').parcoords.points(arguments[0], 0.5)",
                                   seed_axis)  # half way from seed to loss: [[id, x, y], ...]
    status = {u["id"]: u["status"] for u in units}

    def clearest(wanted_status: str) -> list:
        """The line of that status farthest from any other line there, so the click is not a near tie."""
        def room(line: list) -> float:
            return min(abs(line[2] - other[2]) for other in lines if other[0] != line[0])
        return max((line for line in lines if status[line[0]] == wanted_status), key=room)

    for wanted_status in ("COMPLETED", "FAILED"):
        wanted, x, y = clearest(wanted_status)
        _click_at(browser, canvas, x, y)
        page = f"/units/{wanted}"
        _until(lambda: browser.current_url.endswith(page), what=f"trial {wanted}'s page")  # noqa: B023
        assert browser.find_element(By.TAG_NAME, "h1").text.startswith(f"Work unit {server['sweep']}/{wanted}")
        browser.back()
        _until(lambda: _parcoords(browser, "lines") == "100", what="the lines again")
        canvas = browser.find_element(By.CSS_SELECTOR, "#parcoords canvas")
        browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", canvas)


def _record(server, unit: int, values: dict) -> None:
    """Write results for a work unit of the sweep, as a collector would: a live change."""
    code = ("import sys, json; from xcore.launch.registry import open_store; s = open_store(); "
            "[u] = s.work_units(int(sys.argv[1]), [int(sys.argv[2])]); "
            "s.record_results(u.jobs[0].id, json.loads(sys.argv[3]), final=True)")
    import json

    subprocess.run([sys.executable, "-c", code, str(server["sweep"]), str(unit), json.dumps(values)],
                   env=server["env"], check=True, capture_output=True, timeout=60)


def test_a_brushed_range_and_a_zoom_survive_live_updates(server, browser):
    """Issue 26: drag along an axis to keep a range of lines; drag over the scatter plot to zoom;
    new data arrives (the page updates itself) and both stay."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    browser.get(f"{server['url']}/experiments/{server['sweep']}")
    _until(lambda: _parcoords(browser, "lines") == "100", what="100 lines")
    canvas = browser.find_element(By.CSS_SELECTOR, "#parcoords canvas")
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", canvas)
    top = browser.execute_script("return document.getElementById('parcoords').parcoords.pointOf(1, 0)")  # lr=0.1
    size = canvas.size
    ActionChains(browser).move_to_element_with_offset(canvas, int(top["x"] - size["width"] / 2),
                                                      int(top["y"] - 8 - size["height"] / 2)) \
        .click_and_hold().move_by_offset(0, 16).release().perform()
    _until(lambda: _parcoords(browser, "lines") == "20", what="the 20 lr=0.1 lines")
    plot = browser.find_element(By.CSS_SELECTOR, "#plot .u-over")
    ActionChains(browser).move_to_element_with_offset(plot, -100, 0).click_and_hold().move_by_offset(120, 0) \
        .release().perform()
    zoomed = _until(lambda: browser.execute_script(
        "const u = document.getElementById('plot').uplot; return u.zoomed && [u.scales.x.min, u.scales.x.max]"),
        what="a zoomed plot")
    updates = browser.execute_script("return document.getElementById('experiment').dataset.updates || '0'")
    _record(server, 4, {"loss": 9.0})  # unit 4 runs: a result changes what the page shows
    _until(lambda: browser.execute_script("return document.getElementById('experiment').dataset.updates || '0'")
           != updates, what="a live update")
    assert _parcoords(browser, "lines") == "20"
    assert browser.execute_script(
        "const u = document.getElementById('plot').uplot; return [u.scales.x.min, u.scales.x.max]") == zoomed
    _shot(browser, "13-brushed")


def test_clicking_a_point_of_the_plot_opens_its_trial(server, browser):
    """Issue 26: a point of the result-against-argument plot opens its trial."""
    from selenium.webdriver.common.by import By

    browser.get(f"{server['url']}/experiments/{server['sweep']}")
    _until(lambda: browser.execute_script("const p = document.getElementById('plot'); return p.uplot && p.scatter"),
           what="the plot")
    points = browser.execute_script(
        "const p = document.getElementById('plot');"
        "return p.scatter.map((s) => [s[3], xcoreCharts.scatterPointOf(p, s[3])])")
    spot = {i: (at["x"], at["y"]) for i, at in points}

    def room(i: int) -> float:  # to the nearest point drawn elsewhere (points may coincide)
        return min((abs(spot[i][0] - x) + abs(spot[i][1] - y) for x, y in spot.values()
                    if abs(spot[i][0] - x) + abs(spot[i][1] - y) >= 1), default=99.0)

    chosen = max(spot, key=room)
    assert room(chosen) >= 4
    same = {i for i, (x, y) in spot.items() if abs(x - spot[chosen][0]) + abs(y - spot[chosen][1]) < 1}
    over = browser.find_element(By.CSS_SELECTOR, "#plot .u-over")
    _click_at(browser, over, *spot[chosen])
    _until(lambda: "/units/" in browser.current_url, what="a trial's page")
    assert int(browser.current_url.rsplit("/", 1)[1]) in same
