"""zoo.viz: every plot writes a complete PNG atomically and checks its input."""

import ast
import doctest
import pathlib
import sys

import numpy as np
import pytest

pytest.importorskip("matplotlib")

from zoo import viz

PNG_SIGNATURE = b"\x89PNG"


@pytest.fixture(autouse=True)
def _fresh_keras_state():
    """Override conftest's per-test Keras reset (about 0.5 s a test): zoo.viz
    never touches Keras, so there is no state to reset here."""
    yield


HISTORY = {
    "loss": [0.69, 0.45, 0.33],
    "val_loss": [0.6, 0.42, 0.40],
    "accuracy": [0.55, 0.8, 0.87],
    "val_accuracy": [0.7, 0.82, 0.84],
}


def _reviews():
    return [
        {
            "words": [
                "a",
                "truly",
                "wonderful",
                "film",
                "with",
                "superb",
                "acting",
            ],
            "weights": np.array([0.02, 0.08, 0.4, 0.05, 0.02, 0.38, 0.05]),
            "label": "positive, p=0.97",
        },
        {
            # Unicode, math-like dollars, a very long token; no label.
            "words": ["naïve", "café", "电影", "😀", "$5", "and", "$10"]
            + ["x" * 60],
            "weights": [0.1, 0.2, 0.3, 0.0, 0.1, 0.1, 0.1, 0.1],
        },
    ]


def _caption_items():
    rng = np.random.default_rng(0)
    return [
        {
            "image": rng.integers(0, 256, (24, 32, 3)).astype("uint8"),
            "words": ["a", "dog", "runs", "$x$", "on", "the", "grass"],
            "maps": rng.random((7, 3, 4)),
            "label": "A dog runs on the grass , with a very long reference "
            "caption that wraps .",
        },
        {  # grey floats in [0, 1], a wide canvas, no label
            "image": rng.random((16, 48)),
            "words": ["seven", "two"],
            "maps": np.eye(2, 6).reshape(2, 1, 6),
        },
    ]


# One valid call per plotting function: name -> (function, args before path).
PLOTS = {
    "training_curves": (viz.plot_training_curves, (HISTORY,)),
    "entropy_histograms": (
        viz.plot_entropy_histograms,
        (
            {
                "epoch 1": np.linspace(3, 4, 50),
                "epoch 5": np.linspace(0.5, 3, 50),
            },
        ),
    ),
    "attention_text": (viz.plot_attention_text, (_reviews(),)),
    "top_words": (
        viz.plot_top_words,
        (["great", "awful", "$1"], [0.3, 0.5, 0.1]),
    ),
    "caption_attention": (viz.plot_caption_attention, (_caption_items(),)),
}


def _assert_png(path):
    path = pathlib.Path(path)
    assert path.is_file()
    assert path.read_bytes()[:4] == PNG_SIGNATURE
    assert list(path.parent.glob("*.tmp*")) == []


@pytest.mark.parametrize("name", sorted(PLOTS))
def test_plot_writes_png_and_creates_parent_dir(tmp_path, name):
    function, args = PLOTS[name]
    path = tmp_path / "new" / "dir" / f"{name}.png"
    returned = function(*args, path, title=f"{name} $x$")
    assert returned == str(path)
    _assert_png(path)


@pytest.mark.parametrize("name", sorted(PLOTS))
def test_plot_replaces_an_existing_file(tmp_path, name):
    function, args = PLOTS[name]
    path = tmp_path / f"{name}.png"
    path.write_bytes(b"old contents")
    function(*args, str(path))
    _assert_png(path)


@pytest.mark.parametrize(
    "call",
    [
        lambda path: viz.plot_training_curves({}, path),
        lambda path: viz.plot_entropy_histograms({"epoch 1": []}, path),
        lambda path: viz.plot_attention_text(
            [{"words": ["a", "b"], "weights": [1.0]}], path
        ),
        lambda path: viz.plot_top_words(["a", "b"], [1.0], path),
        lambda path: viz.plot_caption_attention(
            [dict(_caption_items()[1], words=["seven"])], path
        ),
    ],
    ids=[
        "training_curves",
        "entropy_histograms",
        "attention_text",
        "top_words",
        "caption_attention",
    ],
)
def test_bad_input_leaves_an_existing_file_intact(tmp_path, call):
    path = tmp_path / "plot.png"
    path.write_bytes(b"original bytes")
    with pytest.raises(ValueError):
        call(path)
    assert path.read_bytes() == b"original bytes"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plot.png"]


