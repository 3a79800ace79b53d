"""zoo.testing.cross_backend and its command line, recipes/check_backends.py:
the comparisons, the report and the exit status (pure NumPy, under every
backend), and once, under JAX, the fast cross-backend check itself as one
subprocess for every recipe (one worker process per backend checks them
all): the IMDB classifiers, the GPT (generated text included), the
translators, BERT, ViT and the LSTM captioner, each recipe's report read
by its own test."""

import json
import math
import os
import subprocess
import sys

import keras
import numpy as np
import pytest

from recipes import check_backends as cli
from zoo.saving import write_json_atomic
from zoo.testing import cross_backend as cb
from zoo.testing.backends import selected_backends

ROOT = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
)
SCRIPT = os.path.join(ROOT, "recipes", "check_backends.py")
BACKENDS = ["jax", "tensorflow", "torch"]
# tests/all_backends.py runs jax beside tensorflow then torch, and with
# the suite's compile settings (tests/conftest.py) the jax run is the
# shorter, so the cross-backend runs go there.
CROSS_BACKEND_ONLY_ONCE = pytest.mark.skipif(
    keras.backend.backend() != "jax",
    reason="starts its own jax, tensorflow and torch subprocesses whatever "
    "this suite's backend, so it runs once, in the jax run of the suite",
)


def agreeing_raw(steps=3, rng_seed=0):
    """Worker results that agree to float32 rounding on every backend."""
    rng = np.random.default_rng(rng_seed)
    forward = rng.random((4, 1)).astype("float32")
    losses = list(rng.random(steps) + 0.5)
    weights = {
        "embedding/embeddings": rng.normal(size=(5, 3)).astype("float32"),
        "classifier/bias": rng.normal(size=(3,)).astype("float32"),
    }
    saved = rng.random((8, 1)).astype("float32")
    return {
        "forward": {b: forward.copy() for b in BACKENDS},
        "losses": {b: list(losses) for b in BACKENDS},
        "weights": {
            b: {n: w.copy() for n, w in weights.items()} for b in BACKENDS
        },
        "saved": {
            item: {s: saved.copy() for s in BACKENDS} for item in BACKENDS
        },
        "preprocessed_match": {
            item: {s: True for s in BACKENDS} for item in BACKENDS
        },
        "generated": None,
        "full": None,
        "errors": [],
    }


def report_of(raw, **kwargs):
    results = {"attention": cb.compare_variant(raw, BACKENDS)}
    settings = dict(smoke=True, steps=3, full=raw["full"] is not None)
    settings.update(kwargs)
    return cb.build_report("imdb_attention", results, BACKENDS, **settings)


def test_max_abs_diff_never_lets_nan_or_a_shape_mismatch_pass():
    assert cb.max_abs_diff([1.0, 2.0], [1.0, 2.5]) == 0.5
    assert cb.max_abs_diff([1.0, np.nan], [1.0, np.nan]) == math.inf
    assert cb.max_abs_diff([1.0, 2.0], [1.0, np.inf]) == math.inf
    assert cb.max_abs_diff(np.zeros((2, 1)), np.zeros((1, 2))) == math.inf
    assert cb.max_abs_diff(np.zeros((0,)), np.zeros((0,))) == 0.0


def test_relative_diffs():
    rel = cb.relative_diffs([1.0, 0.0, -2.0, 1.0], [1.1, 0.0, -2.0, np.nan])
    np.testing.assert_allclose(rel[:3], [0.1 / 1.1, 0.0, 0.0])
    assert rel[3] == math.inf


def test_agreeing_backends_pass_with_exit_status_zero():
    raw = agreeing_raw()
    raw["forward"]["torch"] = raw["forward"]["torch"] + np.float32(6e-8)
    report = report_of(raw)
    assert report["passed"] and cb.exit_status(report) == 0
    result = report["variants"]["attention"]
    assert set(result["forward"]["pairs"]) == {
        "jax vs tensorflow",
        "jax vs torch",
        "tensorflow vs torch",
    }
    assert result["forward"]["max"] < 1e-7
    assert result["loss"]["max"] == 0.0 and result["saved"]["max"] == 0.0
    table = cb.format_table(report)
    assert "attention" in table and "pass" in table
    assert "all checks passed" in table and "FAIL" not in table


