"""The repetition guard: the decoding stop on a looping 4-gram and the degeneracy check."""
from __future__ import annotations

import pytest
import torch

from engine.answer.generation.cleanup import clean_answer, degeneracy, trim_loop
from engine.answer.generation.streamer import DECODE, GuardedStreamer
from engine.serving.stops import RepeatStop, repeats
from engine.answer.generation.decoding import Decoding, Plan, generate
from engine.answer.generation.prompts import chat_parts


def test_repeats_counts_the_last_ngram():
    assert repeats([1, 2, 3, 4, 9, 1, 2, 3, 4], 4) == 2
    assert repeats([1, 2, 3], 4) == 0


def test_repeat_stop_fires_on_the_third_occurrence_only():
    stop = RepeatStop(n=2, times=3)
    seq = [7, 5, 6, 5, 6, 8]  # (5, 6) twice: allowed
    for i in range(1, len(seq) + 1):
        assert not bool(stop(torch.tensor([seq[:i]]), None)[0])
    assert bool(stop(torch.tensor([seq + [5, 6]]), None)[0]) and stop.fired


def test_a_loop_is_cut_off_where_it_began():
    """A 20-token round repeated: the stop fires 16 tokens into the second round and cuts
    those 16 off, so the kept tokens hold the first round once."""
    rnd = list(range(100, 120))
    seq = [1, 2, 3] + rnd + rnd
    stop = RepeatStop()
    fired_at = next(i for i in range(1, len(seq) + 1) if bool(stop(torch.tensor([seq[:i]]), None)[0]))
    assert stop.fired == "loop" and fired_at == 3 + 20 + 16 and stop.trim == 16
    assert seq[: fired_at - stop.trim] == [1, 2, 3] + rnd


def test_the_streamer_never_shows_what_the_guard_cuts_off(real_tokenizer):
    ids = real_tokenizer.encode(" The patch command replaces the search text with the replace "
                                "text in the command's code, then reassembles it. ")
    seq = ids + ids  # a loop
    stop = RepeatStop()
    streamer = GuardedStreamer(real_tokenizer, guard=stop)
    streamer.put(torch.zeros(1, 0, dtype=torch.long))  # generate() passes the (empty) prompt
    shown = []
    for i, t in enumerate(seq):
        streamer.put(torch.tensor([t]))
        while not streamer.text_queue.empty():
            shown.append(streamer.text_queue.get())
        if bool(stop(torch.tensor([seq[: i + 1]]), None)[0]):
            break
    streamer.end()
    rest = list(streamer)
    kept = real_tokenizer.decode(seq[: i + 1 - stop.trim], **DECODE)
    assert stop.fired == "loop" and "".join(shown + rest) == kept
    assert kept.count("reassembles") == 1 and "".join(shown).count("replace") <= 2


@pytest.mark.parametrize("text,reason", [
    ("<defs> <defs> <defs> <defs> <defs> <defs>", "repeat"),
    ("1. Create a new command 2. Create a new command 3. Create a new command", "repeat"),
    ("Use \\patchcmd. <defs> <g> <path> </g>", "markup"),
    ("}}}} \\\\ ]] {{ ]] }}} )) ;; }} \\\\ ]] ))", "markup"),
    ("To detect pin placement issues, use a technique called pin-pin-pin-pin-", "repeat"),
    ("   ", "empty"),
    ("Use \\patchcmd: it replaces <search> by <replace> in the command's code.", None),
    # naming the command three times is not a loop
    ("To patch a command, use the \\patchcmd command. The \\patchcmd command is a standard "
     "command that can be used to patch a command. The \\patchcmd command", None),
])
def test_degeneracy(text, reason):
    assert degeneracy(text) == reason


def test_a_loop_stopped_in_its_third_round_is_degenerate():
    text = ("To build the design, read the LEF and Liberty files, link the top module and run the "
            "floorplan step before placement. 1. Create a new project with the desired "
            "architecture. 2. Create a new project with the desired architecture. 3. Create a new")
    assert degeneracy(text) is None  # read alone, two rounds could be a list
    assert degeneracy(text, stop="repeat") == "repeat"
    assert degeneracy("Use \\patchcmd.", stop="loop") == "repeat"  # little left before the loop
    tail = "Use the -tail_pin option. Here is an example:\n\n# Restructure\n\n# Restructure\n\n# Restructure"
    assert degeneracy(tail) is None and degeneracy(tail, stop="repeat") == "repeat"


def test_a_loop_cut_by_the_stop_ends_at_a_full_sentence():
    text = "Use `pdn_grid` to build the grid. It takes the layers as options. The manual also"
    assert clean_answer(text, "loop") == ("Use `pdn_grid` to build the grid. It takes the "
                                          "layers as options.", None, True)
    assert clean_answer(text, "eos") == (text, None, False)  # only after a cut loop
    assert trim_loop("The `place_pin` command places pins. The `place_pin` command places "
                     "pins. The `place_pin` command") == "The `place_pin` command places pins."


