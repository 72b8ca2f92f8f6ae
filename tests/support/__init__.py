"""What the tests share: one runtime factory and the sample manual (``runtime``), a free port
(``network``), one Chromium fixture with one set of flags and the page helpers (``browser``),
and a memory writer held back (``memory_writer``). Tests import these, never each other."""
