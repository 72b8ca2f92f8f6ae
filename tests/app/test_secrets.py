"""Secrets kept (issue 44): no password of a database URL, reader URL or API key in a log line,
a message or the reader line; an unexpected error is one line on the screen with a reference,
its text (SQL, paths) only in the server's log."""
from __future__ import annotations

import logging

import gradio as gr
import pytest

from engine.settings import Settings

PASSWORD = "hunter2-secret"


def test_serving_never_logs_the_database_password(monkeypatch, caplog, capsys, tmp_path):
    from app.serve import main

    monkeypatch.setenv("H2MT_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("H2MT_EXAMPLES", "0")
    caplog.set_level(logging.DEBUG)
    # a database that cannot be reached: the app logs where its library is, then says so
    rc = main(["--db", f"postgresql+psycopg://bob:{PASSWORD}@127.0.0.1:1/manuals",
               "--port", "1"])
    err = capsys.readouterr().err
    assert rc == 2 and "error: cannot open the database" in err and "bob:***@" in err
    assert "library: postgresql+psycopg://bob:***@127.0.0.1:1/manuals" in caplog.text
    assert PASSWORD not in caplog.text and PASSWORD not in err


def test_settings_and_reader_never_show_url_passwords():
    from engine.serving.remote_reader import ReaderError, RemoteReader

    s = Settings(db_url=f"postgresql+psycopg://bob:{PASSWORD}@db/x", reader_api_key="sk-key",
                 reader=f"http://u:{PASSWORD}@127.0.0.1:1/v1", reader_model="m",
                 auth=f"alice:{PASSWORD}")
    assert PASSWORD not in repr(s) and "sk-key" not in repr(s) and "bob:***@db" in repr(s)
    reader = RemoteReader(s.reader, "m", "sk-key", connect_s=1)
    assert reader.label == "m at http://127.0.0.1:1/v1" and PASSWORD not in repr(reader)
    with pytest.raises(ReaderError) as e:
        reader.models()
    assert "127.0.0.1:1" in str(e.value) and PASSWORD not in str(e.value)


def test_an_unexpected_error_is_one_line_with_a_reference(caplog):
    from app.shared.user_errors import user_errors

    with pytest.raises(gr.Error) as e, user_errors():
        raise RuntimeError(f"(psycopg.errors.X) SELECT * FROM queries WHERE pw='{PASSWORD}'")
    shown = e.value.message
    assert "\n" not in shown and "SELECT" not in shown and PASSWORD not in shown
    ref = shown.split("ref ")[1].split()[0]
    assert f"[ref {ref}]" in caplog.text and "SELECT" in caplog.text  # the detail: in the log
