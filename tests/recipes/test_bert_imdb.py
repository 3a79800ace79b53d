"""recipes/bert_imdb.py in-process: pretrain + fine-tune under --smoke
(offline), an interrupted pretraining resumed to the same weights, and the
flag and data errors."""

import json
import shutil

import keras
import numpy as np
import pytest

import zoo  # noqa: F401  (registers the classes for loading)
from recipes import bert_imdb
from zoo.callbacks import BackupUntilDone


@pytest.fixture(scope="module")
def smoke_all(tmp_path_factory):
    """One `all --smoke` run (pretraining, then fine-tuning), offline. The
    smoke test below goes on in its folder (a rerun must find the same
    paths); other tests copy the folder before writing into it."""
    folder = tmp_path_factory.mktemp("bert_imdb_smoke")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(
            keras.utils,
            "get_file",
            lambda *a, **k: pytest.fail("--smoke downloads"),
        )
        result = bert_imdb.main(
            [
                "all",
                "--smoke",
                "--verbose",
                "0",
                "--attention-dropout",
                "0",
                "--output-dir",
                str(folder),
            ]
        )
    return folder, result


@pytest.mark.one_backend
def test_smoke_pretrains_fine_tunes_and_the_models_load(smoke_all):
    tmp_path, result = smoke_all
    pretrain, finetune = result["pretrain"], result["finetune"]
    assert np.isfinite(pretrain["validation_mlm_loss"])
    assert 0 <= pretrain["validation_mlm_accuracy"] <= 1
    assert pretrain["throughput"]["tokens_per_second"] > 0
    assert len(pretrain["history"]["loss"]) == 2
    row = finetune["folds"][0]
    assert 0 <= row["pretrained"] <= 1 and 0 <= row["scratch"] <= 1
    assert row["gain"] == pytest.approx(row["pretrained"] - row["scratch"])
    written = json.loads((tmp_path / "finetune_metrics.json").read_text())
    assert written["pretrained_mean"] == finetune["pretrained_mean"]
    for picture in ("mlm_curves.png", "finetune_curves.png", "head_view.png"):
        assert (tmp_path / picture).read_bytes()[:4] == b"\x89PNG"
    mlm = keras.saving.load_model(tmp_path / "bert_imdb_mlm.keras")
    assert mlm.backbone.attention_dropout == pretrain["attention_dropout"] == 0
    (candidates,) = mlm.fill_mask("this movie was [MASK] good")
    assert len(candidates) == 5
    classifier = keras.saving.load_model(tmp_path / "imdb_bert.keras")
    probabilities = classifier.predict(
        ["an utterly wonderful film", "a waste of two hours"], verbose=0
    )
    assert probabilities.shape == (2, 1)


@pytest.mark.one_backend
def test_a_finished_comparison_is_reused_and_a_changed_one_recomputed(
    smoke_all, capsys
):
    tmp_path, result = smoke_all
    finetune = result["finetune"]
    # A second fine-tuning run with the same settings reuses the finished
    # folds (an interrupted comparison continues where it stopped) ...
    again = bert_imdb.main(
        ["finetune", "--smoke", "--verbose", "0", "--output-dir", str(tmp_path)]
    )
    assert "finished earlier, reused" in capsys.readouterr().out
    assert again["folds"] == finetune["folds"]
    # ... and recomputes them when a setting differs.
    other = bert_imdb.main(
        [
            "finetune",
            "--smoke",
            "--verbose",
            "0",
            "--no-scratch",
            "--finetune-truncate",
            "head_tail",
            "--output-dir",
            str(tmp_path),
        ]
    )
    assert "reused" not in capsys.readouterr().out
    assert "scratch" not in other["folds"][0]
    # Head + tail truncation: its own encoded reviews, and the shipped
    # classifier's preprocessor cuts the same way.
    head = (other["sequence_length"] - 2) // 4
    assert other["truncate"] == "head_tail" and other["head_length"] == head
    length = other["sequence_length"]
    assert (tmp_path / f"encoded_{length}_head_tail_{head}.npz").exists()
    classifier = keras.saving.load_model(tmp_path / "imdb_bert.keras")
    assert classifier.preprocessor.truncate == "head_tail"
    assert classifier.preprocessor.head_length == head


@pytest.mark.one_backend
def test_pretraining_stopped_by_its_time_budget_resumes(tmp_path):
    argv = [
        "pretrain",
        "--smoke",
        "--epochs",
        "3",
        "--steps-per-epoch",
        "6",
        "--verbose",
        "0",
        "--output-dir",
        str(tmp_path),
    ]
    stopped = bert_imdb.main(argv + ["--max-minutes", "0.0001"])
    assert stopped["stopped"] and len(stopped["history"]["loss"]) == 1
    assert (tmp_path / "backup").is_dir()  # kept for --resume
    resumed = bert_imdb.main(argv + ["--resume"])
    assert resumed["history"]["epochs_this_run"] == 2
    assert len(resumed["history"]["loss"]) == 3
    assert not (tmp_path / "backup").exists()  # all epochs done


def test_an_interrupted_pretraining_resumes_to_the_same_weights(
    tmp_path, monkeypatch
):
    class Interrupted(Exception):
        pass

    save = BackupUntilDone.on_epoch_end

    def stop_after_second_epoch(self, epoch, logs=None):
        save(self, epoch, logs)  # the checkpoint is written
        if epoch == 1:
            raise Interrupted

    def argv(folder, *extra):
        return [
            "pretrain",
            "--smoke",
            "--epochs",
            "3",
            "--steps-per-epoch",
            "6",
            "--verbose",
            "0",
            "--output-dir",
            str(folder),
            *extra,
        ]

    whole = bert_imdb.main(argv(tmp_path / "whole"))
    with monkeypatch.context() as patch:
        patch.setattr(BackupUntilDone, "on_epoch_end", stop_after_second_epoch)
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
        np.testing.assert_array_equal(
            keras.ops.convert_to_numpy(x), keras.ops.convert_to_numpy(y)
        )


