"""docs/ci.md's pull-request recipes, run as written: the GitHub one with a `gh` that keeps its comments in a
file, the GitLab one against a notes API served on 127.0.0.1. A second run edits the first run's comment."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest

CI_DOC = Path(__file__).resolve().parents[1] / "docs" / "ci.md"
MARKER = "<!-- crucible:shop -->"


def recipe(name: str) -> str:
    """The fenced block under ``<!-- recipe: NAME -->`` in docs/ci.md."""
    match = re.search(rf"<!-- recipe: {re.escape(name)} -->\n```\w+\n(.*?)```", CI_DOC.read_text(encoding="utf-8"), re.S)
    assert match, f"docs/ci.md has no recipe {name}"
    return match.group(1)


# A `gh` with the three calls the recipe makes, its comments kept in a JSON file (no network, no token check).
FAKE_GH = r'''
import json, os, re, sys
state_path = os.environ["FAKE_GH_STATE"]
state = json.load(open(state_path))
args = sys.argv[1:]
def save():
    json.dump(state, open(state_path, "w"))
if args[:1] == ["api"] and "--method" not in args:
    query = args[args.index("--jq") + 1]
    marker = json.loads(re.search(r'startswith\((".*")\)', query).group(1))
    for comment in state["comments"]:
        if comment["body"].startswith(marker):
            print(comment["id"])
elif args[:1] == ["api"]:
    comment_id = int(args[args.index("--method") + 2].rsplit("/", 1)[1])
    body = open(args[args.index("-F") + 1].split("=@", 1)[1]).read()
    next(c for c in state["comments"] if c["id"] == comment_id)["body"] = body
    state["calls"].append("edit")
    save()
elif args[:2] == ["pr", "comment"]:
    body = open(args[args.index("--body-file") + 1]).read()
    state["comments"].append({"id": 100 + len(state["comments"]), "pr": args[2], "body": body})
    state["calls"].append("create")
    save()
else:
    sys.exit(f"fake gh: unexpected {args}")
'''


def test_the_github_recipe_posts_once_then_edits_its_own_comment(tmp_path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    gh = bin_dir / "gh"
    gh.write_text(f"#!{sys.executable}\n{FAKE_GH}")
    gh.chmod(0o755)
    state = tmp_path / "state.json"
    state.write_text(json.dumps({"comments": [{"id": 1, "pr": "7", "body": "LGTM from a person"}], "calls": []}))
    script = tmp_path / "crucible-comment.sh"
    script.write_text(recipe("crucible-comment.sh"))
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "FAKE_GH_STATE": str(state),
           "GITHUB_REPOSITORY": "team/rag", "PR": "7"}
    for verdict in ("**GATE FAILED**: 1 of 9 gated metrics regressed", "**gate passed: no significant regression**"):
        (tmp_path / "crucible.md").write_text(f"{MARKER}\n{verdict}\n")
        done = subprocess.run(["bash", str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
    final = json.loads(state.read_text())
    assert final["calls"] == ["create", "edit"]
    assert [c["body"] for c in final["comments"]] == ["LGTM from a person", f"{MARKER}\n**gate passed: no significant regression**\n"]


class FakeGitLab(BaseHTTPRequestHandler):
    """The merge request notes API, as much of it as the recipe uses."""

    notes: ClassVar[list[dict]] = []  # the server's state, reset by the fixture
    seen: ClassVar[list[tuple[str, str]]] = []

    def _reply(self, status: int, document) -> None:
        body = json.dumps(document).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self.seen.append(("GET", self.headers.get("PRIVATE-TOKEN", "")))
        self._reply(200, self.notes)

    def do_POST(self) -> None:
        self.seen.append(("POST", self.headers.get("PRIVATE-TOKEN", "")))
        note = {"id": 500 + len(self.notes), "body": json.loads(self.rfile.read(int(self.headers["Content-Length"])))["body"]}
        self.notes.append(note)
        self._reply(201, note)

    def do_PUT(self) -> None:
        self.seen.append(("PUT", self.headers.get("PRIVATE-TOKEN", "")))
        note_id = int(self.path.rsplit("/", 1)[1])
        note = next(n for n in self.notes if n["id"] == note_id)
        note["body"] = json.loads(self.rfile.read(int(self.headers["Content-Length"])))["body"]
        self._reply(200, note)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def gitlab():
    FakeGitLab.notes = [{"id": 1, "body": "a reviewer's note"}]
    FakeGitLab.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeGitLab)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/api/v4"
    server.shutdown()
    server.server_close()


def test_the_gitlab_recipe_posts_once_then_edits_its_own_note(tmp_path, gitlab) -> None:
    script = tmp_path / "crucible-note.py"
    script.write_text(recipe("crucible-note.py"))
    env = {**os.environ, "CI_API_V4_URL": gitlab, "CI_PROJECT_ID": "42", "CI_MERGE_REQUEST_IID": "3",
           "CRUCIBLE_GITLAB_TOKEN": "glpat-test"}
    for verdict in ("**GATE REFUSED**: too few pairs", "**gate passed: no significant regression**"):
        (tmp_path / "crucible.md").write_text(f"{MARKER}\n{verdict}\n")
        done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
    assert [method for method, _ in FakeGitLab.seen] == ["GET", "POST", "GET", "PUT"]
    assert {token for _, token in FakeGitLab.seen} == {"glpat-test"}
    assert [n["body"] for n in FakeGitLab.notes] == ["a reviewer's note", f"{MARKER}\n**gate passed: no significant regression**\n"]
