"""Sphinx configuration for the skprivreg documentation.

The build needs no network: no intersphinx inventories are fetched, and
MathJax is served from the ``sphinx-mathjax-offline`` package (a copy of
MathJax 3 that is written into ``_build/html/_static/mathjax``).

Build with ``bash doc/build.sh`` (``sphinx-build -W -b html doc doc/_build/html``).
"""

import os
import sys
import warnings
from pathlib import Path

import skprivreg

DOC_DIR = Path(__file__).resolve().parent
REPO_DIR = DOC_DIR.parent
sys.path.insert(0, str(DOC_DIR / "_ext"))

# The examples draw plots without a display.
os.environ.setdefault("MPLBACKEND", "Agg")

# -- Project -------------------------------------------------------------------
project = "skprivreg"
author = "The skprivreg developers"
copyright = "2026, The skprivreg developers"
release = skprivreg.__version__
version = ".".join(release.split(".")[:2])

# -- Extensions ------------------------------------------------------------------
extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "sphinx-mathjax-offline",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
    "myst_parser",
    "skprivreg_docs",
]

source_suffix = {".rst": "restructuredtext"}
root_doc = "index"
exclude_patterns = [
    "_build",
    "_templates",
    "**/*.ipynb",
    "auto_examples/*.md5",
    "auto_examples/*.py",
    "auto_examples/*.zip",
    "auto_examples/*.ipynb",
    "sg_execution_times.rst",
]
templates_path = ["_templates"]
default_role = "literal"
pygments_style = "sphinx"

# -- The estimator user-guide pages -------------------------------------------------
# One page per estimator, directly under doc/. A page is listed in the user
# guide's toctree only if its file exists (several are written by different
# people at different times); to add an estimator, add its page name here.
USER_GUIDE_PAGES = [
    "bounds",
    "workflow",
    "linear_regression",
    "adassp",
    "issp",
    "issp_analysis",
    "reusecov",
    "label_dp_choice",
    "weighted_lba",
    "lasso_support",
]

# -- The API reference -----------------------------------------------------------------
# api.rst documents a module's ``__all__`` with one ``.. api-module::`` line.
# The build fails (a warning under -W) when a module below exports names but
# has no such line, or when a name of ``skprivreg.__all__`` is documented
# nowhere.
API_MODULES = [
    "skprivreg.linear_model",
    "skprivreg.label_dp",
    "skprivreg.feature_selection",
    "skprivreg.preprocessing",
    "skprivreg.pipeline",
    "skprivreg.model_selection",
    "skprivreg.datasets",
    "skprivreg.accounting",
    "skprivreg.mechanisms",
    "skprivreg.bounds",
    "skprivreg.exceptions",
    "skprivreg.base",
]

# -- autodoc / autosummary / numpydoc ----------------------------------------------
autosummary_generate = True
autosummary_imported_members = False
autodoc_typehints = "none"
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_attributes_as_param_list = True
numpydoc_xref_param_type = False

# -- Math: MathJax 3, bundled (no CDN) ----------------------------------------------
# ``sphinx-mathjax-offline`` sets mathjax_path to its local copy. The
# configuration below is MathJax 3's (not 4's, which Sphinx >= 9 assumes for
# its CDN default).
mathjax3_config = {
    "tex": {
        "inlineMath": [["\\(", "\\)"]],
        "displayMath": [["\\[", "\\]"]],
        "processEscapes": True,
    },
}

# -- Markdown (only for benchmarks/*.md included by the benchmarks page) ------------
myst_enable_extensions = ["dollarmath"]
myst_heading_anchors = 3
suppress_warnings = [
    # Benchmark reports are written for GitHub; their relative links to
    # JSON files or scripts have no target inside the docs.
    "myst.xref_missing",
]

# -- sphinx-gallery ----------------------------------------------------------------
sphinx_gallery_conf = {
    "examples_dirs": str(REPO_DIR / "examples"),
    "gallery_dirs": "auto_examples",
    # Every example named plot_*.py is executed and its figures are kept.
    "filename_pattern": r"/plot_",
    "ignore_pattern": r"__init__\.py",
    "within_subsection_order": "FileNameSortKey",
    "doc_module": ("skprivreg",),
    "backreferences_dir": "generated/backreferences",
    "reference_url": {"skprivreg": None},
    "abort_on_example_error": True,
    "only_warn_on_example_error": False,
    "remove_config_comments": True,
    "show_memory": False,
    "min_reported_time": 1,
    "download_all_examples": False,
    "image_scrapers": ("matplotlib",),
    "matplotlib_animations": False,
    "plot_gallery": "True",
}

# plt.show() under the Agg backend says it cannot show anything: expected.
warnings.filterwarnings(
    "ignore", category=UserWarning, message="FigureCanvasAgg is non-interactive"
)

# -- HTML ---------------------------------------------------------------------------
html_theme = "pydata_sphinx_theme"
html_title = f"skprivreg {release}"
html_static_path = ["_static"]
html_css_files = ["skprivreg.css"]
html_show_sourcelink = False
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "navbar_align": "left",
    "header_links_before_dropdown": 6,
    "secondary_sidebar_items": ["page-toc"],
    "footer_start": ["copyright"],
    "footer_end": ["sphinx-version"],
}
# Pages without a section to navigate get the full width (the examples'
# code is wide).
html_sidebars = {
    "index": [],
    "install": [],
    "privacy": [],
    "benchmarks": [],
    "auto_examples/*": [],
    "api": [],
    "generated/*": [],
}

