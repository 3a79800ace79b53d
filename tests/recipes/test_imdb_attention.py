"""recipes/imdb_attention.py in-process: every model under --smoke, the data
errors, --glove, and the shipped models under the current backend."""

import json
import os

import keras
import numpy as np
import pytest

import zoo  # noqa: F401  (registers the layers for loading)
from recipes import imdb_attention
from tests.data.test_imdb import write_aclimdb

ROOT = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
)
REVIEWS = ["an utterly wonderful film", "a waste of two hours"]


# The recipe's default model on every backend; the others' code is the
# same recipe path (their layers are tested on every backend in
# tests/models/text_classifier).
@pytest.mark.parametrize(
    "model",
    [
        m
        if m == "attention"
        else pytest.param(m, marks=pytest.mark.one_backend)
        for m in imdb_attention.MODELS
    ],
)
def test_every_model_runs_under_smoke(model, tmp_path):
    metrics = imdb_attention.main(
        [
            "--smoke",
            "--model",
            model,
            "--verbose",
            "0",
            "--output-dir",
            str(tmp_path),
        ]
    )
    written = json.loads((tmp_path / "metrics.json").read_text())
    assert (
        written["model"] == model
        and written["backend"] == keras.backend.backend()
    )
    for key in (
        "train_accuracy",
        "validation_accuracy",
        "test_accuracy",
        "train_loss",
        "validation_loss",
        "test_loss",
        "epochs",
        "train_seconds",
        "parameters",
    ):
        assert key in written, key
    assert written["test_accuracy"] == metrics["test_accuracy"]
    assert written["throughput"]["reviews_per_second"] > 0
    assert np.isfinite(written["train_loss"])
    assert (tmp_path / "training_curves.png").exists()
    if model != "mean":
        for picture in (
            "attention_entropy.png",
            "attention_text.png",
            "top_words.png",
        ):
            assert (tmp_path / picture).read_bytes()[:4] == b"\x89PNG", picture
    loaded = keras.saving.load_model(str(tmp_path / f"imdb_{model}.keras"))
    probabilities = np.asarray(loaded.predict(REVIEWS, verbose=0))
    assert probabilities.shape == (2, 1)
    assert np.all((probabilities >= 0) & (probabilities <= 1))


def test_attention_smoke_run_learns_the_cue_words(tmp_path):
    metrics = imdb_attention.main(
        [
            "--smoke",
            "--model",
            "attention",
            "--epochs",
            "6",
            "--verbose",
            "0",
            "--output-dir",
            str(tmp_path),
        ]
    )
    assert metrics["validation_accuracy"] > 0.8
    classifier = keras.saving.load_model(str(tmp_path / "imdb_attention.keras"))
    weights, ids = classifier.attention_weights(
        ["the film was superb and the plot"]
    )
    vocabulary = classifier.preprocessor.get_vocabulary()
    assert vocabulary[ids[0][np.argmax(weights[0])]] == "superb"


@pytest.mark.one_backend
def test_regularisation_flags_reach_the_saved_model(tmp_path):
    imdb_attention.main(
        [
            "--smoke",
            "--model",
            "attention",
            "--epochs",
            "1",
            "--verbose",
            "0",
            "--word-dropout",
            "0.2",
            "--entropy-weight",
            "-0.05",
            "--query-initializer",
            "zeros",
            "--output-dir",
            str(tmp_path),
        ]
    )
    model = keras.saving.load_model(str(tmp_path / "imdb_attention.keras"))
    assert model.backbone.get_layer("word_dropout").rate == 0.2
    pooling = model.backbone.get_layer("attention_pooling")
    assert pooling.entropy_weight == -0.05
    assert pooling.get_config()["query_initializer"]["class_name"] == "Zeros"
    probabilities = np.asarray(model.predict(REVIEWS, verbose=0))
    assert np.isfinite(probabilities).all()


