"""``make book``: the notebooks, the guides and the API reference as one Sphinx book
(MyST-NB, Sphinx Book Theme, autodoc), offline, checked as files and in a browser: a table
of contents in three parts, previous/next, search (an API name too), maths."""

import dataclasses
import inspect
import posixpath
import re
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

from book_sources import API_PAGES, book_links  # noqa: E402
from build_book import build  # noqa: E402

import hcct_lite  # noqa: E402

# what a browser would fetch: a src/href, an ES import or a CSS url() on the internet, or a
# CDN host anywhere (URLs inside the template's CSS comments are not fetched)
ONLINE = re.compile(
    r"""(?:src|href)=["']https?://|from\s+["']https?://|url\(["']?https?://"""
    r"|jsdelivr|unpkg\.com|cdnjs",
    re.I,
)
# what a page fetches from the internet (a guide may link to a web page for the reader)
FETCHED = re.compile(
    r"""src=["']https?://|<link [^>]*href=["']https?://|from\s+["']https?://"""
    r"""|url\(["']?https?://|jsdelivr|unpkg\.com|cdnjs""",
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
GUIDES = ["deploy", "many-machines", "partition", "schemes", "teaching", "data", "results"]
CAPTIONS = ["Tutorials", "Guides", "API reference"]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("book") / "site"  # alone in its folder: see what is beside it
    return out, build(out)


def test_the_book_has_a_contents_page_every_notebook_and_nothing_online(site):
    out, pages = site
    assert [p.name for p in pages] == PAGES
    index = (out / "index.html").read_text()
    assert all(f'href="{name}"' in index for name in PAGES)  # the table of contents
    assert (out / "search.html").is_file() and (out / "searchindex.js").is_file()
    assert (out / "_static" / "mathjax" / "MathJax.js").is_file()
    assert list(out.parent.iterdir()) == [out]  # nothing left beside it (jupyter_execute/)
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


def _entry(html, name):
    """The HTML of the autodoc entry ``name``: its ``<dl class="py ...">`` to its end."""
    start = html.rindex('<dl class="py', 0, html.index(f'id="{name}"'))
    depth = 0
    for tag in re.finditer(r"<dl\b|</dl>", html[start:]):
        depth += 1 if tag.group(0) == "<dl" else -1
        if not depth:
            return html[start : start + tag.end()]
    raise AssertionError(f"{name}: an entry without its end")


def _field(entry, section):
    """What a numpy section (``Parameters``) of an entry says, as napoleon rendered it."""
    found = re.search(
        rf'<dt class="field-\w+">{section}<span class="colon">:</span></dt>(.*?)'
        r'(?=<dt class="field-|</dl>)',
        entry,
        re.S,
    )
    assert found, f"no {section} section"
    return found.group(1)


def _documents_parameters(entry, func):
    params = _field(entry, "Parameters")
    for name in inspect.signature(func).parameters:
        assert re.search(rf"<strong>[^<]*\b{name}\b[^<]*</strong>", params), name


def _link(page, target):
    """The href by which ``page`` links to ``target``; its own entry links to "#"."""
    here = posixpath.dirname(page) or "."
    return 'href="#"' if target == page else f'href="{posixpath.relpath(target, here)}"'


def test_the_table_of_contents_has_tutorials_guides_and_the_api_reference(site):
    out, _ = site
    for page in ("index.html", "guides/deploy.html", "api/hcct_lite.partition.html"):
        html = (out / page).read_text()
        nav = html[html.index('<nav class="bd-links bd-docs-nav"') :]
        nav = nav[: nav.index("</nav>")]
        parts = re.split(r'<p aria-level="2" class="caption" role="heading">', nav)[1:]
        captions = [re.search(r'caption-text">([^<]+)<', p).group(1) for p in parts]
        assert captions == CAPTIONS, (page, captions)
        tutorials, guides, api = parts
        assert all(_link(page, name) in tutorials for name in PAGES), page
        assert all(_link(page, f"guides/{name}.html") in guides for name in GUIDES), page
        assert all(_link(page, f"api/{name}.html") in api for name in API_PAGES), page


def test_the_api_reference_documents_the_public_api_from_the_numpy_docstrings(site):
    out, _ = site
    pages = {name: (out / "api" / f"{name}.html").read_text() for name in API_PAGES}
    top = pages["hcct_lite"]
    for name in hcct_lite.__all__:  # each public name, described at the top level
        assert f'id="hcct_lite.{name}"' in top, name
    for name in ("make_config", "client_partition"):
        entry = _entry(top, f"hcct_lite.{name}")
        _documents_parameters(entry, getattr(hcct_lite, name))
        assert _field(entry, "Returns")
    assert "ValueError" in _field(_entry(top, "hcct_lite.client_partition"), "Raises")
    assert '<p class="rubric">Examples</p>' in _entry(top, "hcct_lite.make_config")
    # RunConfig: every field a parameter of its signature, its example and its methods
    entry = _entry(top, "hcct_lite.RunConfig")
    signature = entry[: entry.index("</dt>")]
    for field in dataclasses.fields(hcct_lite.RunConfig):
        assert f'<span class="pre">{field.name}</span>' in signature, field.name
    assert '<p class="rubric">Examples</p>' in entry and "RunConfig</span>" in entry
    assert 'id="hcct_lite.RunConfig.to_dict"' in entry
    for name, html in pages.items():
        # napoleon turned every numpy section into fields: none is left as text
        assert not re.search(r"(Parameters|Returns|Raises|Examples)\s*-{4,}", html), name
        assert not ONLINE.findall(html), (name, ONLINE.findall(html)[:3])
        assert f'id="module-{name}"' in html, name
    # a module's table leads to where each of its names is described, once
    partition = pages["hcct_lite.partition"]
    assert 'href="hcct_lite.html#hcct_lite.client_partition"' in partition
    assert 'id="hcct_lite.partition.client_partition"' not in partition
    for module in ("hcct_lite.training.config", "hcct_lite.training.engine"):
        assert f'id="module-{module}"' in pages["hcct_lite.training"], module
    # the optional parts, on their own pages, each module of them imported and described
    for module in ("hcct_lite.deploy.privacy", "hcct_lite.gpu.batched", "hcct_lite.ray.grid"):
        assert f'id="module-{module}"' in pages[module.rsplit(".", 1)[0]], module
    index = (out / "searchindex.js").read_text()
    assert '"hcct_lite.client_partition"' in index and '"hcct_lite.RunConfig"' in index


def test_the_guides_are_pages_whose_links_all_lead_somewhere(site):
    out, _ = site
    guides = {name: (out / "guides" / f"{name}.html").read_text() for name in GUIDES}
    for name, html in guides.items():
        assert not FETCHED.findall(html), (name, FETCHED.findall(html)[:3])
    everything = "".join(guides.values())
    assert re.search(r'href="\.\./0\d_\w+\.html"', everything)  # to a notebook's page
    assert re.search(r'href="\.\./api/hcct_lite\.[\w.]+\.html#module-hcct_lite\.', everything)
    # every link of the guides, the API pages and the contents leads to a page of the site
    # and, with an anchor, to that place on it
    pages = [*(out / "guides").glob("*.html"), *(out / "api").glob("*.html"), out / "index.html"]
    for page in pages:
        html = page.read_text()
        for href in re.findall(r'href="([^"]*)"', html):
            if re.match(r"[a-z]+:", href) or href in ("", "#"):
                continue
            path, _, anchor = href.partition("#")
            path = path.partition("?")[0]  # a stylesheet's "?digest=..."
            target = (page.parent / path).resolve() if path else page
            assert target.is_file(), (page.name, href)
            if anchor and target.suffix == ".html":
                assert f'id="{anchor}"' in target.read_text(), (page.name, href)


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
        found = _search(driver, wait, "dendrogram")
        assert any("03_greedy_merges.html" in (a.get_attribute("href") or "") for a in found)
    finally:
        driver.quit()


def _search(driver, wait, term):
    """Type ``term`` into the page's search box; return the links of the results page."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

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
    box.send_keys(term, Keys.ENTER)
    wait.until(lambda d: "search.html" in d.current_url)
    return wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#search-results li a"))


@pytest.mark.skipif(CHROMIUM is None or DRIVER is None, reason="needs chromium and chromedriver")
def test_a_reader_finds_an_api_name_by_search_and_reads_its_parameters(site):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    out, _ = site
    driver = _driver()
    wait = WebDriverWait(driver, 180)
    try:
        driver.get((out / "guides" / "partition.html").as_uri())
        captions = driver.execute_script(
            "return [...document.querySelectorAll('nav.bd-docs-nav .caption-text')]"
            ".map(e => e.textContent.trim());"
        )
        assert captions == CAPTIONS
        # the API name's entry comes up among the results, and opens at its place
        wanted = "api/hcct_lite.html#hcct_lite.client_partition"
        found = _search(driver, wait, "client_partition")
        link = next(a for a in found if (a.get_attribute("href") or "").endswith(wanted))
        link.click()
        wait.until(lambda d: d.current_url.endswith(wanted))
        entry = driver.find_element(By.ID, "hcct_lite.client_partition")
        body = entry.find_element(By.XPATH, "..")  # the entry: signature and fields
        fields = [
            e.get_attribute("textContent").strip()
            for e in body.find_elements(By.CSS_SELECTOR, "dl.field-list > dt")
        ]
        assert fields[:3] == ["Parameters:", "Returns:", "Raises:"], fields
        assert "num_groups" in body.text and "Examples" in body.text
        assert driver.execute_script(
            "const r = arguments[0].getBoundingClientRect(); return r.top >= 0 && r.top < 400;",
            entry,
        )
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


def test_a_guide_links_to_the_books_pages_and_names_the_other_files(tmp_path):
    root = tmp_path.resolve()
    guide, other = root / "docs" / "deploy.md", root / "docs" / "many-machines.md"
    notebook, results = root / "notebooks" / "01_x.ipynb", root / "results" / "README.md"
    figure, test = root / "figures" / "f.png", root / "tests" / "test_x.py"
    for path in (guide, other, notebook, results, figure, test):
        path.parent.mkdir(exist_ok=True)
        path.write_text("")
    pages = {guide: "guides/deploy.md", other: "guides/many-machines.md"}
    pages |= {notebook: "01_x.ipynb", results: "guides/results.md"}
    text = (
        "[Ray](many-machines.md#a-cluster), [notebook 1](../notebooks/01_x.ipynb),\n"
        "[the numbers](../results/), [privacy.py](../hcct_lite/deploy/privacy.py),\n"
        "[DP-SGD](../hcct_lite/deploy/privacy.py), [the tests](../tests/),\n"
        "[test_x.py](../tests/test_x.py), [its check](../tests/test_x.py),\n"
        "![a figure](../figures/f.png), [Flower](https://flower.ai), [below](#install)\n"
        "```\n[kept](../tests/test_x.py)\n```\n"
    )
    images = {}
    modules = {"hcct_lite.deploy.privacy"}
    out = book_links(text, guide, "guides/deploy.md", pages, modules, images, root)
    assert out == (
        "[Ray](many-machines.md#a-cluster), [notebook 1](../01_x.ipynb),\n"
        "[the numbers](results.md), {py:mod}`hcct_lite.deploy.privacy`,\n"
        "{py:mod}`DP-SGD <hcct_lite.deploy.privacy>`, the tests (`tests/`),\n"
        "`tests/test_x.py`, its check (`tests/test_x.py`),\n"
        "![a figure](../_repo/figures/f.png), [Flower](https://flower.ai), [below](#install)\n"
        "```\n[kept](../tests/test_x.py)\n```\n"
    )
    assert images == {figure: "_repo/figures/f.png"}
