"""The Library tab (``library_tab``): upload manuals, see the library and how far each one's
memories are, read a manual's outline node by node (``outline``), delete a manual; its
components as plain data (``library_components``). The upload checks (``app.shared.uploads``)
and the memory writer (``app.shared.memory_writer``) are shared with the example manual."""
