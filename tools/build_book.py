"""Build the book: the notebooks, the guides and the API reference, as one Sphinx site.

Usage: ``python tools/build_book.py [SITE_DIR]`` (``make book``; default ``site/``; open
``index.html``).

Each notebook runs top to bottom with ``HCCT_MODE=shipped`` (the paper-scale results in
``results/``: seconds, no training; ``tools/notebook_exec.py``); Sphinx with MyST-NB and
the Sphinx Book Theme turns the executed notebooks into a book: a table of contents,
previous/next links, a search box, every figure with its text alternative (cell metadata
``alt``). The guides (``docs/*.md``, ``results/README.md``) follow, then the API reference,
which autodoc and napoleon write from the numpy docstrings (``tools/book_sources.py``).
Maths is typeset in the reader's browser by a local copy of MathJax 2 (from the
PyPI package ``jupyter-server-mathjax``) copied into the site: nothing is fetched at build
or read time. Sphinx runs with ``-W``: a warning (a broken link, a docstring autodoc cannot
read) fails the build.
The book is what a student may read: the exercises' solutions are not in it.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat
from book_sources import documented_modules, write_api, write_guides
from notebook_exec import AS_SHOWN, NotebookError, execute

__all__ = ["figure_descriptions", "prepare", "build"]

ROOT = Path(__file__).resolve().parents[1]
MATHJAX = "mathjax/MathJax.js?config=TeX-AMS-MML_HTMLorMML-full,Safe"
STUDENT_NOTE = ("The solutions are not in this notebook", "Your instructor has the solutions.")
CONF = """\
# Sphinx configuration of the book, written by tools/build_book.py
import inspect
import json
import sys
from pathlib import Path

sys.path.insert(0, {root!r})  # the API reference describes this checkout
project = "hcct-lite"
html_title = "hcct-lite: collaboration patterns in cross-silo federated learning"
extensions = [
    "myst_nb",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
]
myst_enable_extensions = ["dollarmath", "amsmath"]
myst_heading_anchors = 3  # the guides' links to their own sections
# the API reference: numpy docstrings; each module's table links to its names' entries
napoleon_google_docstring = False
napoleon_numpy_docstring = True
napoleon_use_param = False  # a parameter's type as text: "of shape (n_clients,)" links nothing
napoleon_use_rtype = False
autosummary_generate = False
autodoc_member_order = "bysource"
python_maximum_signature_line_length = 88
nb_execution_mode = "off"  # executed in shipped mode before the build
nb_ipywidgets_js = {{}}  # sliders are static pictures here: no widget manager from a CDN
html_theme = "sphinx_book_theme"
html_theme_options = {{
    "use_download_button": False,
    "use_fullscreen_button": False,
    "use_repository_button": False,
    "show_prev_next": True,
    "search_bar_text": "Search the book",
}}
html_static_path = ["_static"]
html_show_sourcelink = False
html_copy_source = False
# a local MathJax 2 (relative to _static), with the STIX-Web fonts it ships; MyST-NB marks a
# notebook's page "mathjax_ignore" and its maths "math", which MathJax 2 is told here
mathjax_path = "{mathjax}"
mathjax2_config = {{
    "HTML-CSS": {{"webFont": "STIX-Web", "availableFonts": [], "preferredFont": None,
                 "imageFont": None}},
    "tex2jax": {{"inlineMath": [["\\\\(", "\\\\)"]], "displayMath": [["\\\\[", "\\\\]"]],
                "ignoreClass": "tex2jax_ignore|mathjax_ignore",
                "processClass": "tex2jax_process|mathjax_process|math|output_area",
                "processEscapes": False, "processEnvironments": False}},
}}
exclude_patterns = ["_build"]


# a constant without a doc comment has no docstring (autodoc would show its type's)
def own_docstring(app, what, name, obj, options, lines):
    if what in ("data", "attribute") and not inspect.isclass(obj):
        doc = inspect.getdoc(type(obj)) or ""
        if doc.split() == " ".join(lines).split():
            lines.clear()


# a named tuple's fields are described by its docstring, not as "Alias for field number 0"
def skip_field_alias(app, what, name, obj, skip, options):
    return True if (getattr(obj, "__doc__", None) or "").startswith("Alias for field") else None


# a docstring's reference to a public name by another of its names (its package's:
# hcct_lite.partition.client_partition; or its last part, where one entry ends so) leads
# to the name's entry (tools/book_sources.py writes api_names.json)
API_NAMES = json.loads(Path(__file__).with_name("api_names.json").read_text())
SHORT = {{}}
for entry in set(API_NAMES.values()):
    SHORT.setdefault(entry.rsplit(".", 1)[-1], set()).add(entry)


def to_entry(app, env, node, contnode):
    if node.get("refdomain") != "py":
        return None
    target = node["reftarget"].lstrip(".~")
    module = node.get("py:module")
    found = API_NAMES.get(f"{{module}}.{{target}}") or API_NAMES.get(target)
    if found is None and len(SHORT.get(target, ())) == 1:
        (found,) = SHORT[target]
    if found is None:
        return None
    py = env.get_domain("py")
    return py.resolve_xref(env, node["refdoc"], app.builder, node["reftype"], found, node, contnode)


