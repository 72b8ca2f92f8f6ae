"""The engine: manuals -> semantic trees -> evidence and memories -> routes -> answers.

Packages by concept, each depending only on the ones listed before it:
``document`` (trees), ``memory`` (backbone, H2MT writer and learned parts), ``routing``
(top-down routing and its trace), ``answer`` (answer modes), ``training`` (learning the parts).
The pipelines that tie them to storage sit at this level: ``ingest`` (file -> library) and
``ask`` (question -> route -> answer -> query log), with ``runtime``, ``settings`` and ``cli``.
The engine never imports the UI (``app``) or the benches (``bench``).
"""
