"""engine.answer.shown: the passages as read (signature first, then where, then text), one
place or several from the passages' scores, and the key line shown only as a whole term of the
quote's entry (issue 67)."""
from engine.answer.shown import (CLOSE_GAP, LOW_SCORE, NONE, ONE, SEVERAL, WEAK, card,
                                 key_line_shown, places, plain_heading)


def _p(text, score=1.3, page=8, heading="Author Commands › Patching"):
    return {"text": text, "score": score, "page": page, "page_label": None, "heading": heading,
            "doc": 1, "node": 2}


def test_a_card_reads_signature_where_text():
    c = card(_p("\\patchcmd{<command>}{<search>}\nThis command patches a macro."), 1)
    assert c.signature == "\\patchcmd{<command>}{<search>}" and c.page == "p. 8"
    assert c.lines()[:3] == ["1. \\patchcmd{<command>}{<search>}",
                             "   (Author Commands › Patching, p. 8)",
                             "   This command patches a macro."]
    prose = card(_p("The tools in this section are useful to hook into existing code. " * 3), 2)
    assert prose.signature == "" and prose.lines()[0] == "2. (Author Commands › Patching, p. 8)"
    assert 2 <= len(prose.lines()) <= 5


def test_the_storage_label_of_a_piece_is_not_shown():
    assert plain_heading("\\patchcmd › part 2 of 4") == "\\patchcmd"
    assert plain_heading("Intro › text") == "Intro"


def test_one_place_or_several():
    assert places([]).verdict == NONE
    assert places([_p("a b c d", 1.3)]).verdict == ONE
    assert places([_p("a", 1.3), _p("b", 1.3 - CLOSE_GAP / 2)]).verdict == SEVERAL
    assert places([_p("a", 1.3), _p("b", 1.3 - CLOSE_GAP / 2)]).open == 2
    far = places([_p("a", 1.3), _p("b", 1.3 - 2 * CLOSE_GAP)])
    assert far.verdict == ONE and far.open == 1
    assert places([_p("a", LOW_SCORE - 0.1), _p("b", LOW_SCORE - 0.5)]).verdict == WEAK


def test_the_key_line_only_as_a_whole_term_of_the_quote():
    quote = _p("\\newbool{<name>}\nDefines a new boolean flag. Use it as in\n"
               "\\setbool{flag}{true}")
    sig = {"text": "\\newbool{<name>}", "page": 13, "term": "\\newbool", "heading": "B"}
    assert key_line_shown(sig, quote)  # the entry's signature
    code = {"text": "\\setbool{flag}{true}", "page": 13, "term": "\\setbool", "heading": "B"}
    assert key_line_shown(code, quote)  # a line of code of the quote
    assert not key_line_shown({**sig, "page": None}, quote)  # no page: not shown
    debris = {"text": "l i n e . ”", "page": 4, "term": "”", "heading": "B"}
    assert not key_line_shown(debris, quote)
    elsewhere = {"text": "\\ifbool{<name>}", "page": 14, "term": "\\ifbool", "heading": "B"}
    assert not key_line_shown(elsewhere, quote)  # not a term of the quote's entry
    assert not key_line_shown(sig, None)


def test_the_key_line_on_screen_only_where_the_check_and_the_answer_agree():
    """Issue 67: a key line the answer check cannot back is no answer the screen may state."""
    from engine.answer.shown import key_line_on_screen

    quote = _p("\\newbool{<name>}\nDefines a new boolean flag.", 1.3)
    other = _p("\\ifbool{<name>}\nTests a flag.", 1.0)
    key = {"text": "\\newbool{<name>}", "page": 13, "term": "\\newbool", "heading": "B"}
    agree = {"confidence": {"signals": {"key_agree": 1.0}}, "folded": False}
    out = {"key_line": key, "quote": quote, "passages": [quote, other], **agree}
    assert key_line_on_screen(out)
    assert not key_line_on_screen({**out, "folded": True})  # the check does not back the answer
    assert not key_line_on_screen({**out, "confidence": {"signals": {"key_agree": 0.0}}})
    close = [quote, _p("\\ifbool{<name>}", 1.3 - CLOSE_GAP / 2)]
    assert not key_line_on_screen({**out, "passages": close})  # two candidate places
    assert key_line_on_screen({**out, "confidence": None, "folded": False})  # quote mode
    assert not key_line_on_screen({**out, "key_line": None})