def setup(app):
    app.connect("autodoc-process-docstring", own_docstring)
    app.connect("missing-reference", to_entry)
    app.connect("autodoc-skip-member", skip_field_alias)
"""
INDEX = """# hcct-lite: collaboration patterns in cross-silo federated learning

The notebooks of hcct-lite, executed on the shipped paper-scale results. They rebuild the
paper by Sun, Kountouris and Zhang (arXiv 2401.13236) part by part: the motivating example,
the generalisation bound, the greedy merge, the experiments, and where HCCT's utility
misleads. Each slider shows its starting picture; run the notebooks in Jupyter for the
live ones.

The guides say how to teach with it, run it, deploy it and reproduce the paper. The API
reference documents the package from its docstrings.

```{{toctree}}
:maxdepth: 1
:caption: Tutorials

{notebooks}
```

```{{toctree}}
:maxdepth: 1
:caption: Guides

{guides}
```

```{{toctree}}
:maxdepth: 1
:caption: API reference

{api}
```
"""


def mathjax_source() -> Path:
    """The folder of the local MathJax copy (raises with the fix when it is missing)."""
    try:
        import jupyter_server_mathjax
    except ImportError:
        raise SystemExit(
            "make book needs a local MathJax: pip install jupyter-server-mathjax"
        ) from None
    return Path(jupyter_server_mathjax.__file__).parent / "static"


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


def for_the_book(nb, name: str):
    """``nb`` executed, as the book shows it: each figure's ``alt`` handed to MyST-NB, and
    the paragraph on the solutions worded for a student."""
    figure_descriptions(nb, name)
    nb.metadata.pop("widgets", None)
    for cell in nb.cells:
        if cell.metadata.get("alt"):
            cell.metadata.setdefault("mystnb", {})["image"] = {"alt": cell.metadata["alt"]}
        if cell.cell_type == "markdown" and STUDENT_NOTE[0] in cell.source:
            start = cell.source.index(STUDENT_NOTE[0])
            end = cell.source.find("\n\n", start)
            tail = "" if end < 0 else cell.source[end:]
            cell.source = cell.source[:start] + STUDENT_NOTE[1] + tail
    return nb


def prepare(src: Path, notebooks: list, timeout: int | None = None) -> list:
    """Write the book's Sphinx sources into ``src``: the executed notebooks, the guides,
    the API reference, conf, index.

    ``timeout``: seconds per cell (default ``HCCT_CELL_TIMEOUT``, else 600). A cell that
    fails stops the build (``SystemExit``), naming the notebook and the cell; so does a
    module the API reference cannot import.
    """
    src.mkdir(parents=True, exist_ok=True)
    api = write_api(src)  # first: a missing optional part stops the build at once
    guides = write_guides(src, notebooks, documented_modules())
    shutil.copytree(mathjax_source(), src / "_static" / "mathjax", dirs_exist_ok=True)
    for notebook in notebooks:
        print(f"executing {notebook.name} (shipped mode)", flush=True)
        nb = nbformat.read(notebook, as_version=4)
        try:
            # figures inline in the page (MPLBACKEND=Agg, as tests set it, would draw none),
            # each slider a picture and a note, not a blank widget
            execute(
                nb,
                mode="shipped",
                cwd=notebook.parent,
                name=str(notebook),
                timeout=timeout,
                env=AS_SHOWN,
            )
        except (NotebookError, ValueError) as err:
            raise SystemExit(str(err)) from None
        nbformat.write(for_the_book(nb, notebook.name), src / notebook.name)
    (src / "conf.py").write_text(CONF.format(mathjax=MATHJAX, root=str(ROOT)))
    index = INDEX.format(
        notebooks="\n".join(n.stem for n in notebooks),
        guides="\n".join(guides),
        api="\n".join(api),
    )
    (src / "index.md").write_text(index)
    return [src / n.name for n in notebooks]


def build(site: Path, notebooks: list | None = None) -> list:
    """Build the book into ``site``; return its notebook pages (HTML paths)."""
    notebooks = notebooks or sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "src"
        prepare(src, notebooks)
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "sphinx",
                "-b",
                "html",
                "-q",
                "-W",
                "--keep-going",
                "-j",
                "1",
                str(src),
                str(Path(tmp) / "site"),
            ],
            capture_output=True,
            text=True,
            timeout=900,
        )
        if done.returncode != 0:
            raise SystemExit(f"sphinx-build failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
        # built in the temporary folder: MyST-NB's jupyter_execute/ beside it goes with it
        shutil.rmtree(Path(tmp) / "site" / ".doctrees", ignore_errors=True)
        shutil.copytree(Path(tmp) / "site", site, dirs_exist_ok=True)
    return [site / f"{n.stem}.html" for n in notebooks]


if __name__ == "__main__":
    out = Path(sys.argv[1] if len(sys.argv) > 1 else ROOT / "site").resolve()
    written = build(out)
    print(f"{len(written)} pages in {out}; open {out / 'index.html'}")
