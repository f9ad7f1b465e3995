"""``make book``: the notebooks as static pages with offline maths, checked in a browser."""

import re
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))

from build_book import build  # noqa: E402

# what a browser would fetch: a src/href, an ES import or a CSS url() on the internet, or a
# CDN host anywhere (URLs inside the template's CSS comments are not fetched)
ONLINE = re.compile(
    r"""(?:src|href)=["']https?://|from\s+["']https?://|url\(["']?https?://"""
    r"|jsdelivr|unpkg\.com|cdnjs",
    re.I,
)
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    return out, build(out)


def test_book_has_every_notebook_and_no_cdn(site):
    out, pages = site
    assert [p.name for p in pages] == [
        "01_motivating_example.html",
        "02_generalization_bound.html",
        "03_greedy_merges.html",
        "04_experiments.html",
        "05_when_the_utility_misleads.html",
        "06_assessment.html",
    ]
    assert (out / "mathjax" / "MathJax.js").is_file()
    for page in pages:
        text = page.read_text()
        assert "mathjax/MathJax.js?config=" in text
        assert not ONLINE.findall(text)  # nothing fetched online: no script, link or import
        assert "application/vnd.jupyter.widget" not in text  # no blank widget placeholders
        # figures inline (the assessment draws none), each with a one-line description
        images = re.findall(r"<img [^>]*>", text)
        assert all(re.search(r'alt="[^"]{20,}"', img) for img in images)
        assert "No description has been provided" not in text
        if page.name != "06_assessment.html":
            assert images and "data:image/png;base64" in text
    for name in ("02_generalization_bound.html", "03_greedy_merges.html"):
        assert "Static page: this picture is the slider" in (out / name).read_text()
    assert all(p.name in (out / "index.html").read_text() for p in pages)


@pytest.mark.skipif(CHROMIUM is None or DRIVER is None, reason="needs chromium and chromedriver")
def test_book_page_typesets_maths_and_loads_figures_in_a_browser(site):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.support.ui import WebDriverWait

    out, _ = site
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage"):
        opts.add_argument(arg)
    driver = webdriver.Chrome(service=Service(DRIVER), options=opts)
    try:
        driver.get((out / "02_generalization_bound.html").as_uri())
        WebDriverWait(driver, 180).until(
            lambda d: d.execute_script(
                "return !!(window.MathJax && MathJax.Hub && MathJax.Hub.queue"
                " && MathJax.Hub.queue.pending === 0 && MathJax.Hub.queue.running === 0"
                " && document.querySelectorAll('.MathJax').length > 0);"
            )
        )
        typeset = driver.execute_script("return document.querySelectorAll('.MathJax').length;")
        assert typeset > 10
        assert "$$" not in driver.execute_script("return document.body.innerText;")
        images = driver.execute_script(
            "return [...document.images].map(i => i.complete && i.naturalWidth > 0);"
        )
        assert len(images) >= 3 and all(images)
    finally:
        driver.quit()


def test_a_figure_without_a_description_is_named():
    import nbformat
    from build_book import figure_descriptions, with_alt_text

    png = {"output_type": "display_data", "data": {"image/png": "AAAA"}, "metadata": {}}
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("plot()", outputs=[png]), nbformat.v4.new_code_cell("")]
    with pytest.raises(SystemExit, match="x.ipynb, cell 0: a figure without a description"):
        figure_descriptions(nb, "x.ipynb")
    nb.cells[0].metadata["alt"] = 'Error "against" K'
    alts = figure_descriptions(nb, "x.ipynb")
    # as nbconvert writes it: a placeholder description on every image
    page = '<p><img alt="No description has been provided" src="data:image/png;base64,AAAA"/></p>'
    assert with_alt_text(page, alts, "x") == (
        '<p><img alt=\'Error "against" K\' src="data:image/png;base64,AAAA"/></p>'
    )
    with pytest.raises(SystemExit, match="2 figures on the page, 1 described"):
        with_alt_text(page * 2, alts, "x")
