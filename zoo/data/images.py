"""Image classification datasets: Keras' downloads or a local `.npz` copy,
and a seeded validation split.

`load_images(name)` gives `{"train": (x, y), "test": (x, y)}` from
`keras.datasets` (MNIST, Fashion-MNIST, CIFAR-10, CIFAR-100: uint8 images,
int labels), checking first that the download host answers, so a machine
without a network gets one line within seconds. `load_npz(path)` reads a
local copy: a file with arrays `x` (uint8 images, `(N, H, W)` or `(N, H, W,
C)`) and `y` (labels), and optionally `x_test`, `y_test`.
"""

import os

import numpy as np

from zoo.data.download import DataNotFoundError, check_reachable

DATASETS = ("mnist", "fashion_mnist", "cifar10", "cifar100")
KERAS_DATASETS_URL = (
    "https://storage.googleapis.com/tensorflow/tf-keras-datasets/"
)
CIFAR_URL = "https://www.cs.toronto.edu/~kriz/"


def _cached(name):
    folder = os.path.join(os.path.expanduser("~"), ".keras", "datasets")
    files = {
        "mnist": ["mnist.npz"],
        "fashion_mnist": ["fashion-mnist"],
        "cifar10": ["cifar-10-batches-py"],
        "cifar100": ["cifar-100-python"],
    }[name]
    return any(os.path.exists(os.path.join(folder, f)) for f in files)


def load_images(name):
    """`{"train": (x, y), "test": (x, y)}` of a `keras.datasets` dataset.

    Raises:
        DataNotFoundError: an unknown name, or no network (naming `--data`).
    """
    import keras

    if name not in DATASETS:
        raise DataNotFoundError(
            f"unknown dataset {name!r}; the datasets are {', '.join(DATASETS)}."
        )
    if not _cached(name):
        url = CIFAR_URL if name.startswith("cifar") else KERAS_DATASETS_URL
        check_reachable(url, name, "--data PATH.npz")
    try:
        (x, y), (x_test, y_test) = getattr(keras.datasets, name).load_data()
    except Exception as error:  # network errors come in many types
        raise DataNotFoundError(
            f"could not download {name} ({type(error).__name__}). Pass "
            "--data PATH.npz with arrays x and y."
        ) from None
    return {
        "train": (x, np.asarray(y).reshape(-1).astype("int32")),
        "test": (x_test, np.asarray(y_test).reshape(-1).astype("int32")),
    }


def load_npz(path):
    """`{"train": (x, y)[, "test": (x, y)]}` from a `.npz` file with arrays
    `x`, `y` (and optionally `x_test`, `y_test`).

    Raises:
        DataNotFoundError: a missing or unreadable file, missing arrays, or
            arrays that do not fit together.
    """
    if not os.path.isfile(path):
        raise DataNotFoundError(f"--data {path!r} does not exist.")
    try:
        data = np.load(path)
        arrays = {k: data[k] for k in data.files}
    except Exception as error:
        raise DataNotFoundError(
            f"{path} is not a readable .npz file ({type(error).__name__})."
        ) from None
    if "x" not in arrays or "y" not in arrays:
        raise DataNotFoundError(
            f"{path} has arrays {sorted(arrays)}; expected x (images) and y "
            "(labels)."
        )
    splits = {}
    for split, (xs, ys) in (
        ("train", ("x", "y")),
        ("test", ("x_test", "y_test")),
    ):
        if xs not in arrays:
            continue
        x, y = arrays[xs], np.asarray(arrays[ys]).reshape(-1)
        if x.ndim not in (3, 4) or len(x) != len(y) or not len(x):
            raise DataNotFoundError(
                f"{path}: {xs} of shape {x.shape} and {ys} of shape "
                f"{y.shape} are not a batch of images with one label each."
            )
        splits[split] = (x, y.astype("int32"))
    return splits


def split_validation(x, y, fraction, seed):
    """`((x_train, y_train), (x_val, y_val))`: a seeded, class-stratified
    hold-out of `fraction` of the examples."""
    if not 0.0 < fraction < 1.0:
        raise ValueError(
            f"validation fraction must be in (0, 1); got {fraction}."
        )
    rng = np.random.default_rng(seed)
    held = []
    for label in np.unique(y):
        rows = rng.permutation(np.flatnonzero(y == label))
        held.append(rows[: int(round(fraction * len(rows)))])
    held = np.concatenate(held)
    keep = np.setdiff1d(np.arange(len(y)), held)
    keep, held = rng.permutation(keep), rng.permutation(held)
    return (x[keep], y[keep]), (x[held], y[held])


def make_synthetic_images(count=256, size=8, channels=1, num_classes=4, seed=0):
    """uint8 images whose class is the quadrant holding a bright square,
    with noise: learnable in seconds, for `--smoke` and tests."""
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 60, (count, size, size, channels)).astype("uint8")
    y = rng.integers(0, num_classes, count).astype("int32")
    half = size // 2
    for i, label in enumerate(y):
        row, column = divmod(int(label) % 4, 2)
        x[
            i,
            row * half : (row + 1) * half,
            column * half : (column + 1) * half,
        ] = rng.integers(180, 256)
    return (x[..., 0] if channels == 1 else x), y
