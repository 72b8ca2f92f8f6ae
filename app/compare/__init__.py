"""The Compare tab (``compare_tab``): the same question in two modes side by side, their answers,
timings, memory and routing trees, over the Ask tab's parsed request (``app.shared.ask_request``)
and the shared answer views (``app.views``)."""