def test_failed_save_leaves_an_existing_file_intact(tmp_path, monkeypatch):
    from matplotlib.figure import Figure

    def broken_savefig(self, fname, **kwargs):
        pathlib.Path(fname).write_bytes(b"half a png")
        raise OSError("disk full")

    monkeypatch.setattr(Figure, "savefig", broken_savefig)
    path = tmp_path / "plot.png"
    path.write_bytes(b"original bytes")
    with pytest.raises(OSError, match="disk full"):
        viz.plot_top_words(["a"], [1.0], path)
    assert path.read_bytes() == b"original bytes"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plot.png"]


# -- training curves ---------------------------------------------------------


@pytest.mark.parametrize(
    "history",
    [
        {"loss": [0.7, 0.5]},  # no validation
        {"val_loss": [0.7, 0.5], "val_accuracy": [0.6, 0.7]},  # validation only
        {
            "loss": [0.7, 0.5, 0.4],
            "val_loss": [0.6],
            "auc": [0.7, 0.8, 0.9],
            "lr": [],
        },
    ],
    ids=["train_only", "val_only", "ragged_and_extra"],
)
def test_training_curves_with_some_keys(tmp_path, history):
    _assert_png(viz.plot_training_curves(history, tmp_path / "curves.png"))


def test_training_curves_accepts_a_history_object(tmp_path):
    class History:
        history = {"loss": [0.5, 0.4]}

    _assert_png(viz.plot_training_curves(History(), tmp_path / "curves.png"))


@pytest.mark.parametrize(
    "history, match",
    [
        ({}, "empty"),
        ({"loss": [], "val_loss": []}, "empty"),
        ([0.5, 0.4], "dict"),
        ({"loss": [[0.5], [0.4]]}, "one-dimensional"),
        ({"loss": ["high", "low"]}, "numbers"),
    ],
)
def test_training_curves_rejects_bad_history(tmp_path, history, match):
    with pytest.raises(ValueError, match=match):
        viz.plot_training_curves(history, tmp_path / "curves.png")
    assert not (tmp_path / "curves.png").exists()


# -- entropy histograms --------------------------------------------------------


@pytest.mark.parametrize(
    "max_entropy",
    [None, np.log(200.0), np.log([50.0, 120.0, 400.0])],
    ids=["none", "scalar", "per_review"],
)
def test_entropy_histograms_reference_line(tmp_path, max_entropy):
    entropies = {
        "epoch 1": [4.0, 4.5, 5.0],
        "epoch 5": np.array([1.0, 2.5, 3.0]),
    }
    path = viz.plot_entropy_histograms(
        entropies, tmp_path / "h.png", max_entropy=max_entropy
    )
    _assert_png(path)


def test_entropy_histograms_with_identical_values(tmp_path):
    _assert_png(
        viz.plot_entropy_histograms({"only": [2.0, 2.0]}, tmp_path / "h.png")
    )


@pytest.mark.parametrize(
    "entropies, kwargs, match",
    [
        ({}, {}, "non-empty"),
        ({"epoch 1": []}, {}, "empty"),
        ({"epoch 1": [1.0, np.nan]}, {}, "NaN"),
        ({"epoch 1": [1.0]}, {"max_entropy": np.nan}, "max_entropy"),
        ({"epoch 1": [1.0]}, {"bins": 0}, "bins"),
    ],
)
def test_entropy_histograms_rejects_bad_input(
    tmp_path, entropies, kwargs, match
):
    with pytest.raises(ValueError, match=match):
        viz.plot_entropy_histograms(entropies, tmp_path / "h.png", **kwargs)


# -- attention text ----------------------------------------------------------


def test_attention_text_truncates_and_wraps_long_reviews(tmp_path):
    words = [f"w{i}" for i in range(500)]
    review = {"words": words, "weights": np.random.default_rng(0).random(500)}
    short = viz.plot_attention_text(
        [review], tmp_path / "short.png", max_words=20
    )
    long = viz.plot_attention_text(
        [review], tmp_path / "long.png", max_words=200, words_per_line=10
    )
    _assert_png(short)
    _assert_png(long)
    # The figure grows with the number of lines: compare PNG heights.
    height = lambda p: int.from_bytes(
        pathlib.Path(p).read_bytes()[20:24], "big"
    )
    assert height(long) > 3 * height(short)


def test_attention_text_handles_all_zero_weights(tmp_path):
    review = {"words": ["a", "b"], "weights": [0.0, 0.0], "label": "neutral"}
    _assert_png(viz.plot_attention_text([review], tmp_path / "z.png"))


