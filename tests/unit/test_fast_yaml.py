"""`fast_yaml.load_all` gives what `list(yaml.load_all(text, Loader=yaml.CSafeLoader))`
gives, for every text: the same objects (types, key order, shared objects) or the same
error (type, message, line and column)."""

from __future__ import annotations

import datetime
import math
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quotree import fast_yaml
from quotree.manifests import InputError, _documents

PROPERTY = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def pyyaml(text: str) -> Any:
    return list(yaml.load_all(text, Loader=yaml.CSafeLoader))


def outcome(load: Any, text: str) -> tuple[str, Any]:
    """What loading `text` gives: ("value", documents) or ("error", its description)."""
    try:
        return "value", load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = (mark.line, mark.column) if mark is not None else None
        return "error", (type(exc), getattr(exc, "problem", None), line, str(exc))
    except (ValueError, RecursionError) as exc:  # PyYAML's own, for `._` or a huge int
        return "error", (type(exc), str(exc))


def same(a: Any, b: Any) -> bool:
    """Equal, with equal types all the way down (True is not 1), NaN equal to NaN, at any
    depth (libyaml's is 1,000)."""
    pending = [(a, b)]
    while pending:
        x, y = pending.pop()
        if type(x) is not type(y):
            return False
        if isinstance(x, dict):
            if len(x) != len(y):
                return False
            pending.extend(zip(x, y, strict=True))
            pending.extend(zip(x.values(), y.values(), strict=True))
        elif isinstance(x, list | tuple):
            if len(x) != len(y):
                return False
            pending.extend(zip(x, y, strict=True))
        elif isinstance(x, float):
            both_nan = math.isnan(x) and math.isnan(y)
            if math.copysign(1, x) != math.copysign(1, y) or not (x == y or both_nan):
                return False
        elif x != y:
            return False
    return True


def check(text: str) -> None:
    expected = outcome(pyyaml, text)
    got = outcome(fast_yaml.load_all, text)
    assert got[0] == expected[0], (text, got, expected)
    assert same(got[1], expected[1]), (text, got, expected)


# --- generated texts ------------------------------------------------------------------

#: Plain scalars PyYAML resolves to every tag it has (and some that stay strings).
TRICKY = [
    "yes", "no", "on", "off", "Yes", "NO", "true", "False", "y", "n", "~", "null", "Null",
    "0", "-0", "+1", "010", "0o17", "0x1F", "0b101", "1_000", "-1_000", "1:30", "190:20:30",
    "1.5", "-0.0", "1.", ".5", "1e3", "1.5e+3", "1.0e-5", "._", ".inf", "-.inf", "+.INF",
    ".nan", "-.nan", ".NaN", "2001-12-14", "2001-12-14t21:59:43.10-05:00", "<<", "=",
    "---", "-a", "+b", "a.b/c", "nvidia.com/gpu", "250m", "8192Mi", "v1", "Pod", "c",
    "name", "ns-7166", "_x", "123456789012345678901234567890",
]  # fmt: skip
QUOTED = ['"quoted"', "'single'", '"1"', '"yes"', '""', '" sp ace "', '"a#b"', '"a: b"']

leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**20), max_value=10**20),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
    st.sampled_from(TRICKY),
)
key = st.one_of(st.text(max_size=6), st.sampled_from(TRICKY), st.integers(-3, 3), st.booleans())
data = st.recursive(
    leaf,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(key, inner, max_size=4)),
    max_leaves=20,
)


@st.composite
def dumped(draw: st.DrawFn) -> str:
    """Documents as `yaml.safe_dump` writes them, block or flow style, joined by `---`."""
    documents = draw(st.lists(data, max_size=4))
    flow = draw(st.sampled_from([None, True, False]))
    width = draw(st.sampled_from([80, 10**6]))
    text = yaml.safe_dump_all(documents, default_flow_style=flow, width=width)
    return text if draw(st.booleans()) else text.replace("---\n", "---\n\n# a comment\n")


#: What the flat way takes: plain scalars of `[A-Za-z0-9_./+-]`, double quotes without `,:[]{}`.
FLAT_SAFE = [s for s in TRICKY + QUOTED if not {":", "'", "~", "<", "="} & set(s)]
word = st.from_regex(r"[a-z0-9][a-z0-9.-]{0,5}", fullmatch=True)
safe_scalar = st.one_of(st.sampled_from(FLAT_SAFE), word)
any_scalar = st.one_of(st.sampled_from(TRICKY + QUOTED), safe_scalar)


