"""An answer and its route as the page shows them, shared by the tabs (Ask, Compare, Evaluation,
the Library's outline): the answer's component values (``answer_view``), its quote
(``quote_view``), the page view of a cited section (``pages``), the routing tree (``figures``, the
nodes it draws ``visible_tree``, its labels ``tree_labels``, its ``layout``), the whole manual as
an icicle (``icicle``), their hover text (``hover``), the same route as tables
(``route_tables``), contents and index runs folded (``folds``), the last answer's notes
(``view_state``) and the thumbs on an answer (``feedback``). These modules import ``app.shared``
and each other, never a tab."""
