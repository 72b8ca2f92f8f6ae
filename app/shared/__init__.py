"""What every tab shares, below the views and the tabs: the app's state object and its helpers
(``state``), a handler bound to its inputs (``binding``), the engine's errors as the page shows
them (``user_errors``), the lines on memories not written yet (``memory_lines``), one parsed ask
(``ask_request``, read by the Ask and Compare tabs and the /ask API), who may sign in
(``accounts``), the background memory writer (``memory_writer``), the checks on an uploaded file
(``uploads``) and the shipped example manual with its questions (``examples``,
``example_manual/``). Nothing here imports the views, a tab or the page."""