def test_one_pair_over_the_forward_tolerance_fails_and_is_named():
    raw = agreeing_raw()
    raw["forward"]["torch"] = raw["forward"]["torch"] + np.float32(3e-5)
    report = report_of(raw)
    assert not report["passed"] and cb.exit_status(report) != 0
    pairs = report["variants"]["attention"]["forward"]["pairs"]
    assert pairs["jax vs tensorflow"] == 0.0
    assert pairs["jax vs torch"] > cb.TOLERANCES["forward"]
    failures = "\n".join(report["failures"])
    assert "attention: forward: jax vs torch" in failures
    assert "tensorflow vs torch" in failures
    assert "jax vs tensorflow" not in failures
    table = cb.format_table(report)
    assert "FAIL" in table and "forward: jax vs torch" in table


def test_loss_divergence_names_the_pair_and_the_step():
    raw = agreeing_raw(steps=5)
    raw["losses"]["tensorflow"][3] *= 1 + 5e-4
    report = report_of(raw, steps=5)
    assert cb.exit_status(report) == 1
    (message, *others) = [
        m for m in report["failures"] if "jax vs tensorflow" in m
    ]
    assert "loss" in message and "worst at step 3" in message and not others
    assert "first over at step 3" in message
    assert (
        report["variants"]["attention"]["loss"]["worst_step"][
            "jax vs tensorflow"
        ]
        == 3
    )
    verbose = cb.format_table(report, verbose=True)
    assert "per-step losses" in verbose and "tensorflow" in verbose


def test_a_saved_model_cell_off_the_reference_names_saver_and_loader():
    raw = agreeing_raw()
    raw["saved"]["torch"]["tensorflow"] = (
        raw["saved"]["torch"]["tensorflow"] + 1e-3
    )
    report = report_of(raw)
    saved = report["variants"]["attention"]["saved"]
    assert saved["matrix"]["tensorflow"]["torch"] > cb.TOLERANCES["saved"]
    assert saved["matrix"]["torch"]["tensorflow"] == 0.0
    assert report["failures"] == [
        "attention: saved: saved by tensorflow, loaded by torch vs saved and "
        "loaded by jax: max abs diff 1.0e-03 > 1.0e-05"
    ]


def test_different_token_ids_fail_even_when_outputs_agree():
    raw = agreeing_raw()
    raw["preprocessed_match"]["jax"]["torch"] = False
    report = report_of(raw)
    assert cb.exit_status(report) == 1
    assert (
        "the preprocessor of saved-torch.keras loaded by jax"
        in report["failures"][0]
    )


def test_generated_text_must_match_exactly_in_every_cell():
    raw = agreeing_raw()
    texts = ["ROMEO: thou", "JULIET:\nO night"]
    raw["generated"] = {
        item: {s: list(texts) for s in BACKENDS} for item in BACKENDS
    }
    report = report_of(raw)
    assert report["passed"]
    assert report["variants"]["attention"]["generate"]["max"] == 0
    assert "generate 3x3 differing" in cb.format_table(report)
    raw["generated"]["torch"]["tensorflow"] = [texts[0], "JULIET:\nO nigh"]
    report = report_of(raw)
    assert cb.exit_status(report) == 1
    assert report["failures"] == [
        "attention: generate: saved by tensorflow, loaded by torch generates "
        "other text than saved and loaded by jax"
    ]


def test_weights_are_reported_not_gated():
    raw = agreeing_raw()
    raw["weights"]["jax"]["classifier/bias"] += 1.0
    report = report_of(raw)
    weights = report["variants"]["attention"]["weights"]
    assert weights["max"] == pytest.approx(1.0)
    assert weights["worst_weight"]["jax vs torch"] == "classifier/bias"
    assert report["passed"]


def test_a_missing_worker_result_fails_the_variant():
    raw = agreeing_raw()
    del raw["forward"]["torch"]
    raw["errors"].append(
        "no forward outputs from the torch worker (see its log)"
    )
    report = report_of(raw)
    result = report["variants"]["attention"]
    assert result["forward"] is None and not result["passed"]
    assert cb.exit_status(report) == 1
    assert "torch worker" in cb.format_table(report)


