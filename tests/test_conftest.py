"""The suite's own collection rule: `one_backend` tests run in one
backend's run only when `tests/all_backends.py` names that backend."""

import keras
import pytest

from tests import conftest


class FakeMarker:
    def __init__(self, args):
        self.args = args


class FakeItem:
    def __init__(self, marked, args=()):
        self.marked, self.args, self.markers = marked, args, []

    def get_closest_marker(self, name):
        if self.marked and name == "one_backend":
            return FakeMarker(self.args)
        return None

    def add_marker(self, marker):
        self.markers.append(marker)


def collect(monkeypatch, one):
    if one is None:
        monkeypatch.delenv("ZOO_TESTS_ONE_BACKEND", raising=False)
    else:
        monkeypatch.setenv("ZOO_TESTS_ONE_BACKEND", one)
    items = [FakeItem(True), FakeItem(False)]
    conftest.pytest_collection_modifyitems(None, items)
    return items


@pytest.mark.parametrize("one", [None, "current"])
def test_one_backend_tests_run_unnamed_or_in_their_backend(monkeypatch, one):
    one = keras.backend.backend() if one == "current" else one
    assert all(not item.markers for item in collect(monkeypatch, one))


def test_one_backend_tests_are_skipped_in_the_other_runs(monkeypatch):
    other = "torch" if keras.backend.backend() != "torch" else "jax"
    marked, unmarked = collect(monkeypatch, other)
    assert [m.name for m in marked.markers] == ["skip"]
    assert other in marked.markers[0].kwargs["reason"]
    assert not unmarked.markers


def test_a_named_backend_overrides_the_runs_choice(monkeypatch):
    current = keras.backend.backend()
    other = "torch" if current != "torch" else "jax"
    monkeypatch.setenv("ZOO_TESTS_ONE_BACKEND", other)
    here, there = FakeItem(True, (current,)), FakeItem(True, (other,))
    conftest.pytest_collection_modifyitems(None, [here, there])
    assert not here.markers
    assert [m.name for m in there.markers] == ["skip"]
    assert other in there.markers[0].kwargs["reason"]