def test_flags_and_errors(tmp_path, capsys):
    args = bert_imdb.parse_args(["all", "--folds", "2,0"])
    assert args.folds == [0, 2] and args.preset == "cpu_mini"
    assert args.sequence_length == 256 and args.finetune_sequence_length == 256
    assert args.batch_size == 128 and args.epochs == 18
    assert args.finetune_truncate == "round_robin"
    args = bert_imdb.parse_args(
        ["finetune", "--finetune-truncate", "head_tail"]
    )
    assert args.finetune_head_length == 63  # a quarter of 254
    for bad in (
        ["finetune", "--folds", "7"],
        ["finetune", "--folds", "a"],
        ["pretrain", "--sequence-length", "999"],
        ["pretrain", "--packed", "x.npz", "--mask-rate", "2"],
        ["pretrain", "--packed", "x.npz", "--mask-rate", "0"],
        ["finetune", "--finetune-head-length", "3"],
        ["finetune", "--finetune-truncate", "head_tail"]
        + ["--finetune-head-length", "300"],
    ):
        with pytest.raises(SystemExit):
            bert_imdb.parse_args(bad)
        assert "error" in capsys.readouterr().err
    with pytest.raises(SystemExit, match="no pretrained model"):
        bert_imdb.main(["finetune", "--smoke", "--output-dir", str(tmp_path)])
    with pytest.raises(SystemExit) as exit_info:
        bert_imdb.main(
            [
                "pretrain",
                "--data-dir",
                str(tmp_path / "nowhere"),
                "--output-dir",
                str(tmp_path),
            ]
        )
    assert exit_info.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and "does not exist" in error[0]
    (tmp_path / "mlm.keras").write_bytes(b"truncated")
    with pytest.raises(SystemExit) as exit_info:
        bert_imdb.main(
            [
                "finetune",
                "--smoke",
                "--pretrained",
                str(tmp_path / "mlm.keras"),
                "--output-dir",
                str(tmp_path),
            ]
        )
    assert exit_info.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and "not a .keras archive" in error[0], error


NO_TENSORFLOW = """
import sys, runpy
sys.modules["tensorflow"] = None       # an install without TensorFlow
sys.modules["tensorflow_text"] = None
sys.argv = ["bert_imdb.py"] + sys.argv[1:]
runpy.run_path("recipes/bert_imdb.py", run_name="__main__")
"""


@pytest.mark.one_backend
def test_packed_corpus_trains_and_fine_tunes_without_tensorflow(
    smoke_all, tmp_path
):
    """The accelerator path: `--prepare-only` packs the text where
    TensorFlow is, then `pretrain --packed` and `finetune` (on the encoded
    reviews a run left) need neither the text nor TensorFlow."""
    import os
    import subprocess
    import sys

    if keras.backend.backend() == "tensorflow":
        pytest.skip("the TensorFlow-free path is for JAX and PyTorch")
    here = tmp_path / "cpu"
    shutil.copytree(smoke_all[0], here)
    result = smoke_all[1]
    packed = bert_imdb.main(
        ["pretrain", "--smoke", "--prepare-only", "--output-dir", str(here)]
    )["packed"]
    with np.load(packed) as corpus:
        assert corpus["train"].shape[1] == 32 and corpus["reviews"] > 0
        vocabulary = corpus["vocabulary"].tolist()
    assert vocabulary == (here / "vocabulary.txt").read_text().split("\n")[:-1]

    there = tmp_path / "accelerator"
    root = os.path.dirname(
        os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    )

    def run(*argv):
        done = subprocess.run(
            [
                sys.executable,
                "-c",
                NO_TENSORFLOW,
                *argv,
                "--smoke",
                "--verbose",
                "0",
            ],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=600,
            env={**os.environ, "PYTHONPATH": root},
        )
        assert done.returncode == 0, done.stderr[-3000:]
        return done.stdout

    out = run("pretrain", "--packed", packed, "--output-dir", str(there))
    assert "RESULT bert_imdb pretrain" in out
    # Fine-tuning reads the reviews encoded by the run above.
    (there / "encoded_64.npz").write_bytes(
        (here / "encoded_64.npz").read_bytes()
    )
    out = run("finetune", "--no-scratch", "--output-dir", str(there))
    assert "RESULT bert_imdb finetune" in out
    mlm = keras.saving.load_model(there / "bert_imdb_mlm.keras")
    assert mlm.preprocessor.tokenizer.get_vocabulary() == vocabulary
    assert result["finetune"]["folds"][0]["pretrained"] >= 0
    # A missing or foreign --packed file is one clear line.
    with pytest.raises(SystemExit, match="no such file"):
        bert_imdb.main(
            [
                "pretrain",
                "--smoke",
                "--packed",
                str(tmp_path / "none.npz"),
                "--output-dir",
                str(tmp_path / "x"),
            ]
        )
    with pytest.raises(SystemExit, match="pieces of 32 tokens"):
        bert_imdb.main(
            [
                "pretrain",
                "--smoke",
                "--packed",
                packed,
                "--sequence-length",
                "16",
                "--output-dir",
                str(tmp_path / "y"),
            ]
        )