@pytest.mark.one_backend
@pytest.mark.parametrize(
    "model,flags,check",
    [
        (
            "rnn",
            ["--rnn-cell", "lstm", "--rnn-units", "6", "--rnn-skip"],
            lambda b: (
                isinstance(b.get_layer("rnn").forward_layer, keras.layers.LSTM)
                and b.get_layer("rnn").forward_layer.units == 6
                and b.get_layer("rnn_skip") is not None
            ),
        ),
        (
            "transformer",
            [
                "--num-layers",
                "1",
                "--num-heads",
                "2",
                "--intermediate-dim",
                "12",
            ],
            lambda b: (
                b.get_layer("encoder_0").num_heads == 2
                and b.get_layer("encoder_0").intermediate_dim == 12
                and "encoder_1" not in [layer.name for layer in b.layers]
            ),
        ),
    ],
)
def test_architecture_flags_reach_the_saved_model(
    model, flags, check, tmp_path
):
    metrics = imdb_attention.main(
        [
            "--smoke",
            "--model",
            model,
            "--epochs",
            "1",
            "--verbose",
            "0",
            "--output-dir",
            str(tmp_path),
            *flags,
        ]
    )
    loaded = keras.saving.load_model(str(tmp_path / f"imdb_{model}.keras"))
    assert check(loaded.backbone)
    for flag in flags[::2]:
        assert flag[2:].replace("-", "_") in metrics, flag


@pytest.mark.one_backend
def test_bigrams_reach_the_saved_model_and_only_order_free_models_take_them(
    tmp_path, capsys
):
    metrics = imdb_attention.main(
        [
            "--smoke",
            "--model",
            "attention",
            "--epochs",
            "1",
            "--verbose",
            "0",
            "--ngrams",
            "2",
            "--output-dir",
            str(tmp_path),
        ]
    )
    assert metrics["ngrams"] == 2
    assert not (tmp_path / "imdb_attention.keras").exists()
    model = keras.saving.load_model(
        str(tmp_path / "imdb_attention_bigrams.keras")
    )
    assert model.preprocessor.ngrams == 2
    assert any(" " in token for token in model.preprocessor.get_vocabulary())
    assert np.isfinite(np.asarray(model.predict(REVIEWS, verbose=0))).all()
    for model_name in ("rnn", "transformer"):
        with pytest.raises(SystemExit):
            imdb_attention.parse_args(["--model", model_name, "--ngrams", "2"])
        assert "reads the words in order" in capsys.readouterr().err


@pytest.mark.one_backend
def test_local_aclimdb_directory_and_glove(tmp_path):
    data = write_aclimdb(tmp_path / "data", per_class=20)
    glove = tmp_path / "glove.txt"
    glove.write_text(
        "".join(
            f"{w} " + " ".join(["0.5"] * 8) + "\n"
            for w in ("film", "wonderful", "awful")
        )
    )
    out = tmp_path / "out"
    metrics = imdb_attention.main(
        [
            "--data-dir",
            data,
            "--model",
            "attention",
            "--epochs",
            "1",
            "--max-length",
            "16",
            "--glove",
            str(glove),
            "--verbose",
            "0",
            "--output-dir",
            str(out),
        ]
    )
    assert {"train_accuracy", "validation_accuracy", "test_accuracy"} <= set(
        metrics
    )
    assert metrics["data"] == data and metrics["glove"] == str(glove)
    assert metrics["parameters"] > 0
    model = keras.saving.load_model(str(out / "imdb_attention.keras"))
    embedding = model.backbone.get_layer("embedding")
    assert embedding.embeddings.shape[1] == 8  # the GloVe size wins


def test_missing_data_dir_exits_with_one_clear_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        imdb_attention.main(
            [
                "--data-dir",
                str(tmp_path / "missing"),
                "--output-dir",
                str(tmp_path),
            ]
        )
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert (
        len(err) == 1
        and "does not exist" in err[0]
        and "Traceback" not in err[0]
    )


