"""The book's guides and API reference, as Sphinx sources (``tools/build_book.py`` calls this).

The guides are ``docs/*.md`` and ``results/README.md``, copied into ``guides/`` with their
links rewritten for the book: a link to a guide or a notebook leads to its page, one to a
module of the package to its API entry, and one to any other file of the repository becomes
that file's path as code (the book holds no tests, benchmarks or solutions). The API
reference is one page a package, written as autodoc directives: every public name (a
module's ``__all__``) is described once, where it is defined, or at the top level for the
names of ``hcct_lite.__all__``, and each module lists its names in a table that links there.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import os
import pkgutil
import re
import shutil
from pathlib import Path

__all__ = ["GUIDES", "API_PAGES", "guide_files", "book_links", "write_guides", "write_api"]

ROOT = Path(__file__).resolve().parents[1]
# the guides in the order a newcomer reads them; another docs/*.md follows, by name
GUIDES = [
    "docs/teaching.md",
    "docs/partition.md",
    "docs/schemes.md",
    "docs/data.md",
    "results/README.md",
    "docs/reproduction.md",
    "docs/deploy.md",
    "docs/many-machines.md",
    "docs/extending.md",
]
# one page a package: the package and its modules (the top level: its own names only)
API_PAGES = [
    "hcct_lite",
    "hcct_lite.partition",
    "hcct_lite.theory",
    "hcct_lite.schemes",
    "hcct_lite.training",
    "hcct_lite.runs",
    "hcct_lite.parts",
    "hcct_lite.reproduction",
    "hcct_lite.lessons",
    "hcct_lite.viz",
    "hcct_lite.deploy",
    "hcct_lite.gpu",
    "hcct_lite.ray",
]
# the optional parts, and the extra that installs each (autodoc imports every module)
EXTRAS = {"hcct_lite.deploy": "flower", "hcct_lite.ray": "ray"}
LINK = re.compile(r"(!?)\[((?:[^\]\[]|\[[^\]]*\])*)\]\(([^()\s]+)\)")
FENCE = re.compile(r"^(```+|~~~+).*?^\1[ \t]*$", re.M | re.S)
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
LONG_VALUE = 400  # a constant's value is shown when its repr is this short, and plain


def guide_files(root: Path = ROOT) -> list[Path]:
    """The guides, in reading order: :data:`GUIDES`, then any other ``docs/*.md``."""
    known = [root / g for g in GUIDES if (root / g).is_file()]
    others = sorted(p for p in (root / "docs").glob("*.md") if p not in known)
    return known + others


def guide_page(path: Path, root: Path = ROOT) -> str:
    """The book page (source path) of a guide: ``guides/<name>.md``."""
    name = "results" if path == root / "results" / "README.md" else path.stem
    return f"guides/{name}.md"


def _module_of(rel: str, modules: set[str]) -> str | None:
    """The documented module a repository path ``hcct_lite/x/y.py`` is, or None."""
    if not rel.endswith(".py"):
        return None
    parts = rel[: -len(".py")].split("/")
    if parts[-1] == "__init__":
        parts = parts[:-1]
    name = ".".join(parts)
    return name if name in modules else None


def book_links(
    text: str,
    source: Path,
    page: str,
    pages: dict[Path, str],
    modules: set[str],
    images: dict[Path, str] | None = None,
    root: Path = ROOT,
) -> str:
    """``text`` (the Markdown of ``source``, the book's ``page``) with its links for the book.

    ``pages``: repository file -> book page of each guide and notebook; ``modules``: the
    modules the API reference documents. A link to a page keeps its anchor; a link to a
    module's file leads to that module's API entry; an image of the repository is added to
    ``images`` (repository file -> book path) and shown; a link to any other file of the
    repository becomes its path as code. Web links, local anchors and code are kept.
    """
    here = os.path.dirname(page)

    def relative(target: str) -> str:
        return os.path.relpath(target, here or ".").replace(os.sep, "/")

    def rewrite(match: re.Match) -> str:
        bang, label, target = match.groups()
        if SCHEME.match(target) or target.startswith("#"):
            return match.group(0)
        path, _, anchor = target.partition("#")
        anchor = f"#{anchor}" if anchor else ""
        file = (source.parent / path).resolve()
        if not file.is_relative_to(root):
            return match.group(0)
        rel = file.relative_to(root).as_posix()
        if file.is_dir() and file / "README.md" in pages:
            file = file / "README.md"
        if file in pages:
            return f"{bang}[{label}]({relative(pages[file])}{anchor})"
        if bang and file.is_file() and images is not None:
            images[file] = f"_repo/{rel}"
            return f"![{label}]({relative(images[file])})"
        name = label.replace("`", "").strip().rstrip("/")
        names_the_file = rel == name or rel.endswith(f"/{name}")  # [client.py](../x/client.py)
        module = _module_of(rel, modules)
        if module:
            return f"{{py:mod}}`{module}`" if names_the_file else f"{{py:mod}}`{name} <{module}>`"
        code = f"`{rel}/`" if file.is_dir() else f"`{rel}`"
        return code if names_the_file else f"{label} ({code})"

    out, at = [], 0
    for fence in FENCE.finditer(text):  # code blocks are kept as they are
        out += [LINK.sub(rewrite, text[at : fence.start()]), fence.group(0)]
        at = fence.end()
    out.append(LINK.sub(rewrite, text[at:]))
    return "".join(out)


def write_guides(src: Path, notebooks: list, modules: set[str], root: Path = ROOT) -> list[str]:
    """Copy the guides into ``src/guides/`` for the book; return their pages (no suffix).

    ``notebooks``: the notebooks in the book, at its top (their links lead there).
    """
    guides = guide_files(root)
    pages = {g: guide_page(g, root) for g in guides}
    pages.update({Path(n).resolve(): Path(n).name for n in notebooks})
    images: dict[Path, str] = {}
    for guide in guides:
        text = book_links(guide.read_text(), guide, pages[guide], pages, modules, images, root)
        out = src / pages[guide]
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
    for file, target in images.items():
        (src / target).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(file, src / target)
    return [pages[g][: -len(".md")] for g in guides]


# --- the API reference


def page_modules(package: str) -> list[str]:
    """The modules of a page: ``package``, then each of its modules by name."""
    if package == "hcct_lite":
        return [package]
    mod = importlib.import_module(package)
    names = [package]
    if hasattr(mod, "__path__"):
        names += [m.name for m in pkgutil.walk_packages(mod.__path__, f"{package}.")]
    return names


def _assigned(module) -> set[str]:
    """The names a module assigns at its top level (its constants)."""
    try:
        tree = ast.parse(inspect.getsource(module))
    except (OSError, TypeError, SyntaxError):  # autodoc reports a module it cannot read
        return set()
    names = set()
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        names |= {t.id for t in targets if isinstance(t, ast.Name)}
    return names


def public_names(module) -> list[str]:
    """``__all__``, or (a module without one) the functions and classes it defines."""
    if hasattr(module, "__all__"):
        return [n for n in module.__all__ if not inspect.ismodule(getattr(module, n, None))]
    return [
        n
        for n, obj in vars(module).items()
        if not n.startswith("_")
        and (inspect.isfunction(obj) or inspect.isclass(obj))
        and obj.__module__ == module.__name__
    ]


def attribute_names(cls) -> list[str]:
    """The names a class's docstring describes in its numpy section ``Attributes``."""
    doc = inspect.getdoc(cls) or ""
    match = re.search(r"^Attributes\n-{3,}\n(.*?)(?=^\S[^\n]*\n-{3,}$|\Z)", doc, re.M | re.S)
    names = []
    for line in (match.group(1) if match else "").splitlines():
        head = re.match(r"([A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)*)\s*(?::|$)", line)
        if head:
            names += [n.strip() for n in head.group(1).split(",")]
    return names


def _entry(full: str, obj) -> list[str]:
    """The autodoc directive that describes ``obj`` as ``full``."""
    if inspect.isclass(obj):
        kind = "autoexception" if issubclass(obj, BaseException) else "autoclass"
        lines = [f".. {kind}:: {full}", "   :members:"]
        if obj.__bases__ != (object,):  # "Bases: object" says nothing
            lines.append("   :show-inheritance:")
        described = attribute_names(obj)  # napoleon writes these: not again as members
        if described:
            lines.append(f"   :exclude-members: {', '.join(described)}")
        return lines
    if inspect.isroutine(obj):
        return [f".. autofunction:: {full}"]
    lines = [f".. autodata:: {full}"]
    if len(repr(obj)) > LONG_VALUE or "<" in repr(obj):  # not "<function ... at 0x...>"
        lines.append("   :no-value:")
    return lines


def _heading(text: str, mark: str) -> list[str]:
    return [text, mark * len(text), ""]


def _table(module: str, targets: list[str]) -> list[str]:
    """An autosummary table of ``targets`` (documented names), in ``module``'s section."""
    lines = [".. autosummary::", "   :nosignatures:", ""]
    for full in targets:
        # autosummary wants a name under the section's module relative to it; "~": the
        # table shows the last part alone
        here = full.removeprefix(f"{module}.")
        lines.append(f"   ~{here}" if full.startswith(f"{module}.") else f"   ~{full}")
    return [*lines, ""]


def api_pages(packages: list[str] | None = None) -> tuple[dict[str, str], dict[str, str]]:
    """The API pages, and where each public name is described.

    Returns page name (``api/<package>``) -> reStructuredText, and every name a reader may
    write (``hcct_lite.partition.client_partition``) -> the name of its entry
    (``hcct_lite.client_partition``). Every public name is described once: a name of
    ``hcct_lite.__all__`` at the top level, any other in the module that defines it (else
    in the first that lists it).
    """
    import hcct_lite

    packages = packages or API_PAGES
    modules = {p: [importlib.import_module(m) for m in page_modules(p)] for p in packages}
    everything = [m for p in packages for m in modules[p]]
    assigned = {m.__name__: _assigned(m) for m in everything}
    where: dict[object, str] = {}  # an object (a constant: its module and name) -> its entry
    entries: dict[str, list[tuple[str, object]]] = {}  # a module -> the entries it holds
    aliases: dict[str, str] = {}

    def key(module, name, obj):
        if inspect.isclass(obj) or inspect.isroutine(obj):
            return id(obj)
        if name in assigned.get(module.__name__, ()):
            return (module.__name__, name)
        home = next(
            (
                m.__name__
                for m in everything
                if name in assigned[m.__name__] and getattr(m, name, None) is obj
            ),
            module.__name__,
        )
        return (home, name)

    def describe(k, full, obj, module):
        where[k] = full
        entries.setdefault(module, []).append((full, obj))

    if "hcct_lite" in packages:
        for name in hcct_lite.__all__:
            obj = getattr(hcct_lite, name)
            describe(key(hcct_lite, name, obj), f"hcct_lite.{name}", obj, "hcct_lite")
    for first_pass in (True, False):  # where each name is defined, then the rest
        for module in everything:
            for name in public_names(module):
                obj = getattr(module, name)
                k = key(module, name, obj)
                defined = (
                    getattr(obj, "__module__", None) == module.__name__
                    if inspect.isclass(obj) or inspect.isroutine(obj)
                    else name in assigned[module.__name__]
                )
                if k not in where and (defined or not first_pass):
                    describe(k, f"{module.__name__}.{name}", obj, module.__name__)

    def section(module, names, heading, mark, intro=()):
        """A module's section: its docstring, a table of its names, their entries."""
        targets = [where[key(module, n, getattr(module, n))] for n in names]
        aliases.update({f"{module.__name__}.{n}": f for n, f in zip(names, targets, strict=True)})
        lines = [*_heading(heading, mark), *intro]
        if targets:
            lines += _table(module.__name__, targets)
        held = [(f, obj) for f, obj in entries.get(module.__name__, []) if f in targets]
        for full, obj in held:
            lines += [*_entry(full, obj), ""]
        return lines

    pages = {}
    for package in packages:
        lines = []
        for i, module in enumerate(modules[package]):
            name = module.__name__
            names = hcct_lite.__all__ if module is hcct_lite else public_names(module)
            intro = [f".. automodule:: {name}", ""]
            lines += section(module, names, name, "=" if i == 0 else "-", intro)
        pages[f"api/{package}"] = "\n".join(lines)
    return pages, aliases


def check_imports(packages: list[str] | None = None) -> None:
    """Import every module of the API pages; raise ``SystemExit`` with the fix if one fails."""
    for package in packages or API_PAGES:
        try:
            for name in page_modules(package):
                importlib.import_module(name)
        except ImportError as err:
            extra = EXTRAS.get(package)
            fix = f': pip install -e ".[{extra},docs]"' if extra else ""
            raise SystemExit(f"the API reference cannot import {package} ({err}){fix}") from None


def write_api(src: Path, packages: list[str] | None = None) -> list[str]:
    """Write the API pages into ``src/api/``; return their pages (no suffix).

    ``src/api_names.json`` holds where each public name is described: the book's
    ``conf.py`` resolves a docstring's reference to any of them through it.
    """
    check_imports(packages)
    pages, aliases = api_pages(packages)
    (src / "api").mkdir(parents=True, exist_ok=True)
    for page, text in pages.items():
        (src / f"{page}.rst").write_text(text)
    (src / "api_names.json").write_text(json.dumps(aliases, indent=0, sort_keys=True))
    return list(pages)


def documented_modules(packages: list[str] | None = None) -> set[str]:
    """Every module the API reference has an entry for."""
    return {m for p in packages or API_PAGES for m in page_modules(p)}