def test_full_runs_compare_validation_and_test_accuracy():
    raw = agreeing_raw()
    raw["full"] = {
        "jax": {"validation_accuracy": 0.85, "test_accuracy": 0.84},
        "tensorflow": {"validation_accuracy": 0.855, "test_accuracy": 0.84},
        "torch": {"validation_accuracy": 0.85, "test_accuracy": 0.82},
    }
    report = report_of(raw)
    full = report["variants"]["attention"]["full"]
    assert full["pairs"][
        "jax vs tensorflow validation_accuracy"
    ] == pytest.approx(0.005)
    failing = [m for m in report["failures"] if "full" in m]
    assert len(failing) == 2 and all("test_accuracy" in m for m in failing)
    assert "full max|d|" in cb.format_table(report)
    # A recipe names its own metrics and tolerances (a GPT's loss).
    raw["full"] = {
        b: {"validation_loss": 1.5 + 0.01 * i} for i, b in enumerate(BACKENDS)
    }
    raw["full_tolerances"] = {"validation_loss": 0.05}
    report = report_of(raw)
    assert report["passed"]
    assert report["variants"]["attention"]["full"]["max"] == pytest.approx(0.02)


def test_portability_scan_flags_backend_specific_classes_and_jit_compile():
    config = {
        "module": "zoo.models.text_classifier",
        "class_name": "TextClassifier",
        "config": {
            "backbone": {
                "module": "keras.src.models.functional",
                "class_name": "Functional",
                "compile_config": {
                    "jit_compile": True,
                    "optimizer": {
                        "module": "keras.src.backend.torch.optimizers.torch_adam",
                        "class_name": "Adam",
                    },
                },
            }
        },
        "compile_config": {
            "jit_compile": False,
            "optimizer": {"module": "keras.optimizers", "class_name": "Adam"},
        },
    }
    issues = cb.portability_issues(config)
    assert len(issues) == 2
    assert any(
        "backbone.compile_config.optimizer" in i and "needs torch" in i
        for i in issues
    )
    assert any(
        i.startswith("backbone: compile_config has jit_compile=True")
        for i in issues
    )
    clean = {
        "module": "keras.optimizers",
        "class_name": "SGD",
        "compile_config": {"jit_compile": False},
    }
    assert cb.portability_issues(clean) == []


def test_warnings_are_listed_but_do_not_change_the_exit_status():
    raw = agreeing_raw()
    results = {"attention": cb.compare_variant(raw, BACKENDS)}
    results["attention"]["portability"] = {"saved-torch.keras": ["model: x"]}
    report = cb.build_report(
        "imdb_attention", results, BACKENDS, smoke=True, steps=3, full=False
    )
    assert report["warnings"] == ["saved-torch.keras model: x [attention]"]
    assert cb.exit_status(report) == 0
    assert "not gated" in cb.format_table(report)


def test_json_report_is_strict_json_written_atomically(tmp_path):
    raw = agreeing_raw()
    raw["forward"]["jax"] = raw["forward"]["jax"] * np.nan
    report = report_of(raw)
    path = tmp_path / "sub" / "report.json"
    write_json_atomic(report, str(path), strict=True)
    text = path.read_text()
    loaded = json.loads(text, parse_constant=lambda c: pytest.fail(c))
    assert loaded["passed"] is False
    assert (
        loaded["variants"]["attention"]["forward"]["pairs"]["jax vs torch"]
        == "inf"
    )
    assert (
        loaded["variants"]["attention"]["loss"]["per_step"]["torch"]
        == (raw["losses"]["torch"])
    )
    assert [p.name for p in path.parent.iterdir()] == ["report.json"]