def flow(scalar: st.SearchStrategy[str], depth: int) -> st.SearchStrategy[str]:
    """Flow collections written by hand: unquoted tricky scalars, as a person writes them."""
    if depth == 0:
        return scalar
    inner = flow(scalar, depth - 1)
    pairs = st.lists(st.tuples(scalar, st.one_of(scalar, inner)), max_size=3)
    return st.one_of(
        scalar,
        st.lists(inner, max_size=3).map(lambda items: "[" + ", ".join(items) + "]"),
        pairs.map(lambda items: "{" + ", ".join(f"{k}: {v}" for k, v in items) + "}"),
    )


@st.composite
def flat(draw: st.DrawFn) -> str:
    """Flat texts: each line `key: value` at column 0, documents between `---` lines (half
    of them with only scalars the flat way takes, the others with any)."""
    scalar = safe_scalar if draw(st.booleans()) else any_scalar
    values = flow(scalar, 3)
    documents = []
    for _ in range(draw(st.integers(0, 4))):
        lines = [
            f"{draw(scalar)}:" + ("" if draw(st.integers(0, 9)) == 0 else f" {draw(values)}")
            for _ in range(draw(st.integers(0, 4)))
        ]
        if draw(st.booleans()):
            lines.insert(draw(st.integers(0, len(lines))), draw(st.sampled_from(["", "# c"])))
        documents.append("".join(line + "\n" for line in lines))
    text = "---\n".join(documents)
    if draw(st.booleans()):
        text = "---\n" + text
    return text if draw(st.booleans()) else text.rstrip("\n")


#: Characters that mean something to YAML, for the mutations.
SIGNIFICANT = " \n\t:,-?[]{}#&*!|>'\"%@`.~0aé\\"


@st.composite
def mutated(draw: st.DrawFn) -> str:
    """A flat text with a few characters inserted, deleted or replaced."""
    text = draw(flat())
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, len(text)))
        new = draw(st.sampled_from(SIGNIFICANT))
        match draw(st.sampled_from(["insert", "delete", "replace"])):
            case "insert":
                text = text[:at] + new + text[at:]
            case "delete":
                text = text[:at] + text[at + 1 :]
            case _:
                text = text[:at] + new + text[at + 1 :]
    return text


@PROPERTY
@given(dumped())
def test_what_safe_dump_writes_loads_the_same(text: str) -> None:
    check(text)


@PROPERTY
@given(flat())
def test_flat_texts_load_the_same(text: str) -> None:
    check(text)


@PROPERTY
@given(mutated())
def test_flat_texts_with_typos_load_or_fail_the_same(text: str) -> None:
    check(text)


@PROPERTY
@given(st.text(alphabet=SIGNIFICANT + "ab1", max_size=30))
def test_any_short_text_loads_or_fails_the_same(text: str) -> None:
    check(text)


# --- which way takes which text -------------------------------------------------------

BURST = """apiVersion: v1
kind: Pod
metadata: {name: p0, namespace: ns-0}
spec: {priority: 100, containers: [{name: c, resources: {requests: {cpu: "250m", memory: 1Gi}}}]}
---
apiVersion: quotree.io/v1alpha1
kind: ElasticQuota
metadata: {name: q-0, namespace: ns-0}
spec: {parent: top, min: {cpu: "4000m"}, max: {cpu: 8, memory: 1.5e+3}}
"""
BLOCK = """apiVersion: v1
kind: Pod
metadata:
  name: p0
  labels: {app: web}
spec:
  containers:
  - name: c
    resources:
      requests:
        cpu: 250m  # a comment
    args: [--x, "a, b", 'it''s']
"""


def test_the_benchmark_shape_is_a_flat_text() -> None:
    assert same(fast_yaml._flat_documents(BURST), pyyaml(BURST))
    check(BURST)


def test_block_style_is_built_from_the_parser_events() -> None:
    with pytest.raises(fast_yaml._NotTaken):
        fast_yaml._flat_documents(BLOCK)
    assert same(fast_yaml._event_documents(BLOCK), pyyaml(BLOCK))
    check(BLOCK)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "\n",
        "# only a comment\n",
        "---\n",
        "---",
        "a: b\n---",
        "a: b\n---\n---\n",
        "# c\n---\n# d\n",
        "a:\nb: c\n",
        "a:",
        "1: x\n.nan: 1\n.nan: 2\ntrue: y\nnull: z\n",
        "a: 1\na: 2\n",  # duplicate keys: the last value, the first position
        "x: {1: a, true: b}\n",
        "x: {a: 1, a: 2, b: 3}\n",
        "a: [b], c: [d]\n",
        "a: {b: c\nd: e}\n",
        "k: a], [k, b\n",
        f"{'k' * 1030}: b\n",
        f"x: {{{'k' * 1030}: b}}\n",
        f"x: [{'k' * 1030}, b]\n",
        "x: " + "[" * 999 + "]" * 999 + "\n",
        "x: " + "[" * 1001 + "]" * 1001 + "\n",
        "a: 2001-12-14\nb: 2001-12-14 21:59:43.10 -5\n",
        "a: ._\n",
        "a: =\n",
        "a: " + "9" * 5000 + "\n",
        "key: value\r\nother: 1\r\n",
        "\ufeffa: b\n",
        "a: b\n...\n",
        "%YAML 1.1\n---\na: b\n",
        "a: 'x'\n",
        "? [a, b]\n: c\n",
        "{[a]: b}\n",
        "- a\n- b\n",
        "just a scalar\n",
        "a: |\n  literal\n  text\nb: >\n  folded\n",
    ],
)
def test_edge_texts_load_the_same(text: str) -> None:
    check(text)


