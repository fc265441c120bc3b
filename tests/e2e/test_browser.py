"""End to end: the report in a real browser (chromium, headless)."""

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

from bench import catalogue
from bench.outputs import diffs
from helpers import fast_first

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"  # Debian's chromium, chromium-driver


WIDTHS = {"laptop": (1280, 800), "phone": (390, 844)}


def browser(width, height):
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--window-size={width},{height}",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(executable_path=CHROMEDRIVER))
    # a window is at least 500 px wide: a phone's screen is emulated, as the browser's device mode does
    metrics = dict(width=width, height=height, deviceScaleFactor=1, mobile=width < 600)
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics)
    return driver


@pytest.mark.parametrize("width", fast_first(list(WIDTHS)))
def test_the_report_shows_in_a_real_browser(report, width, tmp_path):
    folder, summary = report
    driver = browser(*WIDTHS[width])
    try:
        driver.get((folder / "report.html").as_uri())
        assert driver.title.startswith("How much faster, at what memory cost?")
        assert driver.execute_script("return window.innerWidth") == WIDTHS[width][0]
        # the first screen: the answer, then the main table with speed and memory in view, no sideways scrolling
        screen_width, screen_height = WIDTHS[width]
        answer = driver.find_element(By.CSS_SELECTOR, ".answer")
        assert answer.is_displayed() and answer.location["y"] < screen_height / 2
        assert "Pays" in answer.text and "Flag" in answer.text  # the saved bench's all is slower than its part ddp
        main = driver.find_element(By.CSS_SELECTOR, "table.summary.main")
        headers = {h.text: h for h in main.find_elements(By.CSS_SELECTOR, "th") if h.is_displayed()}
        assert {"variant", "speed-up", "answer", "memory vs baseline"} <= set(headers), set(headers)
        for name in "speed-up", "memory vs baseline":
            box = headers[name].rect
            assert box["x"] >= 0 and box["x"] + box["width"] <= screen_width, (name, box)
        assert len(main.find_elements(By.CSS_SELECTOR, "tbody tr")) == (summary["kind"] == "train").sum()
        every = driver.find_element(By.CSS_SELECTOR, "details.every")
        full = every.find_element(By.CSS_SELECTOR, "table.summary")
        assert not full.is_displayed()  # one click away
        every.find_element(By.CSS_SELECTOR, "summary").click()
        assert full.is_displayed() and "val acc" in full.text
        tables_shown = [t for t in driver.find_elements(By.CSS_SELECTOR, "table.summary") if t.is_displayed()]
        assert len(tables_shown) == 3  # the main table, every column, the loaders alone
        rows = driver.find_elements(By.CSS_SELECTOR, "table.summary:not(.main) tbody tr")
        assert len(rows) == len(summary)
        images = driver.find_elements(By.CSS_SELECTOR, "figure.plot img")
        assert len(images) == 4
        for image in images:
            driver.execute_script("arguments[0].scrollIntoView()", image)
            assert image.is_displayed() and driver.execute_script("return arguments[0].naturalWidth", image) > 0
            assert image.size["width"] <= WIDTHS[width][0]  # fits the screen
        sections = driver.find_elements(By.CSS_SELECTOR, "section.technique")
        # the bench's: a CNN's techniques, but the GPU's own decode (nvjpeg: no CPU row)
        cnn = [n for n in diffs.TECHNIQUES if n not in catalogue.TRANSFORMER_ONLY and n != "nvjpeg"]
        assert [s.get_attribute("id") for s in sections] == [f"technique-{n}" for n in cnn]
        for section in sections:
            diff = section.find_element(By.CSS_SELECTOR, "pre.diff")
            driver.execute_script("arguments[0].scrollIntoView()", diff)
            assert diff.is_displayed() and diff.size["height"] > 100
            marked = section.find_elements(By.CSS_SELECTOR, ".line.added.marked")
            assert marked and marked[0].value_of_css_property("background-color") != "rgba(0, 0, 0, 0)"
        page = driver.execute_script("return document.documentElement.scrollWidth")
        assert page <= WIDTHS[width][0]  # wide tables and diffs scroll in their own boxes, not the page
        driver.execute_script("window.scrollTo(0, 0)")
        shot = tmp_path / f"report-{width}.png"
        assert driver.save_screenshot(str(shot)) and shot.stat().st_size > 10_000
    finally:
        driver.quit()


@pytest.mark.parametrize("width", fast_first(["phone", "laptop"]))
def test_the_other_modes_pages_show_in_the_report_on_any_screen(width, tmp_path):
    """The saved AVX-512 baseline summarized again beside its --max-batch, --parity and --tune-loader pages: each mode's
    section is shown with its table and its plot, the menu leads to them, and nothing widens the page (the menu wraps
    on a phone, a wide table scrolls in its own box, a plot fits the screen)."""
    import json
    import shutil

    from bench.modes import shown, speed
    from bench.stages.records import record
    from helpers import ROOT

    saved = ROOT / "baseline" / "cpu-2core-amd-epyc-avx512-bf16"
    pages = [name for shows in shown().values() for name in (shows.page, shows.plot) if (saved / name).exists()]
    for name in ["runs.csv", *pages]:
        shutil.copy(saved / name, tmp_path / name)
    runs = record.read_runs(tmp_path / "runs.csv")
    speed.write_outputs(tmp_path, runs["bench_id"].iloc[-1], json.loads((saved / "machine.json").read_text()))
    driver = browser(*WIDTHS[width])
    try:
        driver.get((tmp_path / "report.html").as_uri())
        driver.find_element(By.CSS_SELECTOR, 'nav a[href="#modes"]').click()
        sections = driver.find_elements(By.CSS_SELECTOR, "section.mode")
        assert [s.get_attribute("id") for s in sections] == ["mode-parity", "mode-max-batch", "mode-tune-loader"]
        for section in sections:
            driver.execute_script("arguments[0].scrollIntoView()", section)
            table = section.find_element(By.CSS_SELECTOR, "table.mode")
            assert table.is_displayed() and table.find_elements(By.CSS_SELECTOR, "tbody tr")
            image = section.find_element(By.CSS_SELECTOR, "figure.plot img")
            driver.execute_script("arguments[0].scrollIntoView()", image)
            assert driver.execute_script("return arguments[0].naturalWidth", image) > 0
            assert image.size["width"] <= WIDTHS[width][0]
        assert driver.execute_script("return document.documentElement.scrollWidth") <= WIDTHS[width][0]
    finally:
        driver.quit()
