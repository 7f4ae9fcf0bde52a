"""The search space: every variable type to the unit cube and back."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dagflow.search import SearchSpace
from dagflow.spec.model import VariableSpec


def mixed_space() -> SearchSpace:
    return SearchSpace({
        "lr": VariableSpec(type="FLOAT", min=1e-5, max=1e-1, scale="log"),
        "w": VariableSpec(type="FLOAT", min=-1.0, max=1.0, size=3),
        "layers": VariableSpec(type="INT", min=1, max=4),
        "units": VariableSpec(type="INT", min=16, max=1024, scale="log", size=2),
        "act": VariableSpec(type="ENUM", options=["relu", "tanh", "gelu"]),
        "opts": VariableSpec(type="ENUM", options=["a", "b"], size=2),
    })


def test_layout_gives_each_element_its_own_coordinates() -> None:
    space = mixed_space()
    # lr 1 + w 3 + layers 1 + units 2 + act 3 (one-hot) + opts 2x2
    assert space.dim == 1 + 3 + 1 + 2 + 3 + 4
    assert space.discrete.tolist() == [False] * 4 + [True] * 10


def test_round_trip_of_every_type() -> None:
    space = mixed_space()
    params = {"lr": 1e-3, "w": [-1.0, 0.0, 0.5], "layers": 3, "units": [16, 1000], "act": "tanh", "opts": ["b", "a"]}
    decoded = space.decode(space.encode(params))
    assert decoded["lr"] == pytest.approx(1e-3)
    assert decoded["w"] == pytest.approx([-1.0, 0.0, 0.5])
    assert decoded["layers"] == 3 and isinstance(decoded["layers"], int)
    assert decoded["units"] == [16, 1000] and all(isinstance(u, int) for u in decoded["units"])
    assert decoded["act"] == "tanh"
    assert decoded["opts"] == ["b", "a"]


def test_log_scale_puts_the_geometric_middle_at_one_half() -> None:
    space = SearchSpace({"lr": VariableSpec(type="FLOAT", min=1e-4, max=1.0, scale="log")})
    assert space.encode({"lr": 1e-2})[0] == pytest.approx(0.5)
    assert space.decode(np.array([0.25]))["lr"] == pytest.approx(1e-3)


def test_integers_get_equal_shares_of_the_unit_interval() -> None:
    space = SearchSpace({"k": VariableSpec(type="INT", min=0, max=3)})
    grid = np.linspace(0.0, 1.0, 4001)[:, None]
    counts = np.bincount([space.decode(u)["k"] for u in grid])
    assert counts.tolist() == pytest.approx([1000, 1000, 1000, 1000], abs=2)


def test_log_int_covers_its_bounds() -> None:
    space = SearchSpace({"n": VariableSpec(type="INT", min=1, max=1000, scale="log")})
    assert space.decode(np.array([0.0]))["n"] == 1
    assert space.decode(np.array([1.0]))["n"] == 1000
    assert space.encode({"n": 1})[0] > 0.0  # an integer's interval, not its edge


def test_enum_is_one_hot_and_decodes_by_largest() -> None:
    space = SearchSpace({"act": VariableSpec(type="ENUM", options=["relu", "tanh", "gelu"])})
    assert space.encode({"act": "gelu"}).tolist() == [0.0, 0.0, 1.0]
    assert space.decode(np.array([0.2, 0.7, 0.1]))["act"] == "tanh"


def test_bad_values_are_refused() -> None:
    space = mixed_space()
    good = {"lr": 1e-3, "w": [0, 0, 0], "layers": 2, "units": [32, 32], "act": "relu", "opts": ["a", "a"]}
    with pytest.raises(ValueError, match="act"):
        space.encode({**good, "act": "swish"})
    with pytest.raises(ValueError, match="expected 3"):
        space.encode({**good, "w": [0, 0]})
    with pytest.raises(ValueError, match="missing"):
        space.encode({"lr": 1e-3})
    with pytest.raises(ValueError, match="positive"):
        space.encode({**good, "lr": -1.0})


def test_snap_is_what_encode_of_decode_gives() -> None:
    space = mixed_space()
    rows = np.random.default_rng(1).random((50, space.dim))
    snapped = space.snap(rows)
    for row, snap in zip(rows, snapped, strict=True):
        assert snap == pytest.approx(space.encode(space.decode(row)))
    assert np.array_equal(space.snap(snapped), snapped)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0.0, 1.0), min_size=14, max_size=14))
def test_any_unit_vector_decodes_within_bounds(unit: list[float]) -> None:
    space = mixed_space()
    params = space.decode(np.array(unit))
    assert 1e-5 <= params["lr"] <= 1e-1
    assert all(-1.0 <= w <= 1.0 for w in params["w"])
    assert 1 <= params["layers"] <= 4
    assert all(16 <= u <= 1024 for u in params["units"])
    assert params["act"] in ("relu", "tanh", "gelu")
    again = space.decode(space.encode(params))
    for name, value in params.items():
        assert again[name] == (pytest.approx(value) if name in ("lr", "w") else value)
