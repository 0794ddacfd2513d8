"""Build-time helpers for the skprivreg documentation (a local Sphinx extension).

- ``user-guide-pages``: the user guide's toctree lists the estimator pages of
  ``conf.USER_GUIDE_PAGES`` whose files exist, so pages written later by other
  people join the build without editing the index.
- ``benchmark-reports``: the benchmarks page includes ``benchmarks/README.md``
  and ``benchmarks/results/*.md`` when they exist (parsed by MyST), and shows
  the ``benchmarks/results/*.png`` figures that no report embeds.
- ``api-module``: in ``api.rst``, ``.. api-module:: skprivreg.linear_model``
  expands to autosummary tables (classes, functions, constants) of every name
  in that module's ``__all__``, in its order. Exporting a name documents it.
  A module of ``conf.API_MODULES`` with a non-empty ``__all__`` that has no
  ``api-module`` line, or a name of ``skprivreg.__all__`` documented nowhere,
  is a build warning (an error under ``-W``).
- Docstrings written as plain text use ``|y|`` for an absolute value and
  scikit-learn's ``coef_`` for fitted attributes; outside literals, math and
  doctests, such bars and trailing underscores are escaped so that
  reStructuredText does not read them as substitution or hyperlink references
  (errors under ``-W``).
- Autodoc shows the members a class inherits from skprivreg mixins (``predict``)
  but not those inherited from scikit-learn or the standard library, whose
  docstrings link to labels that only exist in their own documentation.
"""

import importlib
import inspect
import os
import re
from pathlib import Path

from sphinx.util import logging

logger = logging.getLogger(__name__)

# Pages whose source is rewritten at read time: always re-read them, so a new
# estimator page or benchmark report is picked up by an incremental build.
_GENERATED_SOURCES = ("user_guide", "benchmarks", "api")

_USER_GUIDE_MARKER = ".. user-guide-pages::"
_API_MODULE = re.compile(r"^\.\. api-module:: (\S+)[ \t]*$", re.MULTILINE)
_BENCHMARKS_MARKER = ".. benchmark-reports::"


def _srcdir(app):
    return Path(app.srcdir)


def _user_guide_entries(app):
    srcdir = _srcdir(app)
    return [page for page in app.config.USER_GUIDE_PAGES if (srcdir / f"{page}.rst").exists()]


def _benchmark_reports(app):
    bench = _srcdir(app).parent / "benchmarks"
    reports = []
    if (bench / "README.md").exists():
        reports.append(bench / "README.md")
    results = bench / "results"
    if results.is_dir():
        reports.extend(sorted(results.glob("*.md")))
    return reports


def _indented(lines, indent="   "):
    return "\n".join(indent + line if line else "" for line in lines)


def _expand_user_guide(app, source):
    entries = _user_guide_entries(app)
    toctree = [".. toctree::", "   :maxdepth: 1", ""] + [f"   {page}" for page in entries]
    return source.replace(_USER_GUIDE_MARKER, "\n".join(toctree))


_MD_IMAGE = re.compile(r"(!\[[^\]]*\]\()(?![a-z]+:|/|#)([^)\s]+)")


def _report_for_docs(app, report):
    """A copy of a markdown report whose relative image paths work from doc/.

    An included file's image paths are read relative to the including page
    (doc/benchmarks.rst), not to the markdown file; rewrite them.
    """
    srcdir = _srcdir(app)
    base = Path(os.path.relpath(report.parent, srcdir)).as_posix()
    text = report.read_text(encoding="utf-8")
    text = _MD_IMAGE.sub(lambda m: f"{m.group(1)}{base}/{m.group(2)}", text)
    copy = Path(app.doctreedir) / "benchmark_reports" / report.parent.name / report.name
    copy.parent.mkdir(parents=True, exist_ok=True)
    copy.write_text(text, encoding="utf-8")
    return Path(os.path.relpath(copy, srcdir)).as_posix()


