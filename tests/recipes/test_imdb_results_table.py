"""The README's IMDB table printer: one cell per (model, backend), variants left out."""

import json

import pytest

from recipes import imdb_results_table
from zoo.models.text_classifier import QUERY_MAP_SCALE


def _write(root, name, **metrics):
    run = root / name
    run.mkdir()
    base = {
        "model": "attention",
        "backend": "jax",
        "validation_accuracy": 0.8834,
        "train_seconds": 63.4,
        "epochs": 5,
        "argv": [],
    }
    (run / "metrics.json").write_text(json.dumps({**base, **metrics}))


def test_table_has_a_cell_per_model_and_backend_and_skips_variants(
    tmp_path, capsys
):
    _write(tmp_path, "a")
    _write(
        tmp_path, "b", backend="torch", model="mean", validation_accuracy=0.875
    )
    _write(tmp_path, "bigrams", validation_accuracy=0.99, ngrams=2)
    _write(
        tmp_path,
        "reviews",
        validation_accuracy=0.98,
        argv=["--hold-out=reviews"],
        validation_holdout="random reviews (asked for)",
    )
    # The default split asked for by name stays in the table.
    _write(
        tmp_path,
        "movies",
        backend="tensorflow",
        validation_accuracy=0.8768,
        argv=["--hold-out", "movies"],
        validation_holdout="whole movies (from the review ids)",
    )
    _write(tmp_path, "entropy", validation_accuracy=0.97, entropy_weight=-0.1)
    _write(tmp_path, "smoke", validation_accuracy=0.96, smoke=True)
    _write(
        tmp_path,
        "query",
        model="query",
        validation_accuracy=0.8801,
        query_map_scale=0.03,
    )
    _write(
        tmp_path,
        "query_fast",
        model="query",
        backend="torch",
        validation_accuracy=0.95,
        query_map_scale=1.0,
    )
    # Before the maps had a scale, `query` was a different model.
    _write(
        tmp_path,
        "query_old",
        model="query",
        backend="tensorflow",
        validation_accuracy=0.94,
    )
    imdb_results_table.main([str(tmp_path)])
    rows = {
        line.split("|")[1].strip(): line
        for line in capsys.readouterr().out.splitlines()[2:]
    }
    assert "88.34% (63 s, 5 ep)" in rows["`attention`"]
    assert "87.68%" in rows["`attention`"]
    assert "87.50%" in rows["`mean`"] and rows["`mean`"].count("—") == 2
    assert rows["`rnn`"].count("—") == 3
    assert "88.01%" in rows["`query`"] and rows["`query`"].count("—") == 2
    for variant in ("99.00", "98.00", "97.00", "96.00", "95.00", "94.00"):
        assert variant not in "".join(rows.values())


def test_query_map_scale_is_the_models_default():
    assert imdb_results_table.QUERY_MAP_SCALE == QUERY_MAP_SCALE


def test_a_missing_or_empty_folder_is_a_clear_error(tmp_path, capsys):
    for folder in (tmp_path / "nowhere", tmp_path):
        with pytest.raises(SystemExit):
            imdb_results_table.main([str(folder)])
    err = capsys.readouterr().err
    assert "nowhere does not exist" in err
    assert "no finished imdb_attention.py runs" in err
