"""YAML in and out through libyaml, with PyYAML's safe (YAML 1.1) meaning of every value.

Reading: libyaml's C parser gives the event stream and this module builds dicts, lists and scalars from it
directly. ``yaml.load(..., CSafeLoader)`` first composes a node object (and two position marks) for every
value, resolves its tag in Python and then constructs the value, holding the whole node tree beside the
result: ~75 % of ``status`` on a kubectl YAML dump and ~3x its memory. Here a plain scalar is resolved with
PyYAML's own implicit resolvers and constructed by PyYAML's own safe constructors (``yes``/``on`` are
booleans, ``0777`` octal, ``2001-12-14`` a date, ``1:20`` sexagesimal, as YAML 1.1 and the Kubernetes API's
go-yaml read them), memoized per distinct text. Anything rarer (anchors and aliases, explicit tags, merge
keys, complex keys, a value PyYAML cannot construct) goes to PyYAML's loader for the whole input, so the
meaning and the errors are PyYAML's own. ``load_file`` streams a file through the parser: the text of the
dump is never held in memory beside what is built from it.
"""

from __future__ import annotations

import codecs
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import yaml
from yaml import events
from yaml.constructor import SafeConstructor
from yaml.nodes import ScalarNode
from yaml.resolver import Resolver

SAFE_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
SAFE_DUMPER: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
Source = str | bytes | IO[bytes]
_MEMO_LIMIT = 65_536  # distinct plain scalars remembered at once (keys and repeated values; names are unique)
_CHUNK = 1 << 20
_RESOLVERS: dict[Any, list[tuple[str, Any]]] = Resolver.yaml_implicit_resolvers
_WILDCARD = _RESOLVERS.get(None, [])
_CONSTRUCTOR = SafeConstructor()
_BUILDABLE = {tag for tag in SafeConstructor.yaml_constructors if tag is not None} - {
    "tag:yaml.org,2002:merge",  # only meaningful as a mapping key, which PyYAML's flattening handles
    "tag:yaml.org,2002:value",
}


class _Unusual(Exception):
    """The input uses something the event builder leaves to PyYAML's loader."""


def _plain_scalar(text: str, memo: dict[str, Any]) -> Any:
    """A plain scalar as PyYAML's SafeLoader reads it: the first implicit resolver that matches decides."""
    for tag, pattern in _RESOLVERS.get(text[0] if text else "", []) + _WILDCARD:
        if pattern.match(text):
            if tag not in _BUILDABLE:
                raise _Unusual(tag)
            try:
                value = SafeConstructor.yaml_constructors[tag](_CONSTRUCTOR, ScalarNode(tag, text))
            except Exception as err:  # e.g. 2001-13-45: PyYAML reports it after parsing the whole document
                raise _Unusual(tag) from err
            break
    else:
        value = text
    if len(memo) >= _MEMO_LIMIT:
        memo.clear()
    memo[text] = value
    return value


def _build_documents(source: Source) -> list[Any]:
    """Every document of ``source``, built from libyaml's events; raises ``_Unusual`` for PyYAML's loader."""
    parser = SAFE_LOADER(source)
    try:
        return _documents(parser.get_event)
    finally:
        parser.dispose()


def _documents(next_event: Callable[[], Any]) -> list[Any]:  # one loop: a call per event is the cost
    scalar, document_end = events.ScalarEvent, events.DocumentEndEvent
    map_start, map_end = events.MappingStartEvent, events.MappingEndEvent
    seq_start, seq_end = events.SequenceStartEvent, events.SequenceEndEvent
    memo: dict[str, Any] = {}
    documents: list[Any] = []
    next_event()  # StreamStartEvent
    while next_event().__class__ is events.DocumentStartEvent:
        root: Any = None
        stack: list[tuple[Any, bool, Any, bool]] = []
        container: Any = None
        in_map = has_key = False
        key: Any = None
        while True:
            event = next_event()
            kind = event.__class__
            if kind is scalar:
                if event.anchor is not None or event.tag is not None:
                    raise _Unusual("anchor or tag")
                value = text = event.value
                if event.implicit[0]:  # plain: YAML 1.1's implicit types
                    value = memo[text] if text in memo else _plain_scalar(text, memo)
            elif kind is map_start or kind is seq_start:
                if event.anchor is not None or event.tag is not None or (in_map and not has_key):
                    raise _Unusual("anchor, tag or complex key")
                stack.append((container, in_map, key, has_key))
                container, in_map, has_key = ({} if kind is map_start else []), kind is map_start, False
                continue
            elif kind is map_end or kind is seq_end:
                value = container
                container, in_map, key, has_key = stack.pop()
            elif kind is document_end:
                break
            else:  # an alias (its anchor has already been left to PyYAML)
                raise _Unusual(kind.__name__)
            if container is None:
                root = value
            elif not in_map:
                container.append(value)
            elif has_key:
                container[key] = value  # a repeated key: the last value wins, in the first one's place, as PyYAML
                has_key = False
            else:
                key, has_key = value, True
        documents.append(root)
    return documents


def safe_load_all(source: Source) -> list[Any]:
    """Every document of ``source`` as ``yaml.safe_load_all`` reads it (a file object is read once and not
    rewound: use ``load_file`` for files)."""
    try:
        return _build_documents(source)
    except _Unusual:
        return list(yaml.load_all(source, Loader=SAFE_LOADER))


def safe_load(source: str | bytes) -> Any:
    """The single document of ``source`` as ``yaml.safe_load`` reads it (None when there is none)."""
    try:
        documents = _build_documents(source)
    except _Unusual:
        documents = [None, None]
    if len(documents) > 1:  # PyYAML's own loader reports "expected a single document" (or constructs)
        return yaml.load(source, Loader=SAFE_LOADER)
    return documents[0] if documents else None


def check_utf8(path: str | Path) -> None:
    """Raise ``UnicodeDecodeError`` unless the file is UTF-8, reading a chunk at a time (a file that is not is
    decoded whole once more, for the error's offset in the file)."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    try:
        with open(path, "rb") as file:
            while chunk := file.read(_CHUNK):
                decoder.decode(chunk)
            decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        Path(path).read_bytes().decode("utf-8")
        raise


def load_file(path: str | Path) -> list[Any]:
    """Every document of a UTF-8 YAML file, streamed from disk through the parser."""
    try:
        with open(path, "rb") as file:
            return _build_documents(file)
    except _Unusual:
        with open(path, "rb") as file:
            return list(yaml.load_all(file, Loader=SAFE_LOADER))


def safe_dump(data: Any, **options: Any) -> str:
    return yaml.dump(data, Dumper=SAFE_DUMPER, **options)