def _expand_benchmarks(app, source):
    reports = _benchmark_reports(app)
    srcdir = _srcdir(app)
    if not reports:
        text = (
            ".. note::\n\n"
            "   No benchmark report has been committed yet. Run the scripts in\n"
            "   ``benchmarks/``; they write their tables to ``benchmarks/results/``,\n"
            "   and this page includes every ``benchmarks/results/*.md`` at the next\n"
            "   documentation build."
        )
        return source.replace(_BENCHMARKS_MARKER, text)
    blocks = []
    for report in reports:
        label = report.relative_to(srcdir.parent).as_posix()
        blocks.append(
            f".. rubric:: ``{label}``\n\n"
            f".. include:: {_report_for_docs(app, report)}\n"
            "   :parser: myst_parser.sphinx_\n"
        )
    blocks.extend(_benchmark_figures(app, reports))
    return source.replace(_BENCHMARKS_MARKER, "\n".join(blocks))


def _benchmark_figures(app, reports):
    """Figures in benchmarks/results/ that no report shows itself."""
    srcdir = _srcdir(app)
    results = srcdir.parent / "benchmarks" / "results"
    if not results.is_dir():
        return []
    shown = " ".join(report.read_text(encoding="utf-8") for report in reports)
    figures = []
    for image in sorted(results.glob("*.png")):
        if re.search(r"!\[[^\]]*\]\([^)]*" + re.escape(image.name), shown):
            continue
        rel = Path(os.path.relpath(image, srcdir)).as_posix()
        label = image.relative_to(srcdir.parent).as_posix()
        figures.append(
            f".. rubric:: ``{label}``\n\n"
            f".. image:: {rel}\n"
            "   :width: 100%\n"
        )
    return figures


def _on_source_read(app, docname, source):
    if docname == "user_guide":
        source[0] = _expand_user_guide(app, source[0])
    elif docname == "benchmarks":
        source[0] = _expand_benchmarks(app, source[0])
    elif docname == "api":
        source[0] = _expand_api(source[0])


def _always_reread(app, env, added, changed, removed):
    return [name for name in _GENERATED_SOURCES if name in env.found_docs]


# ---------------------------------------------------------------------------
# API reference: one autosummary table per kind of object, from __all__
# ---------------------------------------------------------------------------
def _public_names(module_name):
    """The module and the names of its ``__all__`` (``None, []`` if not importable)."""
    try:
        module = importlib.import_module(module_name)
    except ImportError:
        return None, []
    return module, [name for name in getattr(module, "__all__", []) if not name.startswith("__")]


def _kind(obj):
    if inspect.isclass(obj):
        return "class"
    if callable(obj):
        return "function"
    return "data"


def _autosummary_tables(module_name, quiet=False):
    module, names = _public_names(module_name)
    if module is None:
        if not quiet:
            logger.warning("api-module: cannot import %s", module_name, location="api")
        return ""
    groups = {"class": [], "function": [], "data": []}
    for name in names:
        if not hasattr(module, name):
            if quiet:
                continue
            logger.warning(
                "api-module: %s.__all__ lists %s, which it does not define",
                module_name,
                name,
                location="api",
            )
            continue
        groups[_kind(getattr(module, name))].append(name)
    blocks = [f".. currentmodule:: {module_name}", ""]
    headings = {"class": "Classes", "function": "Functions", "data": "Constants"}
    for kind, members in groups.items():
        if not members:
            continue
        blocks += [
            f".. rubric:: {headings[kind]}",
            "",
            ".. autosummary::",
            "   :toctree: generated/",
            f"   :template: autosummary/{kind}.rst",
            "   :nosignatures:",
            "",
            *(f"   {name}" for name in members),
            "",
        ]
    if not names:
        blocks.append("Nothing is exported from this module yet.")
    return "\n".join(blocks)


def _expand_api(source, quiet=False):
    return _API_MODULE.sub(lambda match: _autosummary_tables(match.group(1), quiet), source)


def _write_api_scan_file(app):
    """Let autosummary generate stub pages for the expanded tables of api.rst.

    Autosummary finds the names to generate pages for by scanning source files
    on disk, before ``source-read`` runs. We write the expanded api.rst to the
    build directory (with an absolute ``:toctree:``, so the stubs land in
    ``doc/generated/``) and add it to the files autosummary scans.
    """
    api_file = _srcdir(app) / "api.rst"
    if not api_file.exists() or app.config.autosummary_generate is False:
        return
    expanded = _expand_api(api_file.read_text(encoding="utf-8"), quiet=True)
    stubs = (_srcdir(app) / "generated").as_posix()
    expanded = expanded.replace(":toctree: generated/", f":toctree: {stubs}/")
    scan_file = Path(app.doctreedir) / "api_autosummary_scan.rst"
    scan_file.parent.mkdir(parents=True, exist_ok=True)
    scan_file.write_text(expanded, encoding="utf-8")
    generate = app.config.autosummary_generate
    if generate is True:
        env = app.env
        generate = [
            str(env.doc2path(name, base=False))
            for name in sorted(env.found_docs)
            if Path(env.doc2path(name)).is_file()
        ]
    app.config.autosummary_generate = [*generate, str(scan_file)]


