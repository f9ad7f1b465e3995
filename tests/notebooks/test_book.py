"""``make book``: the notebooks as a Sphinx book (MyST-NB, Sphinx Book Theme), offline,
checked as files and in a browser: a table of contents, previous/next, search, maths."""

import re
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))

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
PAGES = [
    "01_motivating_example.html",
    "02_generalization_bound.html",
    "03_greedy_merges.html",
    "04_experiments.html",
    "05_when_the_utility_misleads.html",
]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    return out, build(out)


def test_the_book_has_a_contents_page_every_notebook_and_nothing_online(site):
    out, pages = site
    assert [p.name for p in pages] == PAGES
    index = (out / "index.html").read_text()
    assert all(f'href="{name}"' in index for name in PAGES)  # the table of contents
    assert (out / "search.html").is_file() and (out / "searchindex.js").is_file()
    assert (out / "_static" / "mathjax" / "MathJax.js").is_file()
    for page in [*pages, out / "index.html", out / "search.html"]:
        text = page.read_text()
        assert not ONLINE.findall(text), (page.name, ONLINE.findall(text)[:3])
        assert page.name.startswith("0") is ("mathjax/MathJax.js?config=" in text)
    for k, page in enumerate(pages):
        text = page.read_text()
        assert "application/vnd.jupyter.widget" not in text  # no blank widget placeholders
        images = re.findall(r"<img [^>]*>", text)
        assert images and all(re.search(r'alt="[^"]{20,}"', img) for img in images), page.name
        assert "No description has been provided" not in text
        # previous and next, in the table of contents' order
        if k + 1 < len(pages):
            assert re.search(rf'<a class="right-next"\s+href="{pages[k + 1].name}"', text)
        if k:
            assert re.search(rf'<a class="left-prev"\s+href="{pages[k - 1].name}"', text)
        # what a student may read: no solution, no pointer to the instructor's material
        for word in ("# Solution", "make classroom", "instructor edition", "docs/solutions"):
            assert word not in text, (page.name, word)
        assert "Your instructor has the solutions." in text
    for name in ("02_generalization_bound.html", "03_greedy_merges.html"):
        assert "Static page: this picture is the slider" in (out / name).read_text()


def test_a_css_or_script_file_of_the_book_fetches_nothing_online(site):
    out, _ = site
    for path in (out / "_static").rglob("*"):
        if path.suffix in (".css", ".js") and "mathjax" not in path.parts:
            text = path.read_text(errors="ignore")
            found = re.findall(r"""url\(["']?https?://|import\s+["']https?://""", text)
            assert not found, (path, found[:3])


def _driver():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--window-size=1400,1000",
    ):
        opts.add_argument(arg)
    return webdriver.Chrome(service=Service(DRIVER), options=opts)


@pytest.mark.skipif(CHROMIUM is None or DRIVER is None, reason="needs chromium and chromedriver")
def test_a_reader_typesets_maths_follows_next_and_searches(site):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import WebDriverWait

    out, _ = site
    driver = _driver()
    wait = WebDriverWait(driver, 180)
    try:
        driver.get((out / "02_generalization_bound.html").as_uri())
        wait.until(
            lambda d: d.execute_script(
                "return !!(window.MathJax && MathJax.Hub && MathJax.Hub.queue"
                " && MathJax.Hub.queue.pending === 0 && MathJax.Hub.queue.running === 0"
                " && document.querySelectorAll('.MathJax').length > 10);"
            )
        )
        assert "$$" not in driver.execute_script("return document.body.innerText;")
        images = driver.execute_script(
            "return [...document.images].map(i => i.complete && i.naturalWidth > 0);"
        )
        assert len(images) >= 3 and all(images)
        # "next" leads to the following notebook
        driver.find_element(By.CSS_SELECTOR, "a.right-next").click()
        wait.until(lambda d: d.current_url.endswith("03_greedy_merges.html"))
        assert "Algorithm 2 step by step" in driver.title
        # the search box finds a term, with a link to the page that holds it
        driver.execute_script("document.querySelector('button.search-button__button').click();")
        box = wait.until(
            lambda d: next(
                (
                    e
                    for e in d.find_elements(By.CSS_SELECTOR, "form.bd-search input[type=search]")
                    if e.is_displayed()
                ),
                None,
            )
        )
        box.send_keys("dendrogram", Keys.ENTER)
        wait.until(lambda d: "search.html" in d.current_url)
        found = wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#search-results li a"))
        assert any("03_greedy_merges.html" in (a.get_attribute("href") or "") for a in found)
    finally:
        driver.quit()


def test_a_figure_without_a_description_is_named():
    import nbformat
    from build_book import figure_descriptions, for_the_book

    png = {"output_type": "display_data", "data": {"image/png": "AAAA"}, "metadata": {}}
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("plot()", outputs=[png]), nbformat.v4.new_code_cell("")]
    with pytest.raises(SystemExit, match="x.ipynb, cell 0: a figure without a description"):
        figure_descriptions(nb, "x.ipynb")
    nb.cells[0].metadata["alt"] = 'Error "against" K'
    assert figure_descriptions(nb, "x.ipynb") == ['Error "against" K']
    book = for_the_book(nb, "x.ipynb")
    assert book.cells[0].metadata["mystnb"] == {"image": {"alt": 'Error "against" K'}}
