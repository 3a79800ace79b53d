"""Every docstring example in `zoo` runs as a doctest, under JAX (the
examples print shapes as tuples, which PyTorch prints as `torch.Size`). Examples whose output is random,
or that only show a call inside a method, are to be marked
`# doctest: +SKIP` where they stand.

`NOT_RUNNABLE_YET` lists the modules whose examples do not run as they are
written (snippets that need a trained model, a data folder or names from
around them). They are expected to fail (strictly: a module whose examples
start to pass fails here until it leaves the list)."""

import doctest
import importlib
import pkgutil

import keras
import numpy as np
import pytest

import zoo

NOT_RUNNABLE_YET = {
    "zoo.models.captioning.convert_efficientnet_lite",
    "zoo.models.captioning.image_encoders",
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
@pytest.mark.parametrize(
    "name",
    [
        pytest.param(
            name,
            marks=pytest.mark.xfail(
                name in NOT_RUNNABLE_YET,
                reason="its examples do not run as written yet",
                strict=True,
            ),
        )
        for name in MODULES
    ],
)
def test_docstring_examples_run(name, tmp_path, monkeypatch):
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
    assert results.attempted == 0 or not results.failed, (
        f"{results.failed} of {results.attempted} examples failed in {name}"
    )
