"""recipes/translate.py in-process: both models under --smoke (offline),
a local Multi30k-layout folder with a test split, the data errors and the
flags."""

import json
import pathlib
import shutil
import zipfile

import keras
import numpy as np
import pytest

import zoo  # noqa: F401  (registers the layers for loading)
from recipes import translate
from tests.data.test_multi30k import write_split
from tests.helpers import run_interrupted_after_first_epoch
from zoo.data.multi30k import make_synthetic_pairs


def local_multi30k(folder, size=200):
    """A Multi30k-layout folder of generated pairs with train, val and test
    splits."""
    german, english = make_synthetic_pairs(size, seed=1)
    folder.mkdir()
    train, val = int(size * 0.8), int(size * 0.9)
    write_split(folder, "train", german[:train], english[:train])
    write_split(folder, "val", german[train:val], english[train:val])
    write_split(folder, "test", german[val:], english[val:])
    return folder


@pytest.fixture(scope="module")
def smoke_runs(tmp_path_factory):
    """`run(model)`: one --smoke training per model, shared by the tests
    that read its files: the transformer on the generated pairs (offline),
    the RNN on a local folder with a test split."""
    done = {}

    def run(model):
        if model not in done:
            folder = tmp_path_factory.mktemp(f"translate_{model}")
            argv = [
                "--smoke",
                "--model",
                model,
                "--epochs",
                "2",
                "--beam",
                "2",
                "--verbose",
                "0",
                "--output-dir",
                str(folder / "out"),
            ]
            if model == "rnn":
                argv += ["--data-dir", str(local_multi30k(folder / "multi30k"))]
            with pytest.MonkeyPatch.context() as patch:
                patch.setattr(
                    keras.utils,
                    "get_file",
                    lambda *a, **k: pytest.fail("--smoke downloads"),
                )
                done[model] = folder / "out", translate.main(argv)
        return done[model]

    return run


@pytest.mark.one_backend
@pytest.mark.parametrize("model", translate.MODELS)
def test_smoke_trains_measures_bleu_and_the_saved_model_translates(
    model, smoke_runs
):
    out, metrics = smoke_runs(model)
    written = json.loads((out / "metrics.json").read_text())
    assert written["validation_bleu"] == metrics["validation_bleu"]
    for key in (
        "validation_bleu_lowercase",
        "bleu_signature",
        "train_seconds",
        "parameters",
        "history",
        "samples",
    ):
        assert key in written, key
    assert written["throughput"]["sentence_pairs_per_second"] > 0
    assert np.isfinite(written["train_loss"])
    if model == "rnn":  # the local folder's test split is measured too
        assert written["data"] != "generated"
        assert "test_bleu" in metrics and "test_bleu_lowercase" in metrics
    else:
        assert written["data"] == "generated"
    for picture in ("training_curves.png", "alignments.png"):
        assert (out / picture).read_bytes()[:4] == b"\x89PNG"
    name = "translate_de_en" + ("_rnn" if model == "rnn" else "")
    loaded = keras.saving.load_model(str(out / f"{name}.keras"))
    # The file keeps the sampler BLEU was measured with (--beam 2).
    assert (loaded.sampler.num_beams, loaded.sampler.length_penalty) == (2, 0.6)
    (translation,) = loaded.generate(["Der Hund spielt im Schnee."])
    assert isinstance(translation, str)


def test_missing_data_is_one_clear_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        translate.main(
            [
                "--data-dir",
                str(tmp_path / "nowhere"),
                "--output-dir",
                str(tmp_path),
            ]
        )
    assert exit_info.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and "does not exist" in error[0]