@pytest.mark.parametrize(
    "reviews, kwargs, match",
    [
        (
            [{"words": ["a", "b", "c"], "weights": [0.5, 0.5]}],
            {},
            "same length",
        ),
        ([], {}, "non-empty"),
        ([{"words": ["a"]}], {}, "weights"),
        ([{"words": [], "weights": []}], {}, "no words"),
        ([{"words": ["a", "b"], "weights": [0.5, -0.1]}], {}, "negative"),
        ([{"words": ["a"], "weights": [np.inf]}], {}, "NaN or infinite"),
        ([{"words": "ab", "weights": [0.5, 0.5]}], {}, "one string"),
        ([{"words": ["a"], "weights": [1.0]}], {"max_words": 0}, "max_words"),
        (
            [{"words": ["a"], "weights": [1.0]}],
            {"words_per_line": 0},
            "words_per_line",
        ),
    ],
)
def test_attention_text_rejects_bad_input(tmp_path, reviews, kwargs, match):
    with pytest.raises(ValueError, match=match):
        viz.plot_attention_text(reviews, tmp_path / "t.png", **kwargs)


# -- top words ---------------------------------------------------------------


@pytest.mark.parametrize(
    "words, scores, match",
    [
        (["a", "b", "c"], [0.1, 0.2], "same length"),
        ([], [], "empty"),
        (["a"], [np.nan], "NaN"),
    ],
)
def test_top_words_rejects_bad_input(tmp_path, words, scores, match):
    with pytest.raises(ValueError, match=match):
        viz.plot_top_words(words, scores, tmp_path / "top.png")


# -- caption attention ---------------------------------------------------------


def _png_size(path):
    data = pathlib.Path(path).read_bytes()
    return int.from_bytes(data[16:20], "big"), int.from_bytes(
        data[20:24], "big"
    )


def test_caption_attention_wraps_long_captions_onto_more_rows(tmp_path):
    item = _caption_items()[0]
    short = viz.plot_caption_attention(
        [dict(item, words=item["words"][:3], maps=item["maps"][:3])],
        tmp_path / "short.png",
        columns=6,
    )
    long = viz.plot_caption_attention([item], tmp_path / "long.png", columns=3)
    _assert_png(short)
    _assert_png(long)
    (short_width, short_height), (long_width, long_height) = (
        _png_size(short),
        _png_size(long),
    )
    assert long_height > 2.5 * short_height  # 3 rows of panels, not 1
    assert long_width < short_width  # 1 + 3 panels across, not 1 + 6


def test_caption_attention_accepts_one_item_grey_uint8_and_no_words(tmp_path):
    image = np.zeros((28, 56, 1), "uint8")
    image[5:20, 10:20] = 255
    maps = np.zeros((2, 2, 4))
    maps[0, 0, 0] = maps[1, 1, 3] = 1.0
    item = {"image": image, "words": ["one", "<end>"], "maps": maps}
    _assert_png(viz.plot_caption_attention(item, tmp_path / "one.png"))
    _assert_png(
        viz.plot_caption_attention(
            [dict(item, words=[], maps=[])], tmp_path / "none.png"
        )
    )
    _assert_png(
        viz.plot_caption_attention(  # all-zero maps draw no heat
            [dict(item, maps=np.zeros((2, 2, 4)))], tmp_path / "zero.png"
        )
    )


def test_upsampling_is_bilinear_between_cell_centres():
    grid = np.array([[0.0, 1.0]])
    row = viz._upsample_bilinear(grid, 1, 4)[0]
    np.testing.assert_allclose(row, [0.0, 0.25, 0.75, 1.0])
    up = viz._upsample_bilinear(np.arange(6.0).reshape(2, 3), 8, 12)
    assert up.shape == (8, 12)
    assert up.min() == 0.0 and up.max() == 5.0
    assert np.all(np.diff(up, axis=1) >= 0) and np.all(np.diff(up, axis=0) >= 0)


@pytest.mark.parametrize(
    "items, kwargs, match",
    [
        ([], {}, "non-empty"),
        ([{"image": np.zeros((4, 4)), "words": ["a"]}], {}, '"maps"'),
        (
            [
                {
                    "image": np.zeros((4, 4)),
                    "words": ["a", "b"],
                    "maps": np.ones((3, 2, 2)),
                }
            ],
            {},
            "2 words but 3 maps",
        ),
        (
            [
                {
                    "image": np.zeros((4, 4)),
                    "words": ["a"],
                    "maps": np.full((1, 2, 2), np.nan),
                }
            ],
            {},
            "NaN or infinite",
        ),
        (
            [
                {
                    "image": np.zeros((4, 4)),
                    "words": ["a"],
                    "maps": -np.ones((1, 2, 2)),
                }
            ],
            {},
            "negative",
        ),
        (
            [
                {
                    "image": np.zeros((4, 4)),
                    "words": ["a"],
                    "maps": np.ones((1, 4)),
                }
            ],
            {},
            "rows, columns",
        ),
        (
            [
                {
                    "image": np.zeros((4, 4, 2)),
                    "words": ["a"],
                    "maps": np.ones((1, 2, 2)),
                }
            ],
            {},
            "not an",
        ),
        (
            [
                {
                    "image": np.zeros((4, 4)),
                    "words": "ab",
                    "maps": np.ones((2, 2, 2)),
                }
            ],
            {},
            "one string",
        ),
        (
            [
                {
                    "image": np.zeros((4, 4)),
                    "words": ["a"],
                    "maps": np.ones((1, 2, 2)),
                }
            ],
            {"columns": 0},
            "columns",
        ),
    ],
)
def test_caption_attention_rejects_bad_input(tmp_path, items, kwargs, match):
    with pytest.raises(ValueError, match=match):
        viz.plot_caption_attention(items, tmp_path / "c.png", **kwargs)
    assert not (tmp_path / "c.png").exists()


