"""The engine: manuals -> semantic trees -> evidence and memories -> routes -> answers.

Packages by concept, each depending only on the ones listed before it:
``document`` (trees), ``memory`` (backbone, H2MT writer and learned parts), ``routing``
(top-down routing and its trace), ``answer`` (answer modes), ``training`` (learning the parts).
The pipelines that tie them to storage sit at this level: ``ingest`` (file -> library) and
``ask`` (question -> route -> answer -> query log), with ``runtime``, ``settings`` and ``cli``.
The engine never imports the UI (``app``) or the benches (``bench``).
"""
import os as _os
import sys as _sys

# PyMuPDF 2 imports its optional layout analyser (pymupdf_layout, which it requires: an ONNX
# model) on every `import pymupdf`, a cost in time and memory per process (docs/results.md,
# "Phase one (tree and text evidence), quiet"). Only
# Page.get_layout() uses it, and nothing here calls that, so it is marked absent before any
# engine module imports pymupdf (pymupdf skips a layout module that fails to import), and the
# advice to install it, which find_tables() would print on stdout, is turned off.
_sys.modules.setdefault("pymupdf.layout", None)
_os.environ.setdefault("PYMUPDF_SUGGEST_LAYOUT_ANALYZER", "0")
