"""The notebooks in a real browser: JupyterLab driven by headless Chromium through Selenium.

Starts JupyterLab on 127.0.0.1 with a token, opens notebooks 02 and 03, runs every cell,
moves a slider and checks that the widget redraws (03: the alpha slider changes the drawn
groups), then stops every process it started. Skipped, with the reason, where Chromium,
its driver or Selenium is missing (``.ci/run`` installs them).
"""

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")

try:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import WebDriverWait
except ImportError:  # reported by the skip below
    webdriver = None

pytestmark = pytest.mark.skipif(
    webdriver is None or CHROMIUM is None or DRIVER is None,
    reason="browser test needs Chromium, chromedriver and selenium "
    "(Debian: apt-get install chromium chromium-driver; pip install selenium)",
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A JupyterLab server on 127.0.0.1 serving a copy of the notebooks; yields its URL."""
    work = tmp_path_factory.mktemp("lab")
    for name in ("02_generalization_bound.ipynb", "03_greedy_merges.ipynb"):
        shutil.copy(ROOT / "notebooks" / name, work / name)
    # a kernelspec, or JupyterLab asks which kernel to start
    designer = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell(c)
            for c in (
                "import hcct_lite as hl",
                "mode = hl.notebook_mode()",
                'hl.federation_designer(preset="rotated pairs")',
            )
        ],
        metadata={
            "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}
        },
    )
    nbformat.write(designer, work / "designer.ipynb")
    port, token = _free_port(), secrets.token_hex(16)
    env = dict(os.environ, HCCT_MODE="quick", JUPYTER_CONFIG_DIR=str(work / ".config"))
    env.pop("HCCT_FIG_DIR", None)
    # what a student's kernel uses (make test sets MPLBACKEND=Agg, which draws no images)
    env["MPLBACKEND"] = "module://matplotlib_inline.backend_inline"
    log = open(work / "lab.log", "w")
    cmd = [
        sys.executable,
        "-m",
        "jupyterlab",
        "--no-browser",
        "--ip=127.0.0.1",
        f"--port={port}",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={work}",
        "--LabApp.expose_app_in_browser=True",
        "--allow-root",
    ]
    proc = subprocess.Popen(
        cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 90
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None or time.time() > deadline:
                    text = (work / "lab.log").read_text()
                    raise RuntimeError(f"JupyterLab did not start:\n{text}") from None
                time.sleep(0.5)
        yield url, token
    finally:
        if proc.poll() is None:  # the server and every kernel it started
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()


@pytest.fixture(scope="module")
def browser():
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--window-size=1400,1000",
    ):
        opts.add_argument(arg)
    driver = webdriver.Chrome(service=Service(DRIVER), options=opts)
    try:
        yield driver
    finally:
        driver.quit()


def _open_and_run(driver, lab, name, min_cells=6):
    url, token = lab
    driver.get(f"{url}/lab/tree/{name}?token={token}")
    wait = WebDriverWait(driver, 120)
    wait.until(
        lambda d: d.execute_script(
            "const a = window.jupyterapp; const w = a && a.shell.currentWidget;"
            "return !!(w && w.context && w.context.path.endsWith(arguments[0])"
            " && w.sessionContext && w.sessionContext.session"
            " && w.sessionContext.session.kernel.connectionStatus === 'connected');",
            name,
        )
    )
    driver.execute_script("window.jupyterapp.commands.execute('notebook:run-all-cells');")
    # done when the kernel is idle again and no cell waits ("[*]") any more
    time.sleep(2)
    wait.until(
        lambda d: d.execute_script(
            "const w = window.jupyterapp.shell.currentWidget;"
            "const busy = [...document.querySelectorAll('.jp-InputPrompt')]"
            "  .some(p => p.textContent.includes('*'));"
            "return w.sessionContext.session.kernel.status === 'idle' && !busy;"
        )
    )
    errors = driver.find_elements(
        By.CSS_SELECTOR, ".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']"
    )
    tracebacks = [e.text for e in errors if "Traceback" in e.text or "Error" in e.text]
    assert not tracebacks, tracebacks[0][:2000]
    executed = driver.execute_script(
        "return [...document.querySelectorAll('.jp-InputPrompt')]"
        ".filter(p => /\\[\\d+\\]/.test(p.textContent)).length;"
    )
    assert executed >= min_cells, f"only {executed} cells ran in {name}"


def _close_all(driver):
    driver.execute_script("window.jupyterapp.commands.execute('application:close-all');")


def _widget_image(driver, description):
    """The src of the image drawn by the interactive widget holding a slider ``description``."""
    return driver.execute_script(
        "const labels = [...document.querySelectorAll('.widget-interact .widget-label')];"
        "const label = labels.find(l => l.textContent.trim() === arguments[0]);"
        "if (!label) return null;"
        "const box = label.closest('.widget-interact');"
        "const img = box.querySelector('.jp-OutputArea-output img');"
        "return img ? img.src : null;",
        description,
    )


def _widget_text(driver, description):
    """The text the interactive widget holding a slider ``description`` printed ('' if none)."""
    return driver.execute_script(
        "const labels = [...document.querySelectorAll('.widget-interact .widget-label')];"
        "const label = labels.find(l => l.textContent.trim() === arguments[0]);"
        "if (!label) return '';"
        "const box = label.closest('.widget-interact');"
        "return [...box.querySelectorAll('.jp-OutputArea-output')].map(o => o.textContent)"
        ".join(' ');",
        description,
    )


def _set_slider(driver, description, value, within=".widget-interact"):
    """Type ``value`` into the readout of the slider labelled ``description`` in ``within``."""
    readout = driver.execute_script(
        "const labels = [...document.querySelectorAll(arguments[1] + ' .widget-label')];"
        "const label = labels.find(l => l.textContent.trim() === arguments[0]);"
        "return label.closest('.widget-slider, .widget-hslider').querySelector('.widget-readout');",
        description,
        within,
    )
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", readout)
    readout.click()
    readout.send_keys(Keys.CONTROL, "a")
    readout.send_keys(str(value), Keys.ENTER)


def _slider_redraws(driver, description, value):
    wait = WebDriverWait(driver, 60)
    before = wait.until(lambda d: _widget_image(d, description))
    _set_slider(driver, description, value)
    after = wait.until(lambda d: (src := _widget_image(d, description)) and src != before and src)
    return before, after


def test_notebook_02_runs_and_its_bound_sliders_redraw(lab, browser):
    _open_and_run(browser, lab, "02_generalization_bound.ipynb")
    before, after = _slider_redraws(browser, "divergence", 0.6)
    assert before.startswith("data:image/png") and after.startswith("data:image/png")
    _close_all(browser)


def test_notebook_03_alpha_slider_changes_the_drawn_groups(lab, browser):
    _open_and_run(browser, lab, "03_greedy_merges.ipynb")
    # alpha = 100 draws the three hidden clusters; alpha = 10^4 one group
    WebDriverWait(browser, 60).until(lambda d: "group(s)" in _widget_text(d, "alpha"))
    assert "alpha = 100: 3 group(s)" in _widget_text(browser, "alpha")
    before, after = _slider_redraws(browser, "alpha", 10000)
    assert before != after
    WebDriverWait(browser, 30).until(lambda d: "1 group(s)" in _widget_text(d, "alpha"))
    assert "alpha = 10000: 1 group(s)" in _widget_text(browser, "alpha")


def _designer(driver):
    """The designer's drawn picture (img src) and partition text."""
    return driver.execute_script(
        "const box = document.querySelector('.hcct-designer');"
        "if (!box) return null;"
        "const img = box.querySelector('.jp-OutputArea-output img');"
        "const text = box.querySelector('.hcct-partition');"
        "return {img: img ? img.src : null, text: text ? text.textContent : ''};"
    )


def test_the_federation_designer_redraws_when_alpha_and_a_silo_move(lab, browser):
    _open_and_run(browser, lab, "designer.ipynb", min_cells=3)
    wait = WebDriverWait(browser, 60)
    first = wait.until(lambda d: (s := _designer(d)) and s["img"] and "group(s)" in s["text"] and s)
    assert ": 4 group(s) [[1, 2], [3, 4], [5, 6], [7, 8]]" in first["text"]  # alpha about 50
    _set_slider(browser, "alpha", 0.1, within=".hcct-designer")
    second = wait.until(
        lambda d: (
            (s := _designer(d)) and s["img"] != first["img"] and "8 group(s)" in s["text"] and s
        )
    )
    assert second["text"].startswith("alpha = 0.1: 8 group(s)")
    _set_slider(
        browser, "silo 1: samples", 300, within=".hcct-designer"
    )  # one silo retrained, the picture redrawn
    wait.until(lambda d: (s := _designer(d)) and s["img"] not in (first["img"], second["img"]))
    _close_all(browser)