@pytest.mark.parametrize("text,kept", [
    # real SmolLM2 text answers that began to loop (ORD-QA and manual dev runs)
    ("The \\newrobustcmd command is a macro, while \\DeclareRobustCommand is a command.\n\n"
     "The \\newrobustcmd command is a macro that is defined by",
     "The \\newrobustcmd command is a macro, while \\DeclareRobustCommand is a command."),
    ("The steps are:\n\n1. The IDL compiler generates the IDL source files.\n2. The IDL "
     "compiler generates the IDL source files.\n3. The IDL",
     "The steps are:\n\n1. The IDL compiler generates the IDL source files."),
    ("The command line for running camlidl is:\n\ncamlidl -cpp -header -header -header -header",
     "The command line for running camlidl is:\n\ncamlidl -cpp -header"),
    ("Here is an example:\n\n```\n<pre>\n<pre>\n<pre>", "Here is an example:\n\n```\n<pre>"),
    ("Use \\patchcmd: it replaces <search> by <replace> in the command's code.", None),
])
def test_trim_loop_keeps_what_came_before_the_repetition(text, kept):
    assert trim_loop(text) == kept
    if kept is not None:
        assert degeneracy(kept) is None and text.startswith(kept)


@pytest.mark.real_model
def test_generation_stops_on_a_loop_with_the_real_backbone(real_backbone):
    """SmolLM2 asked to repeat a tag loops until the token limit; the guard stops it early."""
    (prompt,) = chat_parts(real_backbone, "Write the tag <defs> forty times, separated by spaces.")
    emb = real_backbone.embed(torch.tensor(real_backbone.encode(prompt))).float()
    plan = Plan(real_backbone, [emb])
    free = generate(plan, Decoding(max_new_tokens=48, guard=False))
    guarded = generate(plan, Decoding(max_new_tokens=48))
    assert free.stop == "length" and free.generated_tokens == 48 and free.cut
    assert guarded.stop in ("repeat", "loop") and guarded.generated_tokens < 24
    assert not guarded.cut and degeneracy(guarded.text, guarded.stop) is not None
    assert degeneracy(free.text) is not None


def test_a_slow_reader_gets_the_waiting_pieces_in_one_and_a_prompt_one_token_at_a_time(
        real_tokenizer):
    ids = real_tokenizer.encode(" Use the patchcmd command to patch a macro in place, then check"
                                " the result with tracingpatches.")
    prompt = GuardedStreamer(real_tokenizer, hold=0)
    prompt.put(torch.zeros((1, 0), dtype=torch.long))
    pieces = []
    for i in ids:  # read after every token: one piece a token, as before
        prompt.put(torch.tensor([i]))
        pieces.append(next(prompt))
    prompt.end()
    assert len(pieces) >= len(ids) - 2 and list(prompt) in ([], [""])

    slow = GuardedStreamer(real_tokenizer, hold=0)
    slow.put(torch.zeros((1, 0), dtype=torch.long))
    for i in ids:  # nobody reads until the end
        slow.put(torch.tensor([i]))
    slow.end()
    joined = list(slow)
    assert joined == ["".join(pieces)] == [real_tokenizer.decode(ids, **DECODE)]


def test_the_incremental_stop_fires_where_counting_over_all_tokens_does():
    """``RepeatStop`` keeps n-gram counts (one new n-gram a token); on random sequences (of a
    few distinct tokens, or a random round repeated) it fires at the same token, with the same
    rule, as ``repeats`` over every token so far; the same through ``add`` (the worker) and
    ``__call__`` (generate)."""
    rng = torch.Generator().manual_seed(3)
    rules = set()
    for trial in range(60):
        if trial % 2:
            seq = torch.randint(0, 2 + trial % 5, (300,), generator=rng).tolist()
        else:
            head = torch.randint(0, 50, (trial,), generator=rng).tolist()
            seq = head + torch.randint(0, 1000, (17 + trial % 7,), generator=rng).tolist() * 3
        by_count = next(((i, "loop") if repeats(seq[:i], 16) >= 2 else (i, "repeat")
                         for i in range(1, len(seq) + 1)
                         if repeats(seq[:i], 16) >= 2 or repeats(seq[:i], 4) >= 3), None)
        added, called = RepeatStop(), RepeatStop()
        at_add = next((i + 1 for i, t in enumerate(seq) if added.add(t)), None)
        prompt = [9, 9, 9]  # generate hands the prompt's ids too; the stop reads the new ones
        at_call = next((i for i in range(1, len(seq) + 1)
                        if bool(called(torch.tensor([prompt + seq[:i]]), None)[0])), None)
        assert by_count is not None
        assert (at_add, added.fired) == by_count == (at_call, called.fired)
        rules.add(added.fired)
    assert rules == {"loop", "repeat"}
