"""Settings of a served reader: read from the environment, checked in one line each, the API key
never shown; nothing later overrides what the environment says."""
from __future__ import annotations

import pytest

from engine.settings import Settings, SettingsError, is_url

URL = "http://gpu-box:8000/v1"


def test_a_served_reader_from_the_environment():
    s = Settings.from_env({"H2MT_READER": URL, "H2MT_READER_MODEL": "Qwen/Qwen2.5-7B-Instruct",
                           "H2MT_READER_API_KEY": "sk-abc", "H2MT_READER_STALL_S": "5",
                           "H2MT_READER_CONTEXT_TOKENS": "32768"})
    assert s.reader_is_remote and s.reader_model == "Qwen/Qwen2.5-7B-Instruct"
    assert s.reader_api_key == "sk-abc" and s.reader_stall_s == 5.0
    assert s.reader_context_tokens == 32768
    assert "sk-abc" not in repr(s)
    # nothing given later without a value (a CLI flag left out, the app's own changes) wins
    assert s.with_(reader=None, reader_model=None, db_url="sqlite://").reader == URL
    assert s.with_(reader=None).reader_api_key == "sk-abc"


def test_empty_values_are_none():
    s = Settings.from_env({"H2MT_READER_API_KEY": "", "H2MT_READER_MODEL": " "})
    assert s.reader_api_key is None and s.reader_model is None and not s.reader_is_remote


@pytest.mark.parametrize("env, says", [
    ({"H2MT_READER": URL}, "set H2MT_READER_MODEL"),
    ({"H2MT_READER": "http://gpu-box:8000", "H2MT_READER_MODEL": "m"}, "ends in /v1"),
    ({"H2MT_READER": "http:///v1", "H2MT_READER_MODEL": "m"}, "has no host"),
    ({"H2MT_READER_MODEL": "m"}, "is not an http(s) URL"),
    ({"H2MT_READER": URL, "H2MT_READER_MODEL": "m", "H2MT_READER_STALL_S": "0"}, "positive"),
    ({"H2MT_READER": URL, "H2MT_READER_MODEL": "m", "H2MT_READER_API_KEY": "sk-x",
      "H2MT_READER_CONTEXT_TOKENS": "lots"}, "not a number"),
])
def test_bad_reader_settings_are_one_line(env, says):
    with pytest.raises(SettingsError) as e:
        Settings.from_env(env)
    assert says in str(e.value) and "\n" not in str(e.value) and "sk-x" not in str(e.value)


def test_what_is_a_url():
    assert is_url("https://api.example.com/v1") and is_url("HTTP://localhost:11434/v1")
    assert not is_url("smollm2") and not is_url("/models/qwen") and not is_url("Qwen/Qwen2.5")
    assert not is_url("C:/models/x.gguf") and not is_url(None)


def test_a_commands_flags_win_over_the_environment():
    env = {"H2MT_READER": URL}  # no model in the environment: the flag completes it
    s = Settings.from_env(env, reader_model="m", db_url=None)
    assert (s.reader, s.reader_model, s.db_url) == (URL, "m", None)
    assert Settings.from_env(env, reader="smollm2").reader == "smollm2"


def test_the_answer_check_is_on_by_default_with_the_shipped_model_and_none_turns_it_off():
    from engine.answer.checks.confidence import Confidence
    from engine.settings import SHIPPED_ANSWER_CHECK

    assert Settings().answer_check == "auto"
    assert Settings().answer_check_path == SHIPPED_ANSWER_CHECK
    shipped = Confidence.load(Settings().answer_check_path)
    assert shipped is not None and shipped.reader == Settings().reader  # fitted on the bundled one
    assert Settings.from_env({"H2MT_ANSWER_CHECK": "none"}).answer_check_path is None


def test_the_short_answer_is_off_by_default_and_auto_is_the_shipped_scorer():
    from engine.answer.passages.short_answer import TermScorer
    from engine.settings import SHIPPED_SHORT_ANSWER

    assert Settings().short_answer == "none" and Settings().short_answer_path is None
    auto = Settings.from_env({"H2MT_SHORT_ANSWER": "auto"})
    assert auto.short_answer_path == SHIPPED_SHORT_ANSWER
    assert TermScorer.load(auto.short_answer_path) is not None


@pytest.mark.parametrize("name", ["H2MT_ANSWER_CHECK", "H2MT_PASSAGE_RANKER", "H2MT_FUSION",
                                  "H2MT_SHORT_ANSWER"])
def test_a_learned_part_named_by_a_missing_path_is_one_line(name, tmp_path):
    missing = tmp_path / "no-such-model.json"
    with pytest.raises(SettingsError, match=f"{name}=.*is not a file: give 'auto'"):
        Settings.from_env({name: str(missing)})
    fitted = tmp_path / "fitted.json"
    fitted.write_text("{}")
    assert Settings.from_env({name: str(fitted)}) is not None


def test_the_generation_process_is_yes_no_or_left_to_who_runs():
    """H2MT_GENERATION_PROCESS: unset or empty leaves it to the runner (the app turns it on),
    a yes/no word sets it, anything else is one line naming the variable."""
    assert Settings.from_env({}).generation_process is None
    assert Settings.from_env({"H2MT_GENERATION_PROCESS": ""}).generation_process is None
    assert Settings.from_env({"H2MT_GENERATION_PROCESS": "1"}).generation_process is True
    assert Settings.from_env({"H2MT_GENERATION_PROCESS": "off"}).generation_process is False
    with pytest.raises(SettingsError, match="H2MT_GENERATION_PROCESS"):
        Settings.from_env({"H2MT_GENERATION_PROCESS": "sometimes"})


def test_the_windows_precision_is_auto_by_default_and_a_bad_one_is_one_line():
    assert Settings().window_precision == "auto"
    assert Settings.from_env({"H2MT_WINDOW_PRECISION": "fp32"}).window_precision == "fp32"
    with pytest.raises(SettingsError) as e:
        Settings.from_env({"H2MT_WINDOW_PRECISION": "int8"})
    assert "H2MT_WINDOW_PRECISION='int8'" in str(e.value) and "\n" not in str(e.value)


def test_the_evidence_precision_is_auto_by_default_and_a_bad_one_is_one_line():
    assert Settings().evidence_precision == "auto"
    assert Settings.from_env({"H2MT_EVIDENCE_PRECISION": "fp32"}).evidence_precision == "fp32"
    with pytest.raises(SettingsError) as e:
        Settings.from_env({"H2MT_EVIDENCE_PRECISION": "fp16"})
    assert "H2MT_EVIDENCE_PRECISION='fp16'" in str(e.value) and "\n" not in str(e.value)