# -- table helper --------------------------------------------------------------


def test_attention_words_table_orders_by_weight_then_position():
    words = ["the", "plot", "was", "dull", "and", "dull"]
    weights = [0.05, 0.2, 0.05, 0.3, 0.1, 0.3]
    assert viz.attention_words_table(words, weights, 4) == [
        ("dull", 0.3),
        ("dull", 0.3),
        ("plot", 0.2),
        ("and", 0.1),
    ]
    table = viz.attention_words_table(words, np.array(weights), 100)
    assert [w for w, _ in table] == [
        "dull",
        "dull",
        "plot",
        "and",
        "the",
        "was",
    ]
    assert all(type(weight) is float for _, weight in table)
    assert viz.attention_words_table(words, weights, 0) == []


@pytest.mark.parametrize(
    "words, weights, top_k, match",
    [
        (["a", "b"], [0.5], 1, "same length"),
        (["a"], [0.5], -1, "top_k"),
        (["a"], [0.5], 1.5, "top_k"),
    ],
)
def test_attention_words_table_rejects_bad_input(words, weights, top_k, match):
    with pytest.raises(ValueError, match=match):
        viz.attention_words_table(words, weights, top_k)


# -- packaging -----------------------------------------------------------------


def test_module_does_not_import_matplotlib_at_import_time():
    tree = ast.parse(pathlib.Path(viz.__file__).read_text(encoding="utf-8"))
    top_level = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            top_level.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            top_level.add(node.module.split(".")[0])
    assert "matplotlib" not in top_level
    assert not top_level & {"keras", "tensorflow", "jax", "torch"}


def test_missing_matplotlib_gives_install_hint(tmp_path, monkeypatch):
    for name in [
        m
        for m in sys.modules
        if m == "matplotlib" or m.startswith("matplotlib.")
    ]:
        monkeypatch.setitem(sys.modules, name, None)
    with pytest.raises(
        ImportError, match=r'pip install "attention-zoo\[viz\]"'
    ):
        viz.plot_top_words(["a"], [1.0], tmp_path / "top.png")
    assert not (tmp_path / "top.png").exists()


def test_docstring_examples():
    result = doctest.testmod(viz, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0


def test_plot_alignments_writes_one_panel_per_sentence(tmp_path):
    from zoo.viz import plot_alignments

    weights = np.full((3, 4), 0.25)
    items = [
        {
            "source_tokens": ["▁Zwei", "▁Hunde", "▁spielen", "."],
            "target_tokens": ["<s>", "▁Two", "▁dogs"],
            "weights": weights,
            "title": "one",
        }
    ] * 2
    path = plot_alignments(items, tmp_path / "a.png", title="alignments")
    assert open(path, "rb").read(4) == b"\x89PNG"
    with pytest.raises(ValueError, match="empty"):
        plot_alignments([], tmp_path / "b.png")
    with pytest.raises(ValueError, match="shape"):
        plot_alignments(
            [dict(items[0], weights=np.ones((2, 4)))], tmp_path / "c.png"
        )
    with pytest.raises(ValueError, match="NaN"):
        plot_alignments(
            [dict(items[0], weights=np.full((3, 4), np.nan))],
            tmp_path / "d.png",
        )


def test_rollout_grid_and_position_similarity_pictures(tmp_path):
    from zoo import viz

    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (3, 8, 8)).astype("uint8")
    maps = rng.uniform(size=(3, 2, 2))
    path = viz.plot_rollout_grid(
        images,
        maps,
        tmp_path / "rollout.png",
        titles=["1 -> 1", "2 -> 3", "0 -> 0"],
        title="rollout",
    )
    assert open(path, "rb").read(4) == b"\x89PNG"
    with pytest.raises(ValueError):
        viz.plot_rollout_grid(images, maps[:2], tmp_path / "bad.png")
    table = rng.normal(size=(1 + 9, 4))
    path = viz.plot_position_similarity(
        table, (3, 3), tmp_path / "positions.png"
    )
    assert open(path, "rb").read(4) == b"\x89PNG"
    with pytest.raises(ValueError, match="positions for a 2 x 2 grid"):
        viz.plot_position_similarity(table, (2, 2), tmp_path / "bad.png")
