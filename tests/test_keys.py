"""API keys: shown once, stored as a salted hash, scoped to one workspace, revoked from the next request on."""

from __future__ import annotations

import json
import sqlite3

import pytest

from pytest_crucible.cli import main
from pytest_crucible.server.keys import authenticate, create_key, list_keys, parse_key, revoke_key
from pytest_crucible.store import Store


@pytest.fixture
def db(database):
    """A new database on each backend (a SQLite file, a PostgreSQL URL) with the schema in it."""
    Store.open(database).close()
    return database


def rows(db, sql: str) -> list[tuple]:
    store = Store.open(db)
    try:
        return [tuple(row) for row in store.db.conn.execute(sql).fetchall()]
    finally:
        store.close()


def create(db, capsys, *args) -> tuple[str, str]:
    """(the printed key, the stderr note) of `crucible keys create`."""
    assert main(["keys", "create", "--db", str(db), *args]) == 0
    captured = capsys.readouterr()
    return captured.out.strip(), captured.err


def test_create_prints_the_key_once_and_stores_only_a_salted_hash(db, capsys) -> None:
    key, note = create(db, capsys, "--workspace", "shop", "--scope", "runs:read", "--scope", "kb:read", "--name", "dashboard")
    key_id, secret = parse_key(key)
    assert key == f"crk_{key_id}_{secret}" and len(key_id) == 26 and len(secret) >= 40
    assert f"created key {key_id} for workspace 'shop' with scope(s) runs:read, kb:read" in note
    assert "only time the key is shown" in note
    dump = "\n".join(map(str, rows(db, "SELECT * FROM api_keys")))
    if not isinstance(db, str):  # the whole SQLite file, every table
        conn = sqlite3.connect(db)
        dump += "\n".join(conn.iterdump())
        conn.close()
    assert secret not in dump and key not in dump
    [row] = rows(db, "SELECT workspace, name, scopes, salt, key_hash, revoked_at FROM api_keys")
    assert row[:3] == ("shop", "dashboard", '["runs:read", "kb:read"]') and row[5] is None
    assert len(bytes.fromhex(row[3])) == 16
    assert row[4].startswith("hmac_sha256$") and len(row[4]) == len("hmac_sha256$") + 64  # HMAC-SHA256(salt, secret), hex
    # Another key gets its own salt: equal secrets would still hash differently.
    create(db, capsys, "--workspace", "shop", "--scope", "runs:read")
    assert len({salt for (salt,) in rows(db, "SELECT salt FROM api_keys")}) == 2


def test_authenticate_accepts_only_the_live_key_itself(db) -> None:
    store = Store.open(db)
    conn = store.db.conn
    row, key = create_key(conn, workspace="shop", scopes=["runs:read", "feedback:write"], name="ci")
    found = authenticate(conn, key)
    assert (found.id, found.workspace, found.scopes) == (row["id"], "shop", ("runs:read", "feedback:write"))
    assert found.allows("kb:read", "runs:read") and not found.allows("kb:read")
    key_id, secret = parse_key(key)
    for wrong in ("", "crk", key + "x", key[:-1], f"crk_{key_id}_", f"crk_{key_id}_{secret[::-1]}",
                  f"crk_01NOSUCHKEY0000000000000000_{secret}", key.replace("crk_", "xyz_"), secret):
        assert authenticate(conn, wrong) is None, wrong
    assert revoke_key(conn, row["id"])[1] is True
    assert authenticate(conn, key) is None
    store.close()


