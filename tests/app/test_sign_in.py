"""Sign-in and roles (issue 44) through the served app and its API: anonymous calls refused,
a reader cannot delete or upload, each person sees only their own question history (an admin
everyone's); the accounts' parsing, hashes and the refusal to listen openly without sign-in."""
from __future__ import annotations

import urllib.error
import urllib.request

import pytest

from app.shared.accounts import (Accounts, add_user, check_listen, hash_password, read_auth_file,
                                 verify_password)
from engine.settings import Settings, SettingsError

GUIDE = ("# Pump guide\n\n## Priming the pump\n\nOpen the vent plug, fill the casing with water "
         "until it overflows, then refit the plug.\n\n## Changing the impeller\n\nUnplug the "
         "pump, remove the six cover screws and pull the impeller off its shaft.\n")
ROUTE_ASK = ("route", 2, 0, 0, True, False, 8, "lexical")
HTTP = {"timeout": 120}  # gradio_client's own 5 s is too short on a loaded machine


def test_hashes_are_salted_and_verified():
    a, b = hash_password("s3cret"), hash_password("s3cret")
    assert a != b and "s3cret" not in a
    assert verify_password("s3cret", a) and not verify_password("s3cret!", a)
    assert not verify_password("s3cret", "garbage")


def test_accounts_from_settings(tmp_path):
    f = tmp_path / "users"
    assert add_user(f, "carol", "pw3") and not add_user(f, "carol", "pw4")  # replaced
    assert list(read_auth_file(f)) == ["carol"] and (f.stat().st_mode & 0o777) == 0o600
    acc = Accounts.from_settings(Settings(data_dir=tmp_path, auth="alice:pw1, bob:pw:2",
                                          auth_file=f, admins="alice"))
    assert acc.enabled and acc.names == {"alice", "bob", "carol"}
    assert acc.check("alice", "pw1") and acc.check("bob", "pw:2") and acc.check("carol", "pw4")
    assert not acc.check("carol", "pw3") and not acc.check("mallory", "pw1")
    assert acc.is_admin("alice") and not acc.is_admin("bob") and not acc.is_admin(None)
    assert Accounts().is_admin(None)  # no sign-in: a laptop's single user does everything
    with pytest.raises(SettingsError, match="H2MT_AUTH must be") as e:
        Accounts.from_settings(Settings(data_dir=tmp_path, auth="alice:pw1,nopassword"))
    assert "pw1" not in str(e.value)
    assert "pw1" not in repr(Settings(data_dir=tmp_path, auth="alice:pw1"))


def test_open_interfaces_need_sign_in_or_h2mt_open(tmp_path):
    s = Settings(data_dir=tmp_path)
    check_listen("127.0.0.1", Accounts(), s)
    check_listen("localhost", Accounts(), s)
    for host in ("0.0.0.0", "192.168.1.4", "::"):
        with pytest.raises(SettingsError, match="H2MT_OPEN=1"):
            check_listen(host, Accounts(), s)
    with pytest.raises(SettingsError, match="share"):
        check_listen("127.0.0.1", Accounts(), s, share=True)
    check_listen("0.0.0.0", Accounts(), s.with_(open=True))
    check_listen("0.0.0.0", Accounts.from_settings(s.with_(auth="a:b")), s)


def test_serve_refuses_an_open_interface_before_loading(monkeypatch, capsys):
    from app.serve import main

    monkeypatch.delenv("H2MT_AUTH", raising=False)
    monkeypatch.delenv("H2MT_AUTH_FILE", raising=False)
    monkeypatch.delenv("H2MT_OPEN", raising=False)
    assert main(["--host", "0.0.0.0", "--port", "1"]) == 2
    assert "without sign-in" in capsys.readouterr().err


