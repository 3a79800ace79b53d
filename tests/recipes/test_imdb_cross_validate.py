"""recipes/imdb_cross_validate.py in-process on the smoke data: every
(model, fold) runs once, the paired comparison is computed from the runs,
and a second call resumes instead of training again."""

import json

import numpy as np
import pytest

from recipes import imdb_attention, imdb_cross_validate


@pytest.mark.one_backend
def test_cross_validation_compares_each_model_with_the_mean_fold_by_fold(
    tmp_path, monkeypatch
):
    argv = [
        "--smoke",
        "--models",
        "attention",
        "--folds",
        "2",
        "--output-dir",
        str(tmp_path),
        "--",
        "--epochs",
        "1",
    ]
    summary = imdb_cross_validate.main(argv)
    results = summary["results"]
    assert list(results) == ["mean", "attention"]  # the baseline is added
    for model in results:
        for fold in range(2):
            metrics = json.loads(
                (tmp_path / model / f"fold{fold}" / "metrics.json").read_text()
            )
            assert metrics["validation_fold"] == fold and metrics["epochs"] == 1
            assert (
                metrics["validation_accuracy"]
                == results[model]["validation_accuracy"][fold]
            )
    mean = np.array(results["mean"]["validation_accuracy"])
    attention = np.array(results["attention"]["validation_accuracy"])
    s = results["attention"]["summary"]
    assert s["diff_mean"] == pytest.approx(100 * (attention - mean).mean())
    assert s["folds_won"] == int((attention > mean).sum())
    assert "diff_mean" not in results["mean"]["summary"]
    assert (
        json.loads((tmp_path / "summary.json").read_text())["results"]
        == results
    )

    # Nothing is trained again when the runs are there with the same flags.
    monkeypatch.setattr(
        imdb_attention, "main", lambda argv: pytest.fail("re-ran")
    )
    assert imdb_cross_validate.main(argv)["results"] == results


def test_paired_summary_and_table():
    s = imdb_cross_validate.paired_summary(
        [0.90, 0.88, 0.89], [0.89, 0.88, 0.87]
    )
    assert s["mean"] == pytest.approx(89.0) and s["std"] == pytest.approx(1.0)
    assert s["diff_mean"] == pytest.approx(1.0) and s["folds_won"] == 2
    assert s["diff_se"] == pytest.approx(np.std([1, 0, 2], ddof=1) / np.sqrt(3))
    table = imdb_cross_validate.format_table(
        {
            "mean": {
                "validation_accuracy": [0.89, 0.88, 0.87],
                "summary": imdb_cross_validate.paired_summary(
                    [0.89, 0.88, 0.87], None
                ),
            },
            "attention": {
                "validation_accuracy": [0.90, 0.88, 0.89],
                "summary": s,
            },
        },
        3,
    )
    assert (
        "| `attention` | 90.00 | 88.00 | 89.00 | 89.00 ± 1.00 | +1.00 ± 0.58 | 2/3 |"
        in table
    )


def test_too_few_folds_is_an_error():
    with pytest.raises(SystemExit):
        imdb_cross_validate.parse_args(["--folds", "1"])
