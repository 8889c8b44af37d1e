#!/usr/bin/env python3
"""Create or update one pull-request comment per key, found by a hidden marker, with the GitHub CLI.

    scripts/upsert_pr_comment.py --pr 42 --key adze-plan:prod --body-file adze-comment.md

Each stack's NodePool preview keeps its own comment: the first run creates it, later runs edit it in
place, and comments by anyone else (Pulumi's preview comment, other stacks) are never touched. Uses
``gh api`` (``GH_TOKEN`` from the workflow); the repository comes from ``GITHUB_REPOSITORY``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path


def marker(key: str) -> str:
    return f"<!-- {key} -->"


def gh(*args: str, body: dict[str, str] | None = None) -> object:
    command = ["gh", "api", *args]
    if body is not None:
        command += ["--input", "-"]
    done = subprocess.run(command, input=json.dumps(body) if body is not None else None, text=True,
                          capture_output=True, check=False)
    if done.returncode != 0:
        sys.exit(f"gh api {' '.join(args)}: {done.stderr.strip() or done.returncode}")
    return json.loads(done.stdout or "null")


def existing_comment(repo: str, pr: int, key: str) -> int | None:
    """The id of our comment for ``key``, if one exists (``--paginate --slurp``: every page)."""
    pages = gh(f"repos/{repo}/issues/{pr}/comments", "--paginate", "--slurp")
    for page in pages if isinstance(pages, list) else []:
        for comment in page if isinstance(page, list) else []:
            if marker(key) in str(comment.get("body", "")):
                return int(comment["id"])
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pr", type=int, required=True)
    parser.add_argument("--key", required=True, help="e.g. adze-plan:prod (one comment per key)")
    parser.add_argument("--body-file", required=True)
    parser.add_argument("--repo", default=os.environ.get("GITHUB_REPOSITORY", ""))
    args = parser.parse_args(argv)
    if not args.repo:
        sys.exit("--repo or GITHUB_REPOSITORY: required (owner/name)")
    body = f"{marker(args.key)}\n{Path(args.body_file).read_text()}"
    found = existing_comment(args.repo, args.pr, args.key)
    if found is None:
        gh(f"repos/{args.repo}/issues/{args.pr}/comments", "--method", "POST", body={"body": body})
        print(f"created the {args.key} comment")
    else:
        gh(f"repos/{args.repo}/issues/comments/{found}", "--method", "PATCH", body={"body": body})
        print(f"updated the {args.key} comment ({found})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