@pytest.fixture(scope="module")
def served(tiny_backbone, tiny_parts, tmp_path_factory):
    """(url, runtime, doc id) of the app with sign-in on: alice (admin), bob and carol."""
    from app.shared.accounts import Accounts
    from app.ui import build_app, launch_app
    from engine.ingest import ingest_file
    from engine.runtime import Runtime
    from storage import Library
    from tests.support.network import free_port

    folder = tmp_path_factory.mktemp("sign-in")
    settings = Settings(data_dir=folder, auth="alice:pw-a,bob:pw-b,carol:pw-c", admins="alice")
    rt = Runtime(settings, tiny_backbone, tiny_parts, Library(settings.database_url))
    md = folder / "pump-guide.md"
    md.write_text(GUIDE)
    doc_id = ingest_file(md, rt, memories=False).doc_id
    accounts = Accounts.from_settings(settings)
    demo = build_app(rt, accounts=accounts)
    port = free_port()
    launch_app(demo.queue(), prevent_thread_lock=True, server_name="127.0.0.1",
               server_port=port, quiet=True, auth=accounts.check)
    try:
        yield f"http://127.0.0.1:{port}/", rt, doc_id
    finally:
        demo.close()
        rt.library.close()


def test_anonymous_calls_are_refused(served):
    from gradio_client import Client

    url, _, _ = served
    with pytest.raises(urllib.error.HTTPError) as e:  # the app's config: what the page loads
        urllib.request.urlopen(url + "config", timeout=30)
    assert e.value.code == 401
    page = urllib.request.urlopen(url, timeout=30).read().decode()
    assert "upload-files" not in page and "Pump guide" not in page  # no app config in it
    with pytest.raises(Exception):
        Client(url, verbose=False, httpx_kwargs=HTTP)
    with pytest.raises(Exception):
        Client(url, auth=("bob", "wrong"), verbose=False, httpx_kwargs=HTTP)


def test_a_reader_asks_but_cannot_delete_or_upload(served):
    from gradio_client import Client, handle_file

    url, rt, doc_id = served
    bob = Client(url, auth=("bob", "pw-b"), verbose=False, httpx_kwargs=HTTP)
    out = bob.predict(str(doc_id), "How do I prime the pump?", *ROUTE_ASK, api_name="/ask")
    assert out[2]["data"], "bob's route-mode ask selects sections"
    nine = bob.predict(str(doc_id), "How do I prime the pump?", *ROUTE_ASK[:-1], api_name="/ask")
    assert nine[2]["data"], "the nine inputs of before the router still work"
    with pytest.raises(Exception, match="Only admins may delete"):
        bob.predict(str(doc_id), api_name="/delete_manual")
    assert rt.library.get_document(doc_id).id == doc_id
    md = rt.settings.data_dir / "other.md"
    md.write_text("# Other\n\nSome text.\n")
    n = len(rt.library.list_documents())
    with pytest.raises(Exception, match="Only admins may upload"):
        bob.predict([handle_file(str(md))], api_name="/ingest")
    assert len(rt.library.list_documents()) == n


def test_each_person_sees_only_their_own_history(served):
    from gradio_client import Client

    url, rt, doc_id = served
    bob = Client(url, auth=("bob", "pw-b"), verbose=False, httpx_kwargs=HTTP)
    carol = Client(url, auth=("carol", "pw-c"), verbose=False, httpx_kwargs=HTTP)
    alice = Client(url, auth=("alice", "pw-a"), verbose=False, httpx_kwargs=HTTP)
    bob.predict(str(doc_id), "bob asks about the impeller?", *ROUTE_ASK, api_name="/ask")
    history = carol.predict(str(doc_id), "carol asks about priming?", *ROUTE_ASK,
                            api_name="/ask")[7]
    questions = [row[3] for row in history["data"]]
    assert "carol asks about priming?" in questions
    assert not any(q.startswith("bob") for q in questions)
    logged = rt.library.list_queries(doc_id)
    assert {q.asker for q in logged} >= {"bob", "carol"}
    everyone = alice.predict(str(doc_id), "alice asks?", *ROUTE_ASK, api_name="/ask")[7]
    seen = {row[3] for row in everyone["data"]}
    assert {"bob asks about the impeller?", "carol asks about priming?", "alice asks?"} <= seen
    # an admin deletes
    assert "Deleted" in alice.predict(str(doc_id), api_name="/delete_manual")[0]