def test_a_bad_model_file_is_one_clear_line(tmp_path, capsys):
    (tmp_path / "cut.keras").write_bytes(b"PK\x03\x04 half a file")
    shipped_gpt = (
        pathlib.Path(__file__).parents[2]
        / "saved_models"
        / "gpt_shakespeare.keras"
    )
    for path, message in (
        (tmp_path / "none.keras", "no such model file"),
        (tmp_path / "cut.keras", "is truncated"),
        (shipped_gpt, "holds a GPTCausalLM, not a Translator"),
    ):
        with pytest.raises(SystemExit) as exit_info:
            translate.main(
                ["--evaluate", str(path), "--data-dir", str(tmp_path)]
            )
        assert exit_info.value.code == 2
        error = capsys.readouterr().err.strip().splitlines()
        assert len(error) == 1 and message in error[0], error


def test_presets_flags_and_help(capsys):
    args = translate.parse_args(["--model", "rnn"])
    assert args.preset == "rnn_cpu_small" and args.attention == "bahdanau"
    args = translate.parse_args(
        ["--preset", "transformer_base", "--num-layers", "2"]
    )
    assert args.model == "transformer" and args.num_layers == 2
    assert args.hidden_dim == 512 and args.epochs == 20
    # The short names pick the size of --model.
    args = translate.parse_args(["--model", "rnn", "--preset", "base"])
    assert args.preset == "rnn_base" and args.encoder_units == 512
    assert translate.parse_args(["--preset", "cpu-small"]).preset == (
        "transformer_cpu_small"
    )
    overrides = translate.backbone_overrides(
        translate.parse_args(["--dropout", "0.2", "--attention-dropout", "0"])
    )
    assert (
        overrides["backbone_dropout"],
        overrides["backbone_attention_dropout"],
    ) == (0.2, 0.0)
    with pytest.raises(SystemExit):
        translate.parse_args(["--model", "rnn", "--preset", "smoke"])
    assert "disagree" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        translate.main(["--help"])
    text = capsys.readouterr().out
    for flag in (
        "--model",
        "--preset",
        "--data-dir",
        "--epochs",
        "--batch-size",
        "--learning-rate",
        "--schedule",
        "--warmup-steps",
        "--beam",
        "--length-penalty",
        "--seed",
        "--output-dir",
        "--smoke",
        "--num-layers",
        "--hidden-dim",
        "--attention",
        "--vocab-size",
        "--attention-dropout",
    ):
        assert flag in text, flag


@pytest.mark.one_backend
def test_an_interrupted_run_resumes_from_its_last_epoch(tmp_path, monkeypatch):
    argv = [
        "--smoke",
        "--epochs",
        "2",
        "--beam",
        "1",
        "--verbose",
        "0",
        "--output-dir",
        str(tmp_path),
    ]
    run_interrupted_after_first_epoch(monkeypatch, lambda: translate.main(argv))
    assert (tmp_path / "backup").is_dir()
    metrics = translate.main(argv)
    assert metrics["resumed_at_epoch"] == 1
    # The curves cover the whole run, the first epoch from the log the
    # interrupted run left.
    assert len(metrics["history"]["loss"]) == 2
    assert not (tmp_path / "backup").exists()  # removed once all is written


@pytest.mark.one_backend
def test_evaluate_a_saved_model_and_ship_it_with_float16_weights(
    smoke_runs, tmp_path, monkeypatch, capsys
):
    out, _ = smoke_runs("transformer")
    shutil.copy(out / "translate_de_en.keras", tmp_path)
    monkeypatch.setattr(translate, "ROOT", str(tmp_path / "repo"))
    path = str(tmp_path / "translate_de_en.keras")
    metrics = translate.main(
        [
            "--evaluate",
            path,
            "--smoke",
            "--beam",
            "1",
            "--ship",
            "--output-dir",
            str(tmp_path),
        ]
    )
    shipped = tmp_path / "repo" / "saved_models" / "translate_de_en.keras"
    assert shipped.exists()
    assert metrics["shipped"]["megabytes"] < (
        (tmp_path / "translate_de_en.keras").stat().st_size / 1e6
    )
    # Rounded weights, the same translations here.
    assert metrics["shipped"]["validation_bleu"] == pytest.approx(
        metrics["validation_bleu"], abs=1.0
    )
    # Compiled as measured: greedy (--beam 1), the per-token loss.
    with zipfile.ZipFile(shipped) as archive:
        compiled = json.loads(archive.read("config.json"))["compile_config"]
    assert compiled["sampler"]["class_name"] == "GreedySampler"
    assert compiled["loss"]["config"]["reduction"] == "mean_with_sample_weight"
    keras.Sequential([keras.Input((2,))]).save(tmp_path / "other.keras")
    with pytest.raises(SystemExit) as exit_info:
        translate.main(["--evaluate", str(tmp_path / "other.keras"), "--smoke"])
    assert exit_info.value.code == 2
    assert "holds a Sequential, not a Translator" in capsys.readouterr().err


