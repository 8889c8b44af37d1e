"""The Docker build context as the builder sees it, and an image tag derived from it and the target platform.

BuildKit sends the files of the context directory that its ignore file does not exclude. The ignore file is
``<Dockerfile>.dockerignore`` next to the Dockerfile when that exists, else ``<context>/.dockerignore``. Its
rules are Docker's (moby ``patternmatcher``), not gitignore's:

* one pattern per line; blank lines and lines starting with ``#`` are ignored; ``!`` re-includes;
* patterns are relative to the context root (a leading ``/`` is dropped) and cleaned like ``filepath.Clean``;
* ``*`` matches within one path element, ``?`` one character, ``**`` any number of elements (also none);
* a pattern that matches a directory matches everything below it;
* the last pattern that matches a path decides.

The tag hashes the platform, the Dockerfile, and every sent file's path, executable bit and content, so a
new platform or any change the builder would see gives a new tag (the ECR repository is IMMUTABLE), and an
unchanged context gives the same one (the push is skipped).
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

TAG_PREFIX = "src-"


@dataclass(slots=True, frozen=True)
class IgnorePattern:
    pattern: str  # cleaned, without the leading "!"
    exclusion: bool  # a "!" line: re-includes what matches

    def matches(self, path: str) -> bool:
        return _compiled(self.pattern).match(path) is not None


@lru_cache(maxsize=1024)
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(_to_regex(pattern))


def _to_regex(pattern: str) -> str:
    out = "^"
    index = 0
    while index < len(pattern):
        char = pattern[index]
        index += 1
        if char == "*":
            if index < len(pattern) and pattern[index] == "*":
                index += 1
                if index < len(pattern) and pattern[index] == "/":
                    index += 1  # "**/" is "**"
                out += ".*" if index >= len(pattern) else "(.*/)?"
            else:
                out += "[^/]*"
        elif char == "?":
            out += "[^/]"
        elif char == "\\" and index < len(pattern):
            out += re.escape(pattern[index])
            index += 1
        elif char == "[":
            end = pattern.find("]", index)
            if end == -1:
                out += re.escape(char)
            else:
                body = pattern[index:end]
                out += "[" + ("^" + body[1:] if body.startswith("!") else body) + "]"
                index = end + 1
        else:
            out += re.escape(char)
    return out + "$"


def parse_ignore_file(text: str) -> list[IgnorePattern]:
    patterns = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        exclusion = line.startswith("!")
        if exclusion:
            line = line[1:].strip()
        cleaned = posixpath.normpath(line).lstrip("/") if line not in ("", "/") else "."
        patterns.append(IgnorePattern(cleaned or ".", exclusion))
    return patterns


def is_ignored(path: str, patterns: Sequence[IgnorePattern]) -> bool:
    """Docker's ``MatchesOrParentMatches``: the last pattern matching the path or one of its parents wins."""
    parents = path.split("/")[:-1]
    ignored = False
    for pattern in patterns:
        if pattern.exclusion != ignored:
            continue  # an exclusion can only change an ignored path, a plain pattern only a kept one
        hit = pattern.matches(path) or any(pattern.matches("/".join(parents[: i + 1])) for i in range(len(parents)))
        if hit:
            ignored = not pattern.exclusion
    return ignored


def ignore_file_for(context: Path, dockerfile: Path) -> Path:
    beside = dockerfile.with_name(dockerfile.name + ".dockerignore")
    return beside if beside.is_file() else context / ".dockerignore"


def context_files(context: Path, dockerfile: Path) -> list[Path]:
    """The files BuildKit sends for this context, sorted by their path in it. An ignored directory no ``!``
    pattern could reach into is not walked (a virtualenv or ``.git`` in the context costs nothing)."""
    ignore = ignore_file_for(context, dockerfile)
    patterns = parse_ignore_file(ignore.read_text()) if ignore.is_file() else []
    reachable = [_literal_prefix(pattern.pattern) for pattern in patterns if pattern.exclusion]
    files = []
    for root, directories, names in os.walk(context):
        base = Path(root)
        prefix = "" if base == context else base.relative_to(context).as_posix() + "/"
        walked = []
        for name in directories:
            if (base / name).is_symlink():
                names.append(name)  # sent as a link, never followed
            elif not _skippable(prefix + name, patterns, reachable):
                walked.append(name)
        directories[:] = walked
        for name in names:
            path = base / name
            if (path.is_file() or path.is_symlink()) and not is_ignored(prefix + name, patterns):
                files.append(path)
    return sorted(files, key=lambda p: p.relative_to(context).as_posix())


def _literal_prefix(pattern: str) -> str:
    """What every path a pattern matches starts with: the pattern up to its first special character."""
    special = [index for index in (pattern.find(char) for char in "*?[\\") if index >= 0]
    return pattern[: min(special)] if special else pattern


def _skippable(directory: str, patterns: Sequence[IgnorePattern], reachable: Sequence[str]) -> bool:
    """Ignored, and no ``!`` pattern can match it or a path below it (nothing inside can be re-included)."""
    below = directory + "/"
    return is_ignored(directory, patterns) and not any(
        below.startswith(prefix) or prefix.startswith(below) for prefix in reachable)


def image_tag(context: Path, dockerfile: Path, platforms: Iterable[str], files: Iterable[Path] | None = None) -> str:
    """``src-<hash>`` of the target platforms, the Dockerfile and the sent files (path, mode, content)."""
    digest = hashlib.sha256()
    for platform in sorted(platforms):
        digest.update(f"platform\0{platform}\0".encode())
    digest.update(b"dockerfile\0" + dockerfile.read_bytes() + b"\0")
    for path in files if files is not None else context_files(context, dockerfile):
        relative = path.relative_to(context).as_posix()
        if path.is_symlink():
            body = b"link\0" + str(path.readlink()).encode()
        else:
            body = (b"x" if path.stat().st_mode & 0o111 else b"-") + b"\0" + path.read_bytes()
        digest.update(relative.encode() + b"\0" + body + b"\0")
    return f"{TAG_PREFIX}{digest.hexdigest()[:20]}"