def test_command_line():
    args = cli.parse_args(["imdb_attention", "--smoke", "--no-train"])
    assert args.steps == 0 and args.backends == BACKENDS and args.smoke
    assert args.hooks == [os.path.join(ROOT, "recipes", "imdb_attention.py")]
    assert args.variants == [None]
    args = cli.parse_args(["captioning"])  # a family's name
    assert args.hooks == [os.path.join(ROOT, "recipes", "caption_images.py")]
    for spelling in ("recipes/gpt_text.py", "recipes.gpt_text"):
        args = cli.parse_args([spelling])
        assert args.recipes == ["gpt_text"]
        assert args.hooks == [os.path.join(ROOT, "recipes", "gpt_text.py")]
    args = cli.parse_args(
        [
            "imdb_attention",
            "--variants",
            "imdb_mean",
            "imdb_rnn",
            "--backends",
            "torch",
            "jax",
            "--steps",
            "5",
        ]
    )
    assert args.variants == [["imdb_mean", "imdb_rnn"]]
    assert args.backends == ["torch", "jax"] and args.steps == 5
    for bad in (
        [],
        ["imdb_attention", "--backends", "jax", "jax"],
        ["imdb_attention", "--steps", "-1"],
        ["no_such_recipe"],
    ):
        with pytest.raises(SystemExit):
            cli.parse_args(bad)


def test_command_line_takes_several_recipes(capsys):
    args = cli.parse_args(
        ["imdb_attention:imdb_mean,imdb_rnn", "gpt", "captioning:lstm"]
    )
    assert args.recipes == ["imdb_attention", "gpt_text", "caption_images"]
    assert args.variants == [["imdb_mean", "imdb_rnn"], None, ["lstm"]]
    assert args.hooks == [
        os.path.join(ROOT, "recipes", f"{name}.py") for name in args.recipes
    ]
    args = cli.parse_args(["all", "--smoke"])
    assert args.recipes == cli.checkable_recipes() and len(args.recipes) >= 6
    assert args.variants == [None] * len(args.recipes)
    args = cli.parse_args(["translate:rnn"])  # one recipe, two spellings
    assert (
        args.variants
        == cli.parse_args(["translate", "--variants", "rnn"]).variants
    )
    for bad, message in (
        (
            ["gpt_text", "translate", "--variants", "rnn"],
            "--variants takes one",
        ),
        (["translate:rnn", "--variants", "rnn"], "not both"),
        (["gpt_text", "translate", "--data-dir", "x"], "--data-dir takes one"),
        (["gpt", "gpt_text"], "names the recipe gpt_text again"),
        (["all", "gpt_text"], "names the recipe gpt_text again"),
        (["all:x"], "all takes no variants"),
        (["gpt_text:"], "no variant after the colon"),
    ):
        with pytest.raises(SystemExit) as exit_info:
            cli.parse_args(bad)
        assert exit_info.value.code == 2
        error = capsys.readouterr().err.strip().splitlines()[-1]
        assert message in error, (bad, error)


def test_several_reports_have_one_exit_status_and_one_summary_line():
    passed = report_of(agreeing_raw())
    raw = agreeing_raw()
    raw["forward"]["torch"] = raw["forward"]["torch"] + np.float32(3e-5)
    failed = dict(report_of(raw), recipe="gpt_text")
    assert cb.exit_status([passed, passed]) == 0
    assert cb.exit_status([passed, failed]) == cb.exit_status(failed) == 1
    assert cb.summary_line([passed, passed], 12.3) == (
        "check_backends: all 2 recipes passed, wall time 12 s"
    )
    assert cb.summary_line([passed, failed]) == (
        "check_backends: 1 of 2 recipes FAILED (gpt_text)"
    )


def test_run_checks_refuses_names_that_cannot_be_folders(tmp_path):
    hook = tmp_path / "hook.py"
    hook.write_text("")
    with pytest.raises(ValueError, match="repeat"):
        cb.run_checks([str(hook), str(hook)])
    with pytest.raises(ValueError, match="cannot name"):
        cb.run_checks([str(hook)], names=["../up"])
    with pytest.raises(ValueError, match="one entry per hook"):
        cb.run_checks([str(hook)], variants=[None, None])
    with pytest.raises(FileNotFoundError):
        cb.run_checks([str(tmp_path / "missing.py")])


