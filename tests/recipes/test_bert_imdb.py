"""recipes/bert_imdb.py in-process: pretrain + fine-tune under --smoke
(offline), an interrupted pretraining resumed to the same weights, and the
flag and data errors."""

import json

import keras
import numpy as np
import pytest

import zoo  # noqa: F401  (registers the classes for loading)
from recipes import bert_imdb


def test_smoke_pretrains_fine_tunes_and_the_models_load(tmp_path,
                                                         monkeypatch, capsys):
    monkeypatch.setattr(keras.utils, "get_file",
                        lambda *a, **k: pytest.fail("--smoke downloads"))
    result = bert_imdb.main(["all", "--smoke", "--verbose", "0",
                             "--output-dir", str(tmp_path)])
    pretrain, finetune = result["pretrain"], result["finetune"]
    assert np.isfinite(pretrain["validation_mlm_loss"])
    assert 0 <= pretrain["validation_mlm_accuracy"] <= 1
    assert pretrain["tokens_per_second_this_run"] > 0
    assert len(pretrain["history"]["loss"]) == 2
    row = finetune["folds"][0]
    assert 0 <= row["pretrained"] <= 1 and 0 <= row["scratch"] <= 1
    assert row["gain"] == pytest.approx(row["pretrained"] - row["scratch"])
    written = json.loads((tmp_path / "finetune_metrics.json").read_text())
    assert written["pretrained_mean"] == finetune["pretrained_mean"]
    for picture in ("mlm_curves.png", "finetune_curves.png",
                    "head_view.png"):
        assert (tmp_path / picture).read_bytes()[:4] == b"\x89PNG"
    mlm = keras.saving.load_model(tmp_path / "bert_imdb_mlm.keras")
    (candidates,) = mlm.fill_mask("this movie was [MASK] good")
    assert len(candidates) == 5
    classifier = keras.saving.load_model(tmp_path / "imdb_bert.keras")
    probabilities = classifier.predict(
        ["an utterly wonderful film", "a waste of two hours"], verbose=0)
    assert probabilities.shape == (2, 1)

    # A second fine-tuning run with the same settings reuses the finished
    # folds (an interrupted comparison continues where it stopped) ...
    again = bert_imdb.main(["finetune", "--smoke", "--verbose", "0",
                            "--output-dir", str(tmp_path)])
    assert "finished earlier, reused" in capsys.readouterr().out
    assert again["folds"] == finetune["folds"]
    # ... and recomputes them when a setting differs.
    other = bert_imdb.main(["finetune", "--smoke", "--verbose", "0",
                            "--no-scratch", "--output-dir", str(tmp_path)])
    assert "reused" not in capsys.readouterr().out
    assert "scratch" not in other["folds"][0]


def test_an_interrupted_pretraining_resumes_to_the_same_weights(
        tmp_path, monkeypatch):
    class Interrupted(Exception):
        pass

    class StopAfterSecondEpoch(keras.callbacks.BackupAndRestore):
        def on_epoch_end(self, epoch, logs=None):
            super().on_epoch_end(epoch, logs)  # the checkpoint is written
            if epoch == 1:
                raise Interrupted

    def argv(folder, *extra):
        return ["pretrain", "--smoke", "--epochs", "3", "--steps-per-epoch",
                "6", "--verbose", "0", "--output-dir", str(folder), *extra]

    whole = bert_imdb.main(argv(tmp_path / "whole"))
    with monkeypatch.context() as patch:
        patch.setattr(keras.callbacks, "BackupAndRestore",
                      StopAfterSecondEpoch)
        with pytest.raises(Interrupted):
            bert_imdb.main(argv(tmp_path / "cut"))
    # Without --resume an unfinished run is never overwritten.
    with pytest.raises(SystemExit, match="--resume"):
        bert_imdb.main(argv(tmp_path / "cut"))
    resumed = bert_imdb.main(argv(tmp_path / "cut", "--resume"))
    assert resumed["history"]["epochs_this_run"] == 1
    assert len(resumed["history"]["loss"]) == 3  # the whole run's curve
    assert resumed["validation_mlm_loss"] == whole["validation_mlm_loss"]
    a = keras.saving.load_model(tmp_path / "whole" / "bert_imdb_mlm.keras")
    b = keras.saving.load_model(tmp_path / "cut" / "bert_imdb_mlm.keras")
    for x, y in zip(a.weights, b.weights):
        np.testing.assert_array_equal(keras.ops.convert_to_numpy(x),
                                      keras.ops.convert_to_numpy(y))


def test_flags_and_errors(tmp_path, capsys):
    args = bert_imdb.parse_args(["all", "--folds", "2,0"])
    assert args.folds == [0, 2] and args.preset == "cpu_mini"
    assert args.sequence_length == 128 and args.finetune_sequence_length == 256
    for bad in (["finetune", "--folds", "7"], ["finetune", "--folds", "a"],
                ["pretrain", "--sequence-length", "999"]):
        with pytest.raises(SystemExit):
            bert_imdb.parse_args(bad)
        assert "error" in capsys.readouterr().err
    with pytest.raises(SystemExit, match="no pretrained model"):
        bert_imdb.main(["finetune", "--smoke", "--output-dir",
                        str(tmp_path)])
    with pytest.raises(SystemExit) as exit_info:
        bert_imdb.main(["pretrain", "--data-dir", str(tmp_path / "nowhere"),
                        "--output-dir", str(tmp_path)])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and "does not exist" in error[0]