@pytest.mark.one_backend
def test_the_model_is_on_disk_before_bleu_is_measured(tmp_path, monkeypatch):
    class Interrupted(Exception):
        pass

    def interrupted(*args, **kwargs):
        raise Interrupted

    monkeypatch.setattr(translate, "translate_all", interrupted)
    with pytest.raises(Interrupted):
        translate.main(
            [
                "--smoke",
                "--epochs",
                "1",
                "--verbose",
                "0",
                "--output-dir",
                str(tmp_path),
            ]
        )
    saved = keras.saving.load_model(str(tmp_path / "translate_de_en.keras"))
    assert isinstance(saved.generate(["Der Hund spielt."])[0], str)


def test_a_constant_schedule_still_warms_up():
    args = translate.parse_args(
        ["--model", "rnn", "--warmup-steps", "100", "--learning-rate", "0.002"]
    )
    assert args.schedule == "constant"
    schedule = translate.learning_rate(args, steps_per_epoch=10)
    rates = [
        float(keras.ops.convert_to_numpy(schedule(step)))
        for step in (0, 50, 100, 5000)
    ]
    np.testing.assert_allclose(rates, [0.0, 0.001, 0.002, 0.002], rtol=1e-5)
    args = translate.parse_args(["--model", "rnn", "--warmup-steps", "0"])
    assert translate.learning_rate(args, 10) == args.learning_rate


@pytest.mark.one_backend
def test_init_from_a_saved_model_continues_and_averages_epochs(
    smoke_runs, tmp_path, capsys
):
    out, first = smoke_runs("transformer")
    start = out / "translate_de_en.keras"
    metrics = translate.main(
        [
            "--smoke",
            "--init-from",
            str(start),
            "--epochs",
            "2",
            "--average-epochs",
            "2",
            "--schedule",
            "cosine",
            "--warmup-steps",
            "0",
            "--beam",
            "1",
            "--verbose",
            "0",
            "--output-dir",
            str(tmp_path / "more"),
        ]
    )
    assert metrics["init_from"] == str(start)
    assert metrics["averaged_epochs"] == [1, 2]
    # The saved model's vocabulary and architecture, trained further.
    assert metrics["vocabulary_size"] == first["vocabulary_size"]
    assert metrics["parameters"] == first["parameters"]
    assert metrics["history"]["loss"][0] < first["history"]["loss"][0]
    assert "averaged the weights of epochs [1, 2]" in capsys.readouterr().out
    assert not (tmp_path / "more" / "average").exists()  # finish_run
    # An int8 file does not train: one clear line.
    int8 = keras.saving.load_model(str(start))
    translate.quantize_matrices(int8)
    int8.save(tmp_path / "int8.keras")
    with pytest.raises(SystemExit) as exit_info:
        translate.main(
            [
                "--smoke",
                "--init-from",
                str(tmp_path / "int8.keras"),
                "--output-dir",
                str(tmp_path / "int8"),
            ]
        )
    assert exit_info.value.code == 2
    assert "has int8 layers, which do not train" in capsys.readouterr().err