def test_recipes_implement_the_contract():
    from recipes import gpt_text, imdb_attention

    assert set(imdb_attention.CHECK_VARIANTS) >= {
        "imdb_mean",
        "imdb_attention",
        "imdb_query",
        "imdb_rnn",
        "imdb_transformer",
        "imdb_query_bigrams",
    }
    setup = imdb_attention.check_setup("imdb_mean", num_steps=3)
    assert isinstance(setup, cb.CheckSetup)
    assert len(setup.train_batches) == 3 and isinstance(setup.inputs[0], str)
    setup = gpt_text.check_setup(num_steps=2, batch_size=2)
    assert isinstance(setup, cb.CheckSetup)
    assert setup.generate["max_length"] > setup.model.backbone.sequence_length
    assert gpt_text.CHECK_FULL_METRICS == {"validation_loss": 0.05}
    from recipes import translate

    setup = translate.check_setup("rnn", num_steps=2, batch_size=2)
    assert isinstance(setup, cb.CheckSetup)
    assert set(setup.inputs) == {"encoder_text", "decoder_text"}


def test_backend_selection():
    assert selected_backends("all") == BACKENDS
    assert selected_backends("torch,jax") == ["torch", "jax"]
    assert selected_backends("current") == [keras.backend.backend()]
    with pytest.raises(ValueError, match="--backends"):
        selected_backends("jax,theano")


