"""``reconciler.yamlio`` reads YAML exactly as PyYAML's safe loader (YAML 1.1, as the Kubernetes API's go-yaml)
does, through libyaml's event stream, and falls back to PyYAML's loader for what it does not build itself."""

from __future__ import annotations

import datetime
import math
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler import yamlio

UTC = datetime.UTC

# (YAML text of a plain scalar, what YAML 1.1 makes of it). Quoted, each is the string itself.
YAML_11_SCALARS: list[tuple[str, Any]] = [
    ("yes", True), ("Yes", True), ("YES", True), ("no", False), ("NO", False),
    ("on", True), ("On", True), ("off", False), ("OFF", False),
    ("true", True), ("True", True), ("false", False), ("FALSE", False),
    ("y", "y"), ("n", "n"), ("yEs", "yEs"),  # PyYAML's resolver: y/n stay strings, mixed case too
    ("~", None), ("null", None), ("Null", None), ("NULL", None), ("", None),
    ("0777", 511), ("0o777", "0o777"), ("0x1F", 31), ("0b101", 5), ("-0x1F", -31), ("1_000", 1000),
    ("190:20:30", 685230), ("+12", 12), ("-0", 0), ("08", "08"), ("0", 0),
    ("1.5", 1.5), ("1e3", "1e3"), ("1.0e+3", 1000.0), ("1.0e3", "1.0e3"), ("6.8523015e+5", 685230.15), (".5", 0.5),
    (".inf", math.inf), ("-.Inf", -math.inf), ("190:20:30.15", 685230.15), ("1_000.5", 1000.5),
    ("2001-12-14", datetime.date(2001, 12, 14)),
    ("2001-12-14t21:59:43.10-05:00", datetime.datetime(2001, 12, 14, 21, 59, 43, 100000,
                                                         tzinfo=datetime.timezone(datetime.timedelta(hours=-5)))),
    ("2026-01-05T10:00:00Z", datetime.datetime(2026, 1, 5, 10, 0, tzinfo=UTC)),
    ("2001-12-14 21:59:43.10", datetime.datetime(2001, 12, 14, 21, 59, 43, 100000)),
    ("100Mi", "100Mi"), ("500m", "500m"), ("1.5Gi", "1.5Gi"), ("v1", "v1"), ("=x", "=x"),
]


def load_both(text: str) -> tuple[Any, Any]:
    return yamlio.safe_load_all(text), list(yaml.load_all(text, Loader=yaml.SafeLoader))


@pytest.mark.parametrize(("plain", "meaning"), YAML_11_SCALARS, ids=[repr(p) for p, _ in YAML_11_SCALARS])
def test_plain_scalars_keep_their_yaml_1_1_meaning_and_quoted_ones_are_strings(plain: str, meaning: Any) -> None:
    text = f"value: {plain}\nlist: [{plain}]\nquoted: '{plain}'\ndouble: \"{plain}\"\nblock: |\n  {plain}\n"
    ours, pyyaml = load_both(text)
    assert ours == pyyaml
    (document,) = ours
    assert document["value"] == meaning and type(document["value"]) is type(meaning)
    assert document["quoted"] == plain and document["double"] == plain
    if plain:  # "[]" is an empty list and an empty block scalar is ""
        assert document["list"] == [meaning]
        assert document["block"] == plain + "\n"


def test_plain_scalars_as_keys_keep_their_meaning() -> None:
    text = "yes: 1\n0777: 2\n2001-12-14: 3\n~: 4\n'on': 5\n"
    ours, pyyaml = load_both(text)
    assert ours == pyyaml == [{True: 1, 511: 2, datetime.date(2001, 12, 14): 3, None: 4, "on": 5}]


@pytest.mark.parametrize("text", [
    "a: &x {b: 1}\nc: *x\n",  # anchors and aliases: the same object twice, as PyYAML builds it
    "base: &b {x: 1}\nmerged:\n  <<: *b\n  y: 2\n",  # merge keys
    "a: !!str 0777\nb: !!int '12'\nc: !!float 1\nd: !!binary aGk=\n",  # explicit tags
    "s: !!set {a, b}\no: !!omap [{a: 1}]\n",
])
def test_what_the_event_builder_leaves_to_pyyaml_reads_as_pyyaml_reads_it(text: str) -> None:
    ours, pyyaml = load_both(text)
    assert ours == pyyaml