def test_list_never_shows_secrets_and_filters_by_workspace(db, capsys) -> None:
    shop, _ = create(db, capsys, "--workspace", "shop", "--scope", "runs:read", "--name", "dashboard")
    other, _ = create(db, capsys, "--workspace", "search-team", "--scope", "feedback:write")
    assert main(["keys", "list", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert parse_key(shop)[0] in out and parse_key(other)[0] in out and "dashboard" in out and "search-team" in out
    assert parse_key(shop)[1] not in out and "hmac_sha256" not in out
    assert main(["keys", "list", "--workspace", "shop", "--json", "--db", str(db)]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [row["id"] for row in rows] == [parse_key(shop)[0]]
    assert set(rows[0]) == {"id", "workspace", "name", "scopes", "createdAt", "revokedAt"}
    assert main(["keys", "list", "--workspace", "nobody", "--db", str(db)]) == 0
    assert capsys.readouterr().out.splitlines()[1].startswith("HINT: crucible keys create")


def test_revoke_by_id_or_by_key_and_twice(db, capsys) -> None:
    key, _ = create(db, capsys, "--workspace", "shop", "--scope", "runs:read")
    key_id = parse_key(key)[0]
    assert main(["keys", "revoke", key, "--db", str(db)]) == 0  # the full key names its id too
    assert f"revoked key {key_id}" in capsys.readouterr().out
    assert main(["keys", "revoke", key_id, "--db", str(db)]) == 0
    assert f"key {key_id} was already revoked at " in capsys.readouterr().out
    assert main(["keys", "list", "--json", "--db", str(db)]) == 0
    assert json.loads(capsys.readouterr().out)[0]["revokedAt"]
    store = Store.open(db)
    assert list_keys(store.db.conn)[0]["revokedAt"] and authenticate(store.db.conn, key) is None
    store.close()


@pytest.mark.parametrize("argv, first_line", [
    (["keys", "create", "--workspace", "shop", "--scope", "runs:write"], "crucible: --scope: unknown scope 'runs:write'"),
    (["keys", "create", "--workspace", " ", "--scope", "runs:read"], "crucible: --workspace: a key belongs to one workspace"),
    (["keys", "revoke", "01NOSUCHKEY0000000000000000"], "crucible: no API key with id 01NOSUCHKEY0000000000000000"),
])
def test_key_errors_are_one_line_and_a_hint(db, capsys, argv, first_line) -> None:
    assert main([*argv, "--db", str(db)]) == 2
    lines = capsys.readouterr().err.rstrip("\n").split("\n")
    assert len(lines) == 2 and lines[0] == first_line and lines[1].startswith("HINT: ")


def test_keys_need_an_existing_database(tmp_path, capsys) -> None:
    missing = tmp_path / "none.db"
    assert main(["keys", "create", "--workspace", "shop", "--scope", "runs:read", "--db", str(missing)]) == 2
    assert "no crucible database here" in capsys.readouterr().err
    assert not missing.exists()


def test_a_revoked_key_is_refused_from_the_next_request(db, capsys) -> None:
    pytest.importorskip("fastapi")
    from api_server import add_run, client, serve_in_thread

    store = Store.open(db)
    run_id = add_run(store, workspace="shop")
    store.close()
    key, _ = create(db, capsys, "--workspace", "shop", "--scope", "runs:read")
    other, _ = create(db, capsys, "--workspace", "shop", "--scope", "kb:read")
    path = f"/api/v1/evals/runs/{run_id}/metrics"
    with serve_in_thread(db) as url, client(url, key) as http, client(url, other) as other_http:
        assert http.get(path).status_code == 200
        # Revoked by another process (the CLI, its own connection) while the server runs.
        assert main(["keys", "revoke", parse_key(key)[0], "--db", str(db)]) == 0
        capsys.readouterr()
        refused = http.get(path)
        assert refused.status_code == 401 and refused.headers["www-authenticate"].startswith("Bearer")
        assert refused.json()["message"] == "a valid API key is required"
        assert other_http.get(path).status_code == 200  # only that key
        # A key created while the server runs works at once, too: nothing is cached.
        fresh, _ = create(db, capsys, "--workspace", "shop", "--scope", "runs:read")
        assert http.get(path, headers={"Authorization": f"Bearer {fresh}"}).status_code == 200
