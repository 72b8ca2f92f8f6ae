"""The Ask tab: its layout and events (``ask_tab``), its components as plain data
(``ask_components``), its handlers (``ask_handlers``: asking, selecting a row; ``ask_history``: a
manual's past questions), a checked answer folded and marked (``answer_fold``) and the line on
which model reads (``reader_view``). The request it parses (``app.shared.ask_request``) and the
answer's views (``app.views``) are shared with the other tabs."""
