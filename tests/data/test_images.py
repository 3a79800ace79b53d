"""zoo.data.images: local .npz copies, Keras' downloads (mocked), the
seeded validation split and the generated images."""

import keras
import numpy as np
import pytest

from zoo.data import images
from zoo.data.download import DataNotFoundError


def write_npz(path, count=40, size=8, with_test=True, colour=False):
    """A small file in the layout of the real copies (uint8 x, int y)."""
    rng = np.random.default_rng(0)
    shape = (count, size, size, 3) if colour else (count, size, size)
    arrays = {
        "x": rng.integers(0, 256, shape).astype("uint8"),
        "y": (np.arange(count) % 4).astype("uint8"),
    }
    if with_test:
        arrays["x_test"] = arrays["x"][:10]
        arrays["y_test"] = arrays["y"][:10]
    np.savez(path, **arrays)
    return str(path)


def test_npz_with_and_without_a_test_split(tmp_path):
    splits = images.load_npz(write_npz(tmp_path / "a.npz"))
    assert set(splits) == {"train", "test"}
    assert splits["train"][0].shape == (40, 8, 8)
    assert splits["train"][1].dtype == np.int32
    splits = images.load_npz(
        write_npz(tmp_path / "b.npz", with_test=False, colour=True)
    )
    assert set(splits) == {"train"} and splits["train"][0].shape[-1] == 3


def test_npz_errors_name_the_problem(tmp_path):
    with pytest.raises(DataNotFoundError, match="does not exist"):
        images.load_npz(str(tmp_path / "none.npz"))
    (tmp_path / "broken.npz").write_bytes(b"not a zip")
    with pytest.raises(DataNotFoundError, match="not a readable .npz"):
        images.load_npz(str(tmp_path / "broken.npz"))
    np.savez(tmp_path / "other.npz", a=np.zeros(3))
    with pytest.raises(DataNotFoundError, match="expected x"):
        images.load_npz(str(tmp_path / "other.npz"))
    np.savez(tmp_path / "short.npz", x=np.zeros((4, 8, 8)), y=np.zeros(3))
    with pytest.raises(DataNotFoundError, match="one label each"):
        images.load_npz(str(tmp_path / "short.npz"))


def test_validation_split_is_seeded_stratified_and_disjoint():
    x = np.arange(100)[:, None, None].repeat(2, 1)
    y = np.arange(100) % 4
    (a, ya), (b, yb) = images.split_validation(x, y, 0.2, seed=1)
    (c, _), (d, _) = images.split_validation(x, y, 0.2, seed=1)
    np.testing.assert_array_equal(b, d)
    assert len(b) == 20 and np.all(np.bincount(yb) == 5)
    assert not set(a[:, 0, 0]) & set(b[:, 0, 0])
    with pytest.raises(ValueError):
        images.split_validation(x, y, 1.0, seed=1)


def test_keras_datasets_are_used_and_offline_fails_fast(monkeypatch):
    data = (
        (np.zeros((5, 28, 28), "uint8"), np.arange(5)),
        (np.zeros((2, 28, 28), "uint8"), np.arange(2)),
    )
    monkeypatch.setattr(images, "_cached", lambda name: True)
    monkeypatch.setattr(keras.datasets.mnist, "load_data", lambda: data)
    splits = images.load_images("mnist")
    assert splits["train"][0].shape == (5, 28, 28)
    assert splits["test"][1].dtype == np.int32
    monkeypatch.setattr(images, "_cached", lambda name: False)

    def unreachable(url, what, flag):
        raise DataNotFoundError(
            f"cannot download {what}: no network. "
            f"Pass {flag} to use a local copy."
        )

    monkeypatch.setattr(images, "check_reachable", unreachable)
    with pytest.raises(DataNotFoundError, match="--data PATH.npz"):
        images.load_images("cifar10")
    with pytest.raises(DataNotFoundError, match="unknown dataset"):
        images.load_images("imagenet")


def test_generated_images_are_learnable_by_their_quadrant():
    x, y = images.make_synthetic_images(40, size=8, seed=2)
    assert x.shape == (40, 8, 8) and x.dtype == np.uint8
    for image, label in zip(x, y):
        row, column = divmod(int(label), 2)
        inside = np.zeros((8, 8), bool)
        inside[row * 4 : (row + 1) * 4, column * 4 : (column + 1) * 4] = True
        assert image[inside].min() >= 180 and image[~inside].max() < 60
