"""The dense channel's sentence encoder (engine.routing.dense), on the real all-MiniLM-L6-v2 model
from its PyPI package: a few dozen texts, seconds on a CPU."""
from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from engine.routing import dense
from engine.routing.dense import DIM, SentenceEncoder, load_encoder

ROOT = Path(__file__).resolve().parents[2]

# Real paragraphs of etoolbox-manual.pdf (../shared/corpus), as evidence texts: heading path,
# newline, body.
ETOOLBOX = {
    "patchcmd": (
        "Author Commands > Patching > \\patchcmd\n"
        "\\patchcmd[<prefix>]{<command>}{<search>}{<replace>}{<success>}{<failure>}\n"
        "This command extracts the replacement text of a <command>, replaces <search> with "
        "<replace>, and reassembles the <command>. The pattern match is category code agnostic "
        "and matches the first occurence of the <search> pattern in the replacement text of the "
        "<command> to be patched."),
    "newrobustcmd": (
        "User Commands > Definitions > \\newrobustcmd\n"
        "\\newrobustcmd{<command>}[<arguments>][<optarg default>]{<replacement text>}\n"
        "The syntax and behavior of this command is similar to \\newcommand except that the "
        "newly defined <command> will be robust."),
    "AtEndPreamble": (
        "User Commands > Document Hooks > \\AtEndPreamble\n"
        "\\AtEndPreamble{<code>}\n"
        "This hook differs from \\AtBeginDocument in that the <code> is executed right at the end "
        "of the preamble, before the main aux file (as written on the previous LaTeX pass) is "
        "read and prior to any \\AtBeginDocument code."),
    "ifdef": (
        "Author Commands > Generic Tests > Macro Tests > \\ifdef\n"
        "\\ifdef{<control sequence>}{<true>}{<false>}\n"
        "Expands to <true> if the <control sequence> is defined, and to <false> otherwise. Note "
        "that control sequences will be considered as defined even if their meaning is \\relax."),
    "ifnumcomp": (
        "Author Commands > Generic Tests > Arithmetic Tests > \\ifnumcomp\n"
        "\\ifnumcomp{<integer expression>}{<relation>}{<integer expression>}{<true>}{<false>}\n"
        "Compares two integer expressions according to <relation> and expands to <true> or "
        "<false> depending on the result. The <relation> may be <, >, or =."),
    "listadd": (
        "Author Commands > List Processing > Internal Lists > \\listadd\n"
        "\\listadd{<listmacro>}{<item>}\n"
        "This command appends an <item> to a <listmacro>. A blank <item> is not added to the "
        "list."),
}


@pytest.fixture(scope="module")
def encoder() -> SentenceEncoder:
    return load_encoder("cpu")


def test_shape_dtype_and_unit_rows(encoder):
    texts = list(ETOOLBOX.values()) + ["short", "x " * 600]  # the last one is truncated
    v = encoder.encode(texts)
    assert v.shape == (len(texts), DIM) and v.dtype == np.float32
    assert encoder.dim == DIM
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert np.isfinite(v).all()


def test_empty_texts_give_zero_rows(encoder):
    v = encoder.encode(["", ETOOLBOX["ifdef"], "   ", ""])
    assert v.shape == (4, DIM)
    assert not v[[0, 2, 3]].any()
    assert abs(float(np.linalg.norm(v[1])) - 1.0) < 1e-5
    assert encoder.encode([]).shape == (0, DIM)
    assert not encoder.encode_query("").any()


def test_question_ranks_the_right_paragraph_first(encoder):
    names = list(ETOOLBOX)
    vectors = encoder.encode([ETOOLBOX[k] for k in names])
    cases = {"How do I patch a command?": "patchcmd",
             "How can I run code at the end of the preamble?": "AtEndPreamble",
             "How do I test whether a macro is defined?": "ifdef",
             "How do I compare two integer expressions?": "ifnumcomp"}
    for question, want in cases.items():
        scores = vectors @ encoder.encode_query(question)
        assert names[int(np.argmax(scores))] == want, (question, dict(zip(names, scores)))


def test_query_equals_the_same_text_in_a_batch(encoder):
    texts = list(ETOOLBOX.values())
    batch = encoder.encode(texts)
    for i, text in enumerate(texts):
        alone = encoder.encode_query(text)
        assert alone.shape == (DIM,) and alone.dtype == np.float32
        if encoder.precision == "fp32":  # the default: a row does not depend on its batch
            np.testing.assert_allclose(alone, batch[i], atol=1e-5)
        else:  # int8 activations are quantised per batch (engine/routing/dense.py)
            assert float(alone @ batch[i]) > 0.9


@pytest.fixture(scope="module")
def int8_encoder() -> SentenceEncoder:
    return SentenceEncoder("cpu", quantize="int8")


def test_int8_option_is_close_but_batch_dependent(int8_encoder):
    q = int8_encoder
    assert q.precision == "int8" and "int8" in q.fingerprint
    texts = list(ETOOLBOX.values())
    batch = q.encode(texts)
    np.testing.assert_allclose(np.linalg.norm(batch, axis=1), 1.0, atol=1e-5)
    alone = np.stack([q.encode_query(t) for t in texts])
    assert np.sum(alone * batch, axis=1).min() > 0.9