def run_tool(args, timeout):
    result = subprocess.run(
        [sys.executable, SCRIPT, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return result.returncode, result.stdout + result.stderr


# Each recipe's test -> what it names on the command line of the one run
# that checks every recipe with one worker process per backend (each
# framework imported once, not once per recipe), all with 3 SGD steps.
RECIPE_TESTS = {
    "test_fast_form_agrees_across_jax_tensorflow_and_torch": (
        "imdb_attention:imdb_attention,imdb_transformer"
    ),
    "test_gpt_smoke_agrees_across_backends_generated_text_included": (
        "gpt_text"
    ),
    "test_translation_agrees_across_backends_translations_included": (
        "translate"
    ),
    "test_bert_masked_lm_and_classifier_agree_across_backends": "bert_imdb",
    "test_vit_agrees_across_backends_on_float_images": "vit_images",
    # The LSTM decoder here; the Transformer decoder's blocks are the
    # translation family's, checked there (`check_backends.py captioning`
    # checks both). A family's name: the report is caption_images'.
    "test_captioning_agrees_across_backends_captions_included": (
        "captioning:lstm"
    ),
    "test_imagegpt_agrees_across_backends_completions_included": (
        "imagegpt_digits"
    ),
}
STEPS = 3


@pytest.fixture(scope="module")
def shared_run(request, tmp_path_factory):
    """`(exit status, output, {recipe: report})` of one run of
    `check_backends.py --smoke` over the recipes whose tests were collected
    (all of them when the test of the whole run was)."""
    collected = {item.name for item in request.session.items}
    everything = "test_one_run_checks_every_recipe" in collected
    arguments = [
        argument
        for test, argument in RECIPE_TESTS.items()
        if everything or test in collected
    ]
    path = tmp_path_factory.mktemp("check_backends") / "reports.json"
    code, output = run_tool(
        [
            *arguments,
            "--smoke",
            "--steps",
            str(STEPS),
            "--json",
            str(path),
            "--timeout",
            "1800",
        ],
        timeout=1900,
    )
    if len(arguments) == 1:  # one recipe's JSON is its report alone
        reports = json.loads(path.read_text()) if path.exists() else None
        reports = {reports["recipe"]: reports} if reports else {}
    else:
        reports = json.loads(path.read_text()) if path.exists() else {}
    return code, output, reports


def passed_report(shared_run, recipe):
    """The shared run's report of `recipe`, checked to have passed."""
    _, output, reports = shared_run
    assert recipe in reports, output
    report = reports[recipe]
    assert report["passed"] and report["failures"] == [], output
    return report


@CROSS_BACKEND_ONLY_ONCE
def test_one_run_checks_every_recipe(shared_run):
    code, output, reports = shared_run
    assert code == 0, output
    assert sorted(reports) == [
        "bert_imdb",
        "caption_images",
        "gpt_text",
        "imagegpt_digits",
        "imdb_attention",
        "translate",
        "vit_images",
    ]
    for recipe, report in reports.items():
        assert report["steps"] == STEPS and report["smoke"], recipe
        assert all(
            worker["status"] == "done" and worker["exit_code"] == 0
            for worker in report["workers"].values()
        ), report["workers"]
    assert "check_backends: all 7 recipes passed" in output


@CROSS_BACKEND_ONLY_ONCE
def test_fast_form_agrees_across_jax_tensorflow_and_torch(shared_run):
    report = passed_report(shared_run, "imdb_attention")
    assert report["backends"] == BACKENDS
    assert list(report["variants"]) == ["imdb_attention", "imdb_transformer"]
    for variant, result in report["variants"].items():
        forward = result["forward"]
        assert len(forward["pairs"]) == 3, variant
        assert all(d <= 1e-5 for d in forward["pairs"].values()), forward
        assert all(
            len(result["loss"]["per_step"][b]) == STEPS for b in BACKENDS
        )
        assert all(d <= 1e-4 for d in result["loss"]["pairs"].values())
        cells = [
            d
            for row in result["saved"]["matrix"].values()
            for d in row.values()
        ]
        assert len(cells) == 9 and all(d <= 1e-5 for d in cells), cells
        assert all(
            all(row.values())
            for row in result["saved"]["preprocessed_match"].values()
        )
    output = shared_run[1]
    assert "imdb_attention" in output and "imdb_transformer" in output
    assert "all checks passed" in output


@CROSS_BACKEND_ONLY_ONCE
def test_gpt_smoke_agrees_across_backends_generated_text_included(shared_run):
    result = passed_report(shared_run, "gpt_text")["variants"]["default"]
    assert result["passed"] and result["generate"]["max"] == 0
    reference = result["generate"]["reference"]
    assert [text[:6] for text in reference] == ["ROMEO:", "JULIET"]
    assert all(
        all(row.values()) for row in result["generate"]["matrix"].values()
    )


@CROSS_BACKEND_ONLY_ONCE
def test_translation_agrees_across_backends_translations_included(shared_run):
    report = passed_report(shared_run, "translate")
    assert sorted(report["variants"]) == ["rnn", "transformer"]
    for result in report["variants"].values():
        assert result["passed"] and result["generate"]["max"] == 0
        assert len(result["generate"]["reference"]) == 3


@CROSS_BACKEND_ONLY_ONCE
def test_a_failing_worker_makes_the_exit_status_non_zero(tmp_path):
    """A recipe that fails in a worker fails its own report, with the end
    of that worker's log; the worker goes on to the next recipe."""
    code, output = run_tool(
        [
            "imdb_attention:no_such_model",
            "vit_images",  # the quickest to check
            "--smoke",
            "--backends",
            "jax",
            "--no-train",
            "--json",
            str(tmp_path / "report.json"),
        ],
        timeout=300,
    )
    assert code != 0
    assert "unknown variant" in output and "worker jax failed" in output
    assert "jax worker failed on imdb_attention; end of its log:" in output
    reports = json.loads((tmp_path / "report.json").read_text())
    assert not reports["imdb_attention"]["passed"]
    assert reports["vit_images"]["passed"], output
    assert "1 of 2 recipes FAILED (imdb_attention)" in output


@CROSS_BACKEND_ONLY_ONCE
def test_bert_masked_lm_and_classifier_agree_across_backends(shared_run):
    report = passed_report(shared_run, "bert_imdb")
    assert sorted(report["variants"]) == ["classifier", "masked_lm"]
    assert all(result["passed"] for result in report["variants"].values())


@CROSS_BACKEND_ONLY_ONCE
def test_vit_agrees_across_backends_on_float_images(shared_run):
    report = passed_report(shared_run, "vit_images")
    assert report["variants"]["default"]["passed"]


@CROSS_BACKEND_ONLY_ONCE
def test_captioning_agrees_across_backends_captions_included(shared_run):
    report = passed_report(shared_run, "caption_images")
    assert sorted(report["variants"]) == ["lstm"]
    for result in report["variants"].values():
        assert result["passed"] and result["generate"]["max"] == 0
        assert len(result["generate"]["reference"]) == 3


@CROSS_BACKEND_ONLY_ONCE
def test_imagegpt_agrees_across_backends_completions_included(shared_run):
    result = passed_report(shared_run, "imagegpt_digits")["variants"]
    result = result["default"]
    assert result["passed"] and result["generate"]["max"] == 0
    # One array: four 8x8 images, the top half kept, the rest greedy.
    completed = np.asarray(result["generate"]["reference"])
    assert completed.shape == (1, 4, 8, 8)
    assert 0 <= completed.min() and completed.max() <= 255


def test_each_saved_file_generates_through_the_first_files_model():
    from zoo.testing.cross_backend import worker

    def model(units, seed):
        keras.utils.set_random_seed(seed)
        return keras.Sequential(
            [
                keras.Input((3,), name="x"),
                keras.layers.Dense(units, name="dense"),
            ],
            name="model",
        )

    first, same, other = model(2, 0), model(2, 1), model(4, 0)
    x = np.ones((1, 3), "float32")
    expected = same.predict_on_batch(x)
    assert not np.allclose(first.predict_on_batch(x), expected)
    assert worker._generator_for(first, None) is first
    # The same model, other weights: the first model, carrying them.
    assert worker._generator_for(same, first) is first
    np.testing.assert_array_equal(first.predict_on_batch(x), expected)
    # Another description: the loaded model itself.
    assert worker._generator_for(other, first) is other


def test_the_first_files_generate_function_runs_the_loaded_weights(tmp_path):
    # As in the matrix: two loads of one saved GPT, the second with other
    # weights; the first, traced once, generates what the second would.
    from zoo.models import GPT, GPTBackbone
    from zoo.testing.cross_backend import worker

    keras.utils.set_random_seed(0)
    path = tmp_path / "gpt.keras"
    GPT(
        GPTBackbone(
            20, num_layers=1, num_heads=2, hidden_dim=8, sequence_length=8
        ),
        preprocessor=None,
    ).save(path)
    first, other = (keras.saving.load_model(path) for _ in range(2))
    rng = np.random.default_rng(0)
    other.set_weights(
        [
            3 * rng.normal(size=w.shape).astype(w.dtype)
            for w in other.get_weights()
        ]
    )
    prompt = {
        "token_ids": np.ones((2, 8), "int32"),
        "padding_mask": np.arange(8)[None] < np.array([[2], [3]]),
    }
    before = first.generate(dict(prompt), stop_token_ids=None)["token_ids"]
    expected = other.generate(dict(prompt), stop_token_ids=None)["token_ids"]
    assert not np.array_equal(before, expected)  # the weights matter
    assert worker._generator_for(other, first) is first
    generated = first.generate(dict(prompt), stop_token_ids=None)
    np.testing.assert_array_equal(generated["token_ids"], expected)


def test_a_file_with_another_vocabulary_generates_on_its_own(tmp_path):
    # Vocabularies are assets, not config: they are part of the description.
    from tests.helpers import tiny_text_gpt
    from zoo.testing.cross_backend import worker

    path = tmp_path / "gpt.keras"
    tiny_text_gpt("abc").save(path)
    first, same, other = (keras.saving.load_model(path) for _ in range(3))
    vocabulary = other.preprocessor.tokenizer.get_vocabulary()
    other.preprocessor.tokenizer.set_vocabulary(vocabulary[:-1] + ["d"])
    assert worker._generator_for(same, first) is first
    assert worker._generator_for(other, first) is other


def test_weights_are_matched_by_path_not_by_order():
    raw = agreeing_raw()
    # Another backend lists the same weights in another order: no difference.
    raw["weights"]["torch"] = dict(reversed(raw["weights"]["torch"].items()))
    weights = report_of(raw)["variants"]["attention"]["weights"]
    assert weights["max"] == 0.0
    # A weight one backend lacks is named, not a bare "inf".
    del raw["weights"]["torch"]["classifier/bias"]
    weights = report_of(raw)["variants"]["attention"]["weights"]
    assert weights["pairs"]["jax vs torch"] == float("inf")
    assert (
        "only under jax: classifier/bias"
        in (weights["worst_weight"]["jax vs torch"])
    )
    assert weights["pairs"]["jax vs tensorflow"] == 0.0


def test_unique_weight_paths():
    assert cb.unique_paths(["a/k", "b/k", "a/k", "a/k"]) == [
        "a/k",
        "b/k",
        "a/k#2",
        "a/k#3",
    ]
