"""The hops tag: round trips, hand-worked learning rates, and every kind of forgery refused."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hopsd.slurm import tag as tag_module
from hopsd.slurm.errors import TagError
from hopsd.slurm.tag import MAX_TAG_CHARS, PREFIX, HopsTag, decode, is_hops_comment, try_decode

BODY = {"d": [1, 2, 4], "n": 1000000, "b": 32, "m": "resnet50", "p": 25000000, "lr": [0.1]}


def tag_text(**changes: object) -> str:
    body = {**BODY, **changes}
    return PREFIX + json.dumps(body, separators=(",", ":"))


def test_encode_is_compact_without_spaces_and_round_trips() -> None:
    tag = HopsTag((1, 2, 4), 1e6, 32, "resnet50", 25e6, (0.1,), "linear")
    text = tag.encode()
    assert text == (
        'hops1:{"d":[1,2,4],"n":1000000,"b":32,"m":"resnet50","p":25000000,'
        '"lr":[0.1],"ls":"linear"}'
    )
    assert " " not in text
    assert decode(text) == tag


def test_decoded_numbers_are_floats() -> None:
    tag = decode(tag_text())
    assert isinstance(tag.total_samples, float) and tag.total_samples == 1e6
    assert isinstance(tag.params, float)


def test_defaults_fill_optional_keys() -> None:
    tag = decode(PREFIX + '{"d":[2],"n":10}')
    assert (tag.batch_size, tag.model, tag.params, tag.lr, tag.lr_scale) == (
        32,
        "unknown",
        25e6,
        (),
        "none",
    )


def test_lr_scaling_is_relative_to_the_smallest_demand() -> None:
    linear = HopsTag((2, 4, 8), 100.0, lr=(0.1,), lr_scale="linear")
    root = HopsTag((2, 4, 8), 100.0, lr=(0.1,), lr_scale="sqrt")
    assert linear.lr_for(2) == pytest.approx(0.1)
    assert linear.lr_for(8) == pytest.approx(0.4)  # 0.1 * 8/2
    assert root.lr_for(8) == pytest.approx(0.2)  # 0.1 * sqrt(4)
    per_demand = HopsTag((2, 4, 8), 100.0, lr=(0.1, 0.15, 0.3))
    assert per_demand.lr_for(4) == 0.15
    assert HopsTag((1,), 1.0).lr_for(1) is None
    with pytest.raises(TagError):
        linear.lr_for(3)


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ('hops1:{"d":[1],"n":5', "not valid JSON"),
        ("hops1:[1,2]", "JSON object"),
        ('hops1:{"d":[1],"n":5,"d":[2]}', "repeats key"),
        ('hops1:{"d":[1],"n":5,"x":1}', "unknown tag keys"),
        ('hops1:{"n":5}', "lacks required"),
        ('hops1:{"d":[1],"n":NaN}', "not a finite number"),
        ('hops1:{"d":[1],"n":Infinity}', "not a finite number"),
        ('hops1:{"d":[true],"n":5}', "integer"),
        ('hops1:{"d":[1.0],"n":5}', "integer"),
        ('hops1:{"d":[2,1],"n":5}', "strictly increasing"),
        ('hops1:{"d":[1,1],"n":5}', "strictly increasing"),
        ('hops1:{"d":[0],"n":5}', "integer in 1"),
        ('hops1:{"d":[],"n":5}', "1..32"),
        ('hops1:{"d":1,"n":5}', "must be a list"),
        ('hops1:{"d":[1],"n":0}', "outside"),
        ('hops1:{"d":[1],"n":"5"}', "finite number"),
        ('hops1:{"d":[1],"n":5,"b":0}', "batch size"),
        ('hops1:{"d":[1],"n":5,"m":"a b"}', "model name"),
        ('hops1:{"d":[1],"n":5,"m":"x;rm"}', "model name"),
        ('hops1:{"d":[1,2],"n":5,"lr":[0.1,0.2,0.3]}', "one per demand"),
        ('hops1:{"d":[1,2],"n":5,"lr":[0.1,0.2],"ls":"linear"}', "exactly one base"),
        ('hops1:{"d":[1],"n":5,"lr":[-0.1]}', "outside"),
        ('hops1:{"d":[1],"n":5,"ls":"cubic"}', "lr scale"),
        ('hops:{"d":[1],"n":5}', "prefix"),
        ('hops1:{"d":[1],"n":5,"p":1e20}', "outside"),
    ],
)
def test_forged_or_malformed_tags_are_refused(text: str, why: str) -> None:
    with pytest.raises(TagError, match=why):
        decode(text)
    tag, error = try_decode(text) if is_hops_comment(text) else (None, "foreign")
    assert tag is None and error


def test_oversized_tags_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    text = tag_text(m="a" * 60) + " " * MAX_TAG_CHARS
    with pytest.raises(TagError, match="limit"):
        decode(text)
    monkeypatch.setattr(tag_module, "MAX_TAG_CHARS", 40)
    with pytest.raises(TagError, match="limit 40"):
        HopsTag((1, 2, 4), 1e6, model="resnet50").encode()


def test_foreign_comments_are_not_ours() -> None:
    assert try_decode("free text with spaces NodeList=forged x=y") == (None, None)
    assert try_decode("") == (None, None)
    assert try_decode(None) == (None, None)


@given(
    demands=st.lists(st.integers(1, 4096), min_size=1, max_size=8, unique=True).map(sorted),
    samples=st.floats(1.0, 1e12),
    batch=st.integers(1, 4096),
    lr=st.floats(1e-6, 10.0),
    scale=st.sampled_from(["none", "linear", "sqrt"]),
)
def test_any_valid_tag_round_trips(
    demands: list[int], samples: float, batch: int, lr: float, scale: str
) -> None:
    tag = HopsTag(tuple(demands), samples, batch, "m-1.x", 1e6, (lr,), scale)
    assert decode(tag.encode()) == tag


def test_type_constraints_and_no_preempt_round_trip() -> None:
    tag = HopsTag((1, 2), 1000.0, types=("a100",), exclude_types=("k80",), no_preempt=True)
    text = tag.encode()
    assert '"t":["a100"]' in text and '"xt":["k80"]' in text and '"np":1' in text
    assert decode(text) == tag
    plain = HopsTag((1,), 10.0)
    assert '"t"' not in plain.encode() and '"np"' not in plain.encode()


@pytest.mark.parametrize(
    "body",
    [
        '{"d":[1],"n":10,"np":2}',
        '{"d":[1],"n":10,"np":true}',
        '{"d":[1],"n":10,"t":"a100"}',
        '{"d":[1],"n":10,"t":["a100","a100"]}',
        '{"d":[1],"n":10,"xt":["../k80"]}',
        '{"d":[1],"n":10,"xt":[1]}',
    ],
)
def test_bad_type_constraints_or_no_preempt_are_refused(body: str) -> None:
    with pytest.raises(TagError):
        decode("hops1:" + body)