@pytest.mark.parametrize("text", [
    "a: =\n",  # the value tag, which the safe loader cannot construct
    "? [a, b]\n: 1\n",  # an unhashable key
    "a: 2001-13-45\n",  # a timestamp-looking date that does not exist
    "a: [1, 2\nb: 3\n",  # a syntax error
])
def test_errors_are_pyyamls_own(text: str) -> None:
    with pytest.raises(Exception) as ours:
        yamlio.safe_load_all(text)
    with pytest.raises(Exception) as pyyaml:
        list(yaml.load_all(text, Loader=yamlio.SAFE_LOADER))  # as the commands read YAML before
    assert type(ours.value) is type(pyyaml.value)
    assert str(ours.value) == str(pyyaml.value)


def test_documents_duplicates_and_empty_inputs_as_pyyaml() -> None:
    for text in ["", "---\n", "--- 1\n--- [a]\n...\n--- {}\n", "a: 1\na: 2\nb: 3\n", "- a\n- - b\n  - {c: d}\n"]:
        ours, pyyaml = load_both(text)
        assert ours == pyyaml, text
    assert list(yamlio.safe_load_all("a: 1\na: 2\nb: 3\n")[0]) == ["a", "b"]  # the first place, the last value
    assert yamlio.safe_load("") is None and yamlio.safe_load("x: 1") == {"x": 1}
    with pytest.raises(yaml.YAMLError, match="expected a single document"):
        yamlio.safe_load("--- 1\n--- 2\n")


def test_a_file_is_streamed_and_read_as_text_is(tmp_path: Path) -> None:
    text = "".join(f"---\nkind: Pod\nmetadata: {{name: p{i}, uid: 0{i}7}}\nspec: {{on: yes}}\n" for i in range(2000))
    path = tmp_path / "dump.yaml"
    path.write_text(text)
    assert yamlio.load_file(path) == list(yaml.load_all(text, Loader=yaml.SafeLoader))
    path.write_text(text + "---\nalias: &a [1]\nagain: *a\n")
    assert yamlio.load_file(path) == list(yaml.load_all(path.read_text(), Loader=yaml.SafeLoader))


def test_utf8_check_reports_the_offset_in_the_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_bytes(b"a: " + b"x" * (3 << 20) + b"\xff\n")
    with pytest.raises(UnicodeDecodeError) as err:
        yamlio.check_utf8(path)
    assert err.value.start == 3 + (3 << 20)
    path.write_bytes("a: é\n".encode())
    yamlio.check_utf8(path)


plain_texts = st.sampled_from([p for p, _ in YAML_11_SCALARS] + ["web", "a b", "-1", "0.0.1", "1:2", "NaN", ".nan"])
keys = st.one_of(plain_texts, st.text(alphabet="abcxyz-_.", min_size=1, max_size=6))
values: Any = st.recursive(
    plain_texts.map(lambda p: ("plain", p)) | st.text(max_size=8).map(lambda s: ("quoted", s)),
    lambda inner: st.lists(inner, max_size=4).map(lambda items: ("seq", items))
    | st.dictionaries(keys, inner, max_size=4).map(lambda items: ("map", items)),
    max_leaves=20,
)


def render(value: Any, flow: bool) -> str:
    kind, content = value
    if kind == "plain":
        return content if content else "''" if flow else "~"
    if kind == "quoted":
        return '"' + content.encode("unicode_escape").decode().replace('"', '\\"') + '"'
    if kind == "seq":
        return "[" + ", ".join(render(v, flow) for v in content) + "]"
    return "{" + ", ".join(f"{k if k else repr('')}: {render(v, flow)}" for k, v in content.items()) + "}"


@settings(max_examples=300, deadline=None)
@given(st.lists(values, min_size=1, max_size=3))
def test_random_documents_read_as_pyyaml_reads_them(documents: list[Any]) -> None:
    flow = "\n".join(f"--- {render(d, True)}" for d in documents) + "\n"
    block = yaml.dump_all(list(yaml.load_all(flow, Loader=yaml.SafeLoader)), Dumper=yaml.SafeDumper)
    for text in (flow, block):
        ours, pyyaml = load_both(text)
        assert repr(ours) == repr(pyyaml)  # repr: NaN is not equal to itself
