"""The pull-request comment per stack: created once, edited in place, others' comments untouched.

`scripts/upsert_pr_comment.py` runs against a stand-in `gh` on PATH that keeps the PR's comments in a
JSON file and answers `gh api` the way GitHub's REST API does (list pages, POST, PATCH)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FAKE_GH = r'''#!/usr/bin/env python3
import json, os, sys
store = os.environ["FAKE_GH_STORE"]
comments = json.load(open(store))
args = sys.argv[1:]
assert args[0] == "api", args
path, rest = args[1], args[2:]
method = rest[rest.index("--method") + 1] if "--method" in rest else "GET"
with open(store + ".log", "a") as log:
    log.write(f"{method} {path}\n")
if method == "GET":
    assert path == "repos/acme/adze/issues/42/comments" and "--paginate" in rest and "--slurp" in rest
    print(json.dumps([comments[:2], comments[2:]]))  # two pages
elif method == "POST":
    body = json.load(sys.stdin)["body"]
    comments.append({"id": 100 + len(comments), "body": body, "user": {"login": "github-actions[bot]"}})
    print(json.dumps(comments[-1]))
elif method == "PATCH":
    number = int(path.rsplit("/", 1)[1])
    [comment] = [c for c in comments if c["id"] == number]
    comment["body"] = json.load(sys.stdin)["body"]
    print(json.dumps(comment))
json.dump(comments, open(store, "w"))
'''


def _upsert(tmp_path: Path, key: str, text: str) -> str:
    body = tmp_path / "body.md"
    body.write_text(text)
    done = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "upsert_pr_comment.py"), "--pr", "42", "--key", key,
         "--body-file", str(body)],
        env={**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}", "GITHUB_REPOSITORY": "acme/adze",
             "FAKE_GH_STORE": str(tmp_path / "comments.json")},
        capture_output=True, text=True, check=True)
    return done.stdout.strip()


@pytest.mark.slow  # runs the comment script as a process
def test_one_comment_per_stack_created_once_then_edited(tmp_path: Path) -> None:
    gh = tmp_path / "gh"
    gh.write_text(FAKE_GH)
    gh.chmod(0o755)
    pulumi = {"id": 1, "body": "#### :tropical_drink: `preview` on dev ...", "user": {"login": "github-actions[bot]"}}
    human = {"id": 2, "body": "LGTM", "user": {"login": "reviewer"}}
    other = {"id": 3, "body": "unrelated", "user": {"login": "someone"}}
    store = tmp_path / "comments.json"
    store.write_text(json.dumps([pulumi, human, other]))

    assert _upsert(tmp_path, "adze-plan:dev", "dev plan v1") == "created the adze-plan:dev comment"
    assert _upsert(tmp_path, "adze-plan:prod", "prod plan v1") == "created the adze-plan:prod comment"
    assert _upsert(tmp_path, "adze-plan:dev", "dev plan v2") == "updated the adze-plan:dev comment (103)"

    comments = json.loads(store.read_text())
    assert comments[:3] == [pulumi, human, other]
    assert [c["body"] for c in comments[3:]] == ["<!-- adze-plan:dev -->\ndev plan v2",
                                                 "<!-- adze-plan:prod -->\nprod plan v1"]
    calls = (tmp_path / "comments.json.log").read_text().split("\n")
    assert [c.split()[0] for c in calls if c] == ["GET", "POST", "GET", "POST", "GET", "PATCH"]