def test_defaults_per_model_and_explicit_flags_win():
    for model, length, epochs, window, patience in (
        ("mean", 512, 20, 0, 2),
        ("attention", 512, 20, 0, 2),
        ("rnn", 512, 25, 128, 3),
        ("transformer", 256, 5, 0, 2),
    ):
        args = imdb_attention.parse_args(["--model", model])
        assert (
            args.max_length,
            args.epochs,
            args.train_window,
            args.patience,
        ) == (length, epochs, window, patience), model
    args = imdb_attention.parse_args(
        [
            "--model",
            "rnn",
            "--max-length",
            "100",
            "--epochs",
            "2",
            "--train-window",
            "0",
            "--patience",
            "1",
        ]
    )
    assert (args.max_length, args.epochs, args.train_window, args.patience) == (
        100,
        2,
        0,
        1,
    )
    # A window at least as long as the reviews is the whole review.
    args = imdb_attention.parse_args(
        ["--model", "mean", "--max-length", "64", "--train-window", "64"]
    )
    assert args.train_window == 0
    smoke = imdb_attention.parse_args(["--model", "attention", "--smoke"])
    assert smoke.max_length == imdb_attention.SMOKE["max_length"]
    # One folder per model and backend: runs under the three backends
    # keep their own metrics.json for imdb_results_table.py.
    assert smoke.output_dir.endswith(
        f"attention-{keras.backend.backend()}-smoke"
    )
    args = imdb_attention.parse_args(["--preset", "imdb_query_bigrams"])
    assert (args.model, args.ngrams, args.vocab_size) == ("query", 2, 100000)
    assert imdb_attention.model_name(args) == "imdb_query_bigrams"
    args = imdb_attention.parse_args(
        ["--validation-fold", "3", "--hold-out", "reviews"]
    )
    assert (args.validation_fold, args.hold_out) == (3, "reviews")


def test_model_and_preset_must_agree(capsys):
    with pytest.raises(SystemExit):
        imdb_attention.parse_args(["--model", "rnn", "--preset", "imdb_query"])
    assert "disagree" in capsys.readouterr().err


@pytest.mark.one_backend
def test_train_window_reaches_metrics_and_refuses_ngrams(tmp_path, capsys):
    metrics = imdb_attention.main(
        [
            "--smoke",
            "--model",
            "attention",
            "--epochs",
            "1",
            "--verbose",
            "0",
            "--train-window",
            "8",
            "--output-dir",
            str(tmp_path),
        ]
    )
    assert metrics["train_window"] == 8 and np.isfinite(metrics["train_loss"])
    # The model trained on 8-word windows still reads whole reviews.
    model = keras.saving.load_model(str(tmp_path / "imdb_attention.keras"))
    assert (
        model.preprocessor.sequence_length == imdb_attention.SMOKE["max_length"]
    )
    with pytest.raises(SystemExit):
        imdb_attention.parse_args(
            ["--model", "mean", "--train-window", "8", "--ngrams", "2"]
        )
    assert "--train-window" in capsys.readouterr().err


def test_help_explains_every_flag(capsys):
    with pytest.raises(SystemExit):
        imdb_attention.main(["--help"])
    text = capsys.readouterr().out
    for flag in (
        "--model",
        "--preset",
        "--entropy-weight",
        "--glove",
        "--epochs",
        "--batch-size",
        "--max-length",
        "--embedding-dim",
        "--seed",
        "--output-dir",
        "--smoke",
        "--data-dir",
        "--word-dropout",
        "--query-initializer",
        "--rnn-cell",
        "--rnn-units",
        "--rnn-skip",
        "--num-layers",
        "--num-heads",
        "--intermediate-dim",
        "--validation-fold",
        "--hold-out",
        "--ngrams",
        "--train-window",
        "--patience",
    ):
        assert flag in text, flag


SHIPPED = (
    sorted(
        name
        for name in os.listdir(os.path.join(ROOT, "saved_models"))
        if name.startswith("imdb_") and name.endswith(".keras")
    )
    if os.path.isdir(os.path.join(ROOT, "saved_models"))
    else []
)


@pytest.mark.parametrize("name", SHIPPED or ["imdb_attention.keras"])
def test_shipped_model_predicts_on_raw_strings(name):
    path = os.path.join(ROOT, "saved_models", name)
    assert os.path.exists(path), f"{path} is not committed"
    model = keras.saving.load_model(path)
    positive, negative = np.asarray(model.predict(REVIEWS, verbose=0))[:, 0]
    assert positive > 0.5 > negative
