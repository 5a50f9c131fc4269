"""Sphinx configuration of the bsdkm-ci docs (MyST Markdown, Buildbot's toolchain)."""

import sys
from pathlib import Path

here = Path(__file__).resolve().parent
sys.path[:0] = [str(here / "_ext"), str(here.parent)]

project = "bsdkm-ci"
author = "wolfSSL"
copyright = "wolfSSL Inc."

# The CLI and Action references are plain Markdown written into the pages by scripts/reference_docs.py
# (from docs/_ext), so GitHub shows them as the site does.
extensions = ["myst_parser"]
source_suffix = {".md": "markdown"}
myst_enable_extensions = ["deflist", "colon_fence"]
# Anchors for headings down to ####, so a page can link to another page's section.
myst_heading_anchors = 4
root_doc = "index"
exclude_patterns = ["_build", "_ext", "README.md"]
nitpicky = True
# Text as written, as GitHub shows it: "--variant" in prose stays two hyphens, not an en dash.
smartquotes = False
# Code blocks without a language are shell or output, never Python.
highlight_language = "text"
html_theme = "alabaster"
# Wide enough for a 78-column usage line and the reference tables.
html_theme_options = {"page_width": "1240px", "sidebar_width": "260px"}
html_static_path = ["_static"]
html_title = "bsdkm-ci"