def test_progress_reports_every_chunk(encoder, monkeypatch):
    monkeypatch.setattr(dense, "CHUNK", 4)
    calls = []
    texts = [f"paragraph {i} about \\patchcmd" for i in range(9)] + [""]
    encoder.encode(texts, batch_size=4, progress=lambda d, t: calls.append((d, t)))
    assert calls[-1] == (10, 10)
    assert [d for d, _ in calls] == sorted(d for d, _ in calls) and len(calls) == 3
    assert all(t == 10 for _, t in calls)


def test_fingerprint_names_what_changes_vectors(encoder, int8_encoder):
    fp = encoder.fingerprint
    assert dense.MODEL_NAME in fp and dense.package_version() in fp
    assert f"seq{dense.DEFAULT_MAX_SEQ_LENGTH}" in fp and encoder.precision in fp
    fp32 = encoder if encoder.precision == "fp32" else SentenceEncoder("cpu", quantize="none")
    longer = SentenceEncoder("cpu", max_seq_length=dense.DEFAULT_MAX_SEQ_LENGTH * 2)
    assert len({fp32.fingerprint, int8_encoder.fingerprint, longer.fingerprint}) == 3
    assert f"seq{dense.DEFAULT_MAX_SEQ_LENGTH * 2}" in longer.fingerprint
    assert "fp32" in fp32.fingerprint and "int8" in int8_encoder.fingerprint
    # Either way the vectors stay close to each other.
    texts = list(ETOOLBOX.values())
    cos = np.sum(fp32.encode(texts) * int8_encoder.encode(texts), axis=1)
    assert cos.min() > 0.9, cos


def test_loads_offline_without_hub_settings(tmp_path):
    """A fresh process with no HF_HUB_OFFLINE and an unreachable hub still loads the model."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    env.update(HF_ENDPOINT="http://127.0.0.1:9", HTTP_PROXY="http://127.0.0.1:9",
               HTTPS_PROXY="http://127.0.0.1:9", HF_HOME=str(tmp_path / "hf"),
               PYTHONPATH=str(ROOT))
    code = ("from engine.routing.dense import load_encoder; e = load_encoder('cpu'); "
            "v = e.encode_query('How do I patch a command?'); print(e.fingerprint, v.shape)")
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "(384,)" in out.stdout


def test_loader_is_cached_and_thread_safe(encoder):
    assert load_encoder("cpu") is encoder
    texts = list(ETOOLBOX.values())
    want = encoder.encode(texts)
    results, errors = [], []

    def work():
        try:
            results.append(encoder.encode(texts))
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for r in results:
        np.testing.assert_allclose(r, want, atol=1e-5)


def test_bad_settings_are_refused():
    with pytest.raises(ValueError):
        SentenceEncoder("cpu", quantize="int4")


def test_bfloat16_texts_keep_to_the_float32_vectors_whatever_their_batch(encoder):
    """The passage windows' precision: its texts' matmuls in bfloat16, no per-batch scale (a
    text alone and in a batch agree), the question in float32 as it was."""
    half = dense.BFloat16Texts(encoder)
    texts = list(ETOOLBOX.values())
    batch = half.encode(texts)
    assert batch.dtype == np.float32 and batch.shape == (len(texts), DIM)
    np.testing.assert_allclose(np.linalg.norm(batch, axis=1), 1.0, atol=1e-5)
    assert np.sum(batch * encoder.encode(texts), axis=1).min() > 0.999
    alone = np.concatenate([half.encode([t]) for t in texts])
    assert np.sum(alone * batch, axis=1).min() > 0.9999
    assert not np.array_equal(batch, encoder.encode(texts))  # computed otherwise
    q = "How do I patch a command?"
    assert np.array_equal(half.encode_query(q), encoder.encode_query(q))
    assert "|bf16" in half.fingerprint and half.fingerprint != encoder.fingerprint
    assert half.fingerprint == encoder.fingerprint.replace("|fp32", "|bf16")


def test_the_windows_precision_setting_picks_the_encoder(encoder, int8_encoder):
    assert dense.for_windows(encoder, "fp32") is encoder
    assert isinstance(dense.for_windows(encoder, "bf16"), dense.BFloat16Texts)
    auto = dense.for_windows(encoder, "auto")
    assert (auto is encoder) != dense.bf16_native("cpu")
    assert dense.for_windows(int8_encoder, "auto") is int8_encoder  # no bfloat16 over int8
    with pytest.raises(ValueError):
        dense.for_windows(int8_encoder, "bf16")
    with pytest.raises(ValueError):
        dense.for_windows(encoder, "fp16")
    assert dense.for_windows(None, "auto") is None


def test_the_evidence_precision_setting_picks_the_encoder(encoder, int8_encoder):
    assert dense.for_evidence(encoder, "fp32") is encoder
    half = dense.for_evidence(encoder, "bf16")
    assert isinstance(half, dense.BFloat16Texts) and half.fingerprint.endswith("|bf16")
    auto = dense.for_evidence(encoder, "auto")
    assert (auto is encoder) != dense.bf16_native("cpu")
    assert dense.for_evidence(int8_encoder, "auto") is int8_encoder
    with pytest.raises(ValueError, match="evidence precision 'int8'"):
        dense.for_evidence(encoder, "int8")
    assert dense.for_evidence(None, "bf16") is None
