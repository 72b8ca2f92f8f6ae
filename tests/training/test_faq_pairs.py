"""FAQ items read from the three formats Debian's FAQ documents come in, and the pairs made of
them (engine.training.faq_pairs). The snippets are cut from those documents (perlfaq4.pod,
the Python FAQ's HTML, the CVS and Midnight Commander FAQs)."""
from engine.training.faq_pairs import Faq, FaqItem, from_html, from_pod, from_text, pairs, passages

POD = """=head1 Data: Numbers

=head2 Why is int() broken?

Your C<int()> is most probably working just fine. It's the numbers that
aren't quite what you think.

    print int(0.6/0.2-2), "\\n";

=head2 Does Perl have a round() function?

(contributed by brian d foy)

Remember that C<int()> merely truncates toward 0.

=head1 Data: Dates
"""

HTML = """<html><body><h1>Programming FAQ</h1>
<section><h2>General Questions</h2>
<section><h3>Is there a source code level debugger with breakpoints?<a class="headerlink">\u00b6</a></h3>
<p>Yes.</p><p>The pdb module is a simple but adequate console-mode debugger.</p>
<div class="highlight"><pre>import pdb
pdb.set_trace()</pre></div>
</section>
<section><h3>Are there tools to help find bugs?</h3><ul><li><p>Pylint and Pyflakes do basic checking.</p></li></ul>
</section></section></body></html>"""

TEXT = """Contents
    7.1 How can I see the contents of a tar archive?

7.1 How can I see the contents of a tar archive?

   Select the archive in a panel and press Enter.
   The archive is shown as a directory.

 2. How do I add a new file to the branch I'm working on?

   Use "cvs add" in a working directory checked out
   on that branch.
"""


def test_pod_questions_and_their_paragraphs():
    items = from_pod(POD)
    assert [i.question for i in items] == ["Why is int() broken?",
                                          "Does Perl have a round() function?"]
    assert items[0].paragraphs[0].startswith("Your int() is most probably")
    assert items[0].paragraphs[1].lstrip().startswith("print int(0.6/0.2-2)")  # code kept
    assert items[1].paragraphs == ["Remember that int() merely truncates toward 0."]


def test_html_questions_are_headings_ending_in_a_question_mark():
    items = from_html(HTML)
    assert [i.question for i in items] == [
        "Is there a source code level debugger with breakpoints?",
        "Are there tools to help find bugs?"]
    assert items[0].paragraphs[:2] == [
        "Yes.", "The pdb module is a simple but adequate console-mode debugger."]
    assert "pdb.set_trace()" in items[0].paragraphs[2]
    assert items[1].paragraphs == ["Pylint and Pyflakes do basic checking."]


def test_text_questions_lose_their_numbers_and_the_contents_lines():
    items = from_text(TEXT)
    assert [i.question for i in items] == [
        "How can I see the contents of a tar archive?",
        "How do I add a new file to the branch I'm working on?"]
    assert items[0].paragraphs == [
        "Select the archive in a panel and press Enter. The archive is shown as a directory."]


def test_pairs_take_negatives_from_other_answers_of_the_same_faq():
    faq = Faq("toy", [FaqItem(f"How do I use option {k}?",
                              [f"Option {k} sets the width of column {k} in the table."])
                      for k in range(12)])
    recs = pairs(faq)
    assert len(recs) == 12
    for k, r in enumerate(recs):
        assert r["positive"] == passages(faq.items[k])[0]
        assert r["positive"] not in r["negatives"]
        assert len(r["negatives"]) == 11 and len(set(r["negatives"])) == 11
        assert sum(r["pool_labels"]) == 1 and len(r["pool"]) == 12