def _check_api_reference(app):
    api_file = _srcdir(app) / "api.rst"
    if not api_file.exists():
        return
    listed = set(_API_MODULE.findall(api_file.read_text(encoding="utf-8")))
    documented = set()
    for module_name in listed:
        module, names = _public_names(module_name)
        documented.update(id(getattr(module, name)) for name in names if hasattr(module, name))
    for module_name in app.config.API_MODULES:
        _, names = _public_names(module_name)
        if names and module_name not in listed:
            logger.warning(
                "module %s exports %d names but has no '.. api-module:: %s' line in doc/api.rst",
                module_name,
                len(names),
                module_name,
                location="api",
            )
    top, names = _public_names("skprivreg")
    for name in names:
        if id(getattr(top, name)) not in documented:
            logger.warning(
                "skprivreg.%s is exported but documented nowhere: export it from "
                "a module that has an '.. api-module::' line in doc/api.rst",
                name,
                location="api",
            )


# ---------------------------------------------------------------------------
# Autodoc: keep members defined by skprivreg only
# ---------------------------------------------------------------------------
def _skip_foreign_member(app, what, name, obj, skip, options):
    if what not in ("class", "exception") or skip:
        return None
    module = getattr(obj, "__module__", None)
    if module is None:
        func = getattr(obj, "fget", None) or getattr(obj, "__func__", None)
        module = getattr(func, "__module__", None)
    if module is None and (
        inspect.ismethoddescriptor(obj)
        or inspect.isbuiltin(obj)
        or inspect.isdatadescriptor(obj)
    ):
        return True  # defined in C by Python itself (Exception.add_note, ...)
    if module is not None and not module.startswith("skprivreg"):
        return True
    return None


# ---------------------------------------------------------------------------
# Docstrings: |x| is an absolute value, not a substitution reference
# ---------------------------------------------------------------------------
_BARS = re.compile(r"(?<![\\|\w])\|([^|`\s][^|`]*?)\|(?![A-Za-z0-9|])")
_TRAILING_UNDERSCORE = re.compile(r"(?<![\\\w])([A-Za-z](?:\w*?[A-Za-z0-9])?)_(?![\w`])")
_LITERAL_OR_ROLE = re.compile(r"(``.+?``|:[\w:]+:`[^`]*`|`[^`]*`_{0,2})")


def _escape_bars(line):
    parts = _LITERAL_OR_ROLE.split(line)
    for i in range(0, len(parts), 2):
        part = _BARS.sub(r"\\|\1\\|", parts[i])
        parts[i] = _TRAILING_UNDERSCORE.sub(r"\1\\_", part)
    return "".join(parts)


def _escape_absolute_values(app, what, name, obj, options, lines):
    math_indent = None
    in_doctest = False
    for i, line in enumerate(lines):
        stripped = line.lstrip()
        indent = len(line) - len(stripped)
        if stripped.startswith(">>>"):
            in_doctest = True
        elif not stripped:
            in_doctest = False
        if in_doctest:
            continue
        if math_indent is not None:
            if stripped and indent <= math_indent:
                math_indent = None
            else:
                continue
        if stripped.startswith(".. math::") or stripped.endswith("::"):
            math_indent = indent
            # The directive line itself may carry inline text after "::".
            continue
        lines[i] = _escape_bars(line)


def setup(app):
    app.add_config_value("USER_GUIDE_PAGES", [], "env")
    app.add_config_value("API_MODULES", [], "env")
    app.connect("source-read", _on_source_read)
    app.connect("env-get-outdated", _always_reread)
    app.connect("builder-inited", _check_api_reference)
    # Before autosummary's own builder-inited handler (priority 500).
    app.connect("builder-inited", _write_api_scan_file, priority=400)
    app.connect("autodoc-skip-member", _skip_foreign_member)
    app.connect("autodoc-process-docstring", _escape_absolute_values)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