# --- what PyYAML's own loader still loads ---------------------------------------------


def test_anchors_and_aliases_share_the_object_as_pyyaml_does() -> None:
    text = "a: &x {b: [1]}\nc: *x\nd: &y [1]\ne: [*y, *y]\n"
    with pytest.raises(fast_yaml._NotTaken):
        fast_yaml._event_documents(text)
    [document] = fast_yaml.load_all(text)
    assert document["a"] is document["c"]
    assert document["e"][0] is document["e"][1] is document["d"]
    check(text)


@pytest.mark.parametrize(
    "text",
    [
        "base: &b {x: 1, y: 2}\nother:\n  <<: *b\n  y: 3\n",  # merge keys
        "a: !!timestamp 2001-12-14\n",
        "a: !!binary aGVsbG8=\n",
        "a: !!set {x, y}\n",
        "a: !!omap [{x: 1}, {y: 2}]\n",
        "a: !!pairs [{x: 1}, {x: 2}]\n",
        "a: !!str 1\nb: !!int '2'\nc: !!float '3'\n",
        "a: ! 1\n",
        "a: !custom x\n",  # ConstructorError: could not determine a constructor
        "a: !!python/object:os.system x\n",
        "a: &x 1\nb: &x 2\nc: *x\n",
        "a: *nowhere\n",
    ],
)
def test_tags_anchors_and_merge_keys_are_left_to_pyyaml(text: str) -> None:
    with pytest.raises(fast_yaml._NotTaken):
        fast_yaml._event_documents(text)
    check(text)


def test_a_custom_tag_raises_pyyamls_constructor_error() -> None:
    with pytest.raises(yaml.constructor.ConstructorError) as caught:
        fast_yaml.load_all("a: 1\n---\nb: !custom x\n")
    assert caught.value.problem_mark is not None
    assert caught.value.problem_mark.line == 2
    assert "could not determine a constructor" in str(caught.value)


def test_timestamps_are_pyyamls() -> None:
    [document] = fast_yaml.load_all("a: 2001-12-14\nb: 2001-12-14 21:59:43.10 -5\n")
    assert document["a"] == datetime.date(2001, 12, 14)
    assert isinstance(document["b"], datetime.datetime)
    check("a: 2001-12-14\nb: 2001-12-14 21:59:43.10 -5\n")


@pytest.mark.parametrize(
    "text",
    [
        "a: [b\n",
        "a: b\n c: d\n",
        "a: b\nc\n",
        "a: 'x\n",
        "a:\n\t- b\n",
        "a: {b: c}}\n",
        "x: [1, 2]\n---\ny: @\n",
        "k: v\n" * 10 + "k: [\n",
    ],
)
def test_bad_yaml_raises_the_same_error_at_the_same_line(text: str) -> None:
    expected = outcome(pyyaml, text)
    assert expected[0] == "error"
    assert outcome(fast_yaml.load_all, text) == expected


def test_the_simulators_error_line_is_unchanged() -> None:
    text = "a: 1\n---\nb: [1,\nc: 2\n"
    with pytest.raises(yaml.MarkedYAMLError) as before:
        pyyaml(text)
    assert before.value.problem_mark is not None
    line = before.value.problem_mark.line + 1
    with pytest.raises(InputError) as now:
        _documents(text, "in.yaml")
    assert str(now.value) == f"in.yaml line {line}: {before.value.problem}"
    assert _documents(BURST, "in.yaml") == pyyaml(BURST)


def test_another_str_constructor_is_respected() -> None:
    class Loud(str):
        pass

    own = vars(yaml.CSafeLoader).get("yaml_constructors")
    yaml.CSafeLoader.add_constructor(
        "tag:yaml.org,2002:str", lambda loader, node: Loud(loader.construct_scalar(node))
    )
    try:
        [document] = fast_yaml.load_all("a: b\n")
        assert type(document["a"]) is Loud
    finally:
        if own is None:
            del yaml.CSafeLoader.yaml_constructors  # back to SafeConstructor's
        else:
            yaml.CSafeLoader.yaml_constructors = own
    assert fast_yaml._standard_loader()
