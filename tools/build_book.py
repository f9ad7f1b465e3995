"""Render the notebooks, executed in shipped mode, to a static site with offline maths.

Usage: ``python tools/build_book.py [SITE_DIR]`` (``make book``; default ``site/``).

Each notebook runs top to bottom with ``HCCT_MODE=shipped`` (the paper-scale results in
``results/``: seconds, no training) and becomes one HTML page with its figures inline.
Maths is typeset in the reader's browser by a local copy of MathJax 2 (from the PyPI
package ``jupyter-server-mathjax``) copied into the site: no CDN, nothing fetched at build
or read time. The site is not committed.
"""

from __future__ import annotations

import html
import os
import re
import shutil
import sys
from pathlib import Path

import nbformat
from nbconvert import HTMLExporter
from nbconvert.preprocessors import ExecutePreprocessor

ROOT = Path(__file__).resolve().parents[1]
MATHJAX = "mathjax/MathJax.js?config=TeX-AMS-MML_HTMLorMML-full,Safe"
# the template's require.js, widget manager and mermaid come from CDNs: the notebooks draw
# static pictures in the book (HCCT_STATIC_WIDGETS=1) and use no mermaid, so every script
# that would reach the internet is dropped; the site works offline
CDN_SCRIPT = re.compile(r'<script src="https://[^"]*"></script>')
CDN_MODULE = re.compile(
    r'<script type="module">(?:(?!</script>).)*https://(?:(?!</script>).)*</script>', re.S
)
# The local MathJax ships only the STIX-Web fonts: use them (the default TeX fonts would
# fall back to the system's and misplace accents)
FONTS = (
    '<script type="text/x-mathjax-config">MathJax.Hub.Config({"HTML-CSS": {webFont: '
    '"STIX-Web", availableFonts: [], preferredFont: null, imageFont: null}});</script>\n'
)


def mathjax_source() -> Path:
    """The folder of the local MathJax copy (raises with the fix when it is missing)."""
    try:
        import jupyter_server_mathjax
    except ImportError:
        raise SystemExit(
            "make book needs a local MathJax: pip install jupyter-server-mathjax"
        ) from None
    return Path(jupyter_server_mathjax.__file__).parent / "static"


def execute(nb, cwd: Path, timeout: int, env: dict):
    """Run every cell of ``nb`` in a kernel started in ``cwd`` with ``env`` added.

    The kernel inherits this process's environment, so ``env`` is set for the run and the
    caller's environment restored after. ``timeout``: seconds per cell.
    """
    saved = dict(os.environ)
    os.environ.update(env)
    try:
        ExecutePreprocessor(timeout=timeout, kernel_name="python3").preprocess(
            nb, {"metadata": {"path": str(cwd)}}
        )
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return nb


def figure_descriptions(nb, name: str) -> list:
    """The one-line description (cell metadata ``alt``) of every figure, in page order.

    Raises ``SystemExit`` naming the notebook and cell of a figure without one.
    """
    alts = []
    for i, cell in enumerate(nb.cells):
        images = sum("image/png" in o.get("data", {}) for o in cell.get("outputs", []))
        if images and not cell.metadata.get("alt"):
            raise SystemExit(f"{name}, cell {i}: a figure without a description (metadata 'alt')")
        alts += [cell.metadata.get("alt")] * images
    return alts


def with_alt_text(body: str, alts: list, name: str) -> str:
    """Give the page's inline figures, in order, the descriptions ``alts``."""
    from bs4 import BeautifulSoup  # nbconvert's own HTML parser

    soup = BeautifulSoup(body, features="html.parser")
    images = soup.select('img[src^="data:image/png"]')
    if len(images) != len(alts):
        raise SystemExit(f"{name}: {len(images)} figures on the page, {len(alts)} described")
    for img, alt in zip(images, alts, strict=True):
        img["alt"] = alt
    return str(soup)


def render(notebook: Path, timeout: int = 600) -> tuple:
    """Execute ``notebook`` in shipped mode; return ``(title, html)``."""
    nb = nbformat.read(notebook, as_version=4)
    env = {
        "HCCT_MODE": "shipped",
        "HCCT_STATIC_WIDGETS": "1",  # a picture and a note, not a blank widget
        # figures inline in the page (MPLBACKEND=Agg, as tests set it, would draw none)
        "MPLBACKEND": "module://matplotlib_inline.backend_inline",
    }
    execute(nb, notebook.parent, timeout, env)
    alts = figure_descriptions(nb, notebook.name)
    first = next((c.source for c in nb.cells if c.cell_type == "markdown"), notebook.stem)
    title = first.splitlines()[0].lstrip("# ").strip()
    exporter = HTMLExporter(template_name="lab", mathjax_url=MATHJAX)
    body, _ = exporter.from_notebook_node(nb, resources={"metadata": {"name": title}})
    body = CDN_MODULE.sub("", CDN_SCRIPT.sub("", body))
    body = with_alt_text(body, alts, notebook.name)
    tag = body.index(f'<script src="{MATHJAX.split("?")[0]}')
    return title, body[:tag] + FONTS + body[tag:]


def build(site: Path) -> list:
    """Write every page and ``index.html`` into ``site``; return the page paths."""
    site.mkdir(parents=True, exist_ok=True)
    shutil.copytree(mathjax_source(), site / "mathjax", dirs_exist_ok=True)
    pages, links = [], []
    for notebook in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        print(f"executing {notebook.name} (shipped mode)", flush=True)
        title, body = render(notebook)
        page = site / f"{notebook.stem}.html"
        page.write_text(body, encoding="utf-8")
        pages.append(page)
        links.append(f'<li><a href="{page.name}">{html.escape(title)}</a></li>')
    index = (
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>hcct-lite notebooks</title>"
        "</head><body><h1>hcct-lite: collaboration patterns in cross-silo federated "
        "learning</h1><p>The notebooks, executed on the shipped paper-scale results.</p>"
        f"<ol>{''.join(links)}</ol></body></html>"
    )
    (site / "index.html").write_text(index, encoding="utf-8")
    return pages


if __name__ == "__main__":
    out = Path(sys.argv[1] if len(sys.argv) > 1 else ROOT / "site").resolve()
    written = build(out)
    print(f"{len(written)} pages in {out}; open {out / 'index.html'}")
