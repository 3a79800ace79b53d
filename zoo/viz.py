"""Plots for the recipes: training curves, attention entropy, attention
weights over review text, the most-attended words, translation
alignments, vision-transformer attention and where a captioner looked for
each word.

Every function takes plain Python / NumPy data (no tensors, no Keras objects
beyond the dict in `History.history`) and writes one PNG file:

* the parent directory is created if missing;
* the image is rendered to a temporary file next to `path` and moved over
  `path` with `os.replace`, so `path` is either the old file or the complete
  new one, never a half-written image (bad input raises `ValueError` before
  anything is written);
* the path written is returned as a string.

Rendering uses matplotlib's object-oriented API with the non-interactive Agg
canvas (`matplotlib.figure.Figure` + `FigureCanvasAgg`), never `pyplot`: no
display is needed, no global backend is switched (so calling these from a
notebook leaves its inline figures alone) and no figure stays registered
after the call. matplotlib is imported only when a plot is drawn, so
`import zoo.viz` works without it; install it with
`pip install "attention-zoo[viz]"`.

Example:

>>> from zoo import viz
>>> history = {"loss": [0.6, 0.4], "val_loss": [0.5, 0.45]}
>>> viz.plot_training_curves(history, "plots/curves.png")  # doctest: +SKIP
'plots/curves.png'
>>> viz.attention_words_table(["a", "great", "film"], [0.1, 0.7, 0.2], 2)
[('great', 0.7), ('film', 0.2)]
"""

import math
import numbers
import os
import unicodedata
import warnings
from collections.abc import Mapping

import numpy as np

from zoo.saving import atomic_path

__all__ = [
    "attention_words_table",
    "plot_alignments",
    "plot_attention_text",
    "plot_caption_attention",
    "plot_entropy_histograms",
    "plot_top_words",
    "plot_training_curves",
]

_INSTALL_HINT = 'zoo.viz needs matplotlib: pip install "attention-zoo[viz]"'
_DPI = 150
_MONO_FONT = "DejaVu Sans Mono"  # ships with matplotlib, so always present
_MONO_ADVANCE = 0.6  # advance width of one DejaVu Sans Mono cell, in em
_ELLIPSIS = "\u2026"


# --------------------------------------------------------------------------
# matplotlib plumbing


def _new_figure(width, height):
    """A `Figure` on an Agg canvas (no pyplot, no global backend change)."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as err:
        raise ImportError(_INSTALL_HINT) from err
    fig = Figure(figsize=(width, height), dpi=_DPI)
    FigureCanvasAgg(fig)
    return fig


def _colormap(name):
    import matplotlib

    return matplotlib.colormaps[name]


def _save(fig, path):
    """Write `fig` to `path` as PNG atomically; return `path` as a string."""
    path = os.fspath(path)
    if not path:
        raise ValueError("path is empty")
    try:
        with (
            atomic_path(path, suffix=".tmp.png") as tmp,
            warnings.catch_warnings(),
        ):
            # Words outside the font (CJK, emoji) render as boxes; that is
            # expected, not worth one warning per character.
            warnings.filterwarnings(
                "ignore", message=r"Glyph \d+ .*missing from"
            )
            fig.savefig(tmp, format="png", dpi=_DPI)
    finally:
        fig.clear()  # drop artists now; the figure is not registered anywhere
    return path


# --------------------------------------------------------------------------
# input checks


def _as_1d_floats(values, what, allow_empty=False):
    try:
        array = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise ValueError(
            f"{what} must be a sequence of numbers ({err})"
        ) from None
    if array.ndim != 1:
        raise ValueError(
            f"{what} must be one-dimensional, got shape {array.shape}"
        )
    if not allow_empty and array.size == 0:
        raise ValueError(f"{what} is empty")
    return array


def _check_finite(array, what):
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{what} contains NaN or infinite values")
    return array


def _check_words(words, what):
    if isinstance(words, str):
        raise ValueError(
            f"{what} must be a sequence of strings, not one string"
        )
    try:
        return [str(word) for word in words]
    except TypeError:
        raise ValueError(f"{what} must be a sequence of strings") from None


def _set_title(fig, title):
    if title:
        fig.suptitle(str(title), parse_math=False)


# --------------------------------------------------------------------------
# 1. training curves


def plot_training_curves(history, path, title=None):
    """Plot training and validation curves, one panel per metric.

    Args:
        history: dict mapping a metric name to its per-epoch values, as in
            Keras `History.history`, e.g. `{"loss": [...], "val_loss": [...],
            "accuracy": [...], "val_accuracy": [...]}` (a `History` object is
            accepted too). `name` and `val_name` share a panel (train solid,
            validation dashed); "loss" comes first, other metrics follow in
            the dict's order. Any subset works (no validation, validation
            only, extra metrics); keys with no values are skipped. Curves may
            differ in length (e.g. `validation_freq`); each starts at epoch 1.
        path: the PNG file to write.
        title: optional figure title.

    Returns:
        `path`, as a string.

    Raises:
        ValueError: `history` is not a dict, has no values at all, or has
            values that are not one-dimensional sequences of numbers.
    """
    history = getattr(history, "history", history)
    if not isinstance(history, Mapping):
        raise ValueError(
            f"history must be a dict like History.history, got {type(history).__name__}"
        )
    families = {}  # metric name -> {"train": array, "val": array}
    for key, values in history.items():
        key = str(key)
        series = _as_1d_floats(values, f"history[{key!r}]", allow_empty=True)
        if series.size == 0:
            continue
        split, name = (
            ("val", key[4:]) if key.startswith("val_") else ("train", key)
        )
        families.setdefault(name, {})[split] = series
    if not families:
        raise ValueError("history is empty: no metric has any values")
    names = sorted(
        families, key=lambda name: name != "loss"
    )  # stable: loss first

    ncols = min(len(names), 3)
    nrows = math.ceil(len(names) / ncols)
    fig = _new_figure(4.2 * ncols, 3.2 * nrows + (0.4 if title else 0.0))
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    from matplotlib.ticker import MaxNLocator

    for ax, name in zip(axes, names):
        for split, style in (("train", "-"), ("val", "--")):
            series = families[name].get(split)
            if series is None:
                continue
            epochs = np.arange(1, series.size + 1)
            label = "train" if split == "train" else "validation"
            ax.plot(
                epochs, series, style, marker="o", markersize=3, label=label
            )
        ax.set_title(name, parse_math=False)
        ax.set_xlabel("epoch")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    for ax in axes[len(names) :]:
        ax.set_visible(False)
    _set_title(fig, title)
    fig.tight_layout()
    return _save(fig, path)


# --------------------------------------------------------------------------
# 2. entropy histograms


def plot_entropy_histograms(
    entropies_by_label, path, max_entropy=None, title=None, bins=40
):
    """Overlay histograms of per-review attention entropy (in nats).

    Args:
        entropies_by_label: ordered dict `{label: entropies}`, e.g.
            `{"epoch 1": array, "epoch 5": array}`, one 1-D array of
            per-review entropies per label, drawn in that order on shared
            bins. The legend gives each label's median.
        path: the PNG file to write.
        max_entropy: optional reference for uniform attention, `log n` for
            `n` attended tokens: a number, or a 1-D array of per-review
            `log n` (its median is drawn). Shown as a dashed vertical line
            labelled "uniform (log n)".
        title: optional figure title.
        bins: number of shared histogram bins.

    Returns:
        `path`, as a string.

    Raises:
        ValueError: no labels, an empty or non-finite array, a
            `max_entropy` that is not finite, or `bins` < 1.
    """
    if not isinstance(entropies_by_label, Mapping) or not entropies_by_label:
        raise ValueError(
            "entropies_by_label must be a non-empty dict {label: entropies}"
        )
    if not isinstance(bins, numbers.Integral) or bins < 1:
        raise ValueError(f"bins must be a positive integer, got {bins!r}")
    series = {}
    for label, values in entropies_by_label.items():
        what = f"entropies_by_label[{label!r}]"
        series[str(label)] = _check_finite(_as_1d_floats(values, what), what)

    line, line_label = None, "uniform (log n)"
    if max_entropy is not None:
        reference = np.asarray(max_entropy, dtype=np.float64)
        if reference.ndim == 0:
            line = float(reference)
        else:
            reference = _as_1d_floats(reference.ravel(), "max_entropy")
            line = float(np.median(reference))
            line_label = "uniform (log n), median"
        if not math.isfinite(line):
            raise ValueError("max_entropy contains NaN or infinite values")

    everything = np.concatenate(list(series.values()))
    low, high = float(everything.min()), float(everything.max())
    if line is not None:
        low, high = min(low, line), max(high, line)
    if high - low < 1e-9:  # all equal: give the single bar some width
        low, high = low - 0.5, high + 0.5
    edges = np.linspace(low, high, int(bins) + 1)

    fig = _new_figure(7.0, 4.2)
    ax = fig.add_subplot()
    for label, values in series.items():
        ax.hist(
            values,
            bins=edges,
            alpha=0.45,
            histtype="stepfilled",
            label=f"{label} (median {np.median(values):.2f})",
        )
    # Opaque outlines in the same colours keep overlapping histograms readable.
    for patch in ax.patches:
        patch.set_edgecolor(patch.get_facecolor()[:3] + (1.0,))
        patch.set_linewidth(1.2)
    if line is not None:
        ax.axvline(
            line, color="black", linestyle="--", linewidth=1.2, label=line_label
        )
    ax.set_xlabel("attention entropy (nats)")
    ax.set_ylabel("reviews")
    ax.grid(alpha=0.3)
    for text in ax.legend(fontsize="small").get_texts():
        text.set_parse_math(False)
    _set_title(fig, title)
    fig.tight_layout()
    return _save(fig, path)


# --------------------------------------------------------------------------
# 3. attention over text


def _cell_width(text):
    """Width of `text` in monospace cells (wide CJK = 2, combining marks = 0)."""
    width = 0
    for char in text:
        if unicodedata.combining(char):
            continue
        width += 2 if unicodedata.east_asian_width(char) in "WF" else 1
    return width


def _clip(text, cells):
    """`text` cut to at most `cells` cells, ending in an ellipsis if cut."""
    if _cell_width(text) <= cells:
        return text
    out, width = "", 0
    for char in text:
        step = _cell_width(char)
        if width + step > cells - 1:
            break
        out, width = out + char, width + step
    return out + _ELLIPSIS


def _wrap(words, words_per_line, line_cells):
    """Greedy wrap: at most `words_per_line` words and `line_cells` cells a line."""
    lines, line, used = [], [], 0
    for word in words:
        width = max(_cell_width(word), 1)
        needed = width if not line else used + 1 + width
        if line and (len(line) >= words_per_line or needed > line_cells):
            lines.append(line)
            line, needed = [], width
        line.append(word)
        used = needed
    if line:
        lines.append(line)
    return lines


def plot_attention_text(
    reviews, path, title=None, max_words=120, words_per_line=14
):
    """Draw reviews as text, each word shaded by its attention weight.

    Each review gets its label on one line, then its words wrapped onto lines
    of at most `words_per_line` words. A word's background is a "Reds" shade
    proportional to its weight divided by the review's largest weight (so
    the most attended word of every review is the darkest). Layout is on a
    fixed monospace grid (DejaVu Sans Mono, position by character count), so
    it is fast and deterministic; characters the font lacks (e.g. CJK, emoji)
    draw as boxes but keep their place. The figure grows with the number of
    lines.

    Args:
        reviews: list of dicts, one per review, with keys
            `"words"`: list of strings (tokens, in order);
            `"weights"`: 1-D array of non-negative attention weights, same
            length as `"words"`;
            `"label"` (optional): text shown above the review, e.g.
            `"positive, p=0.97"`; defaults to "review i".
        path: the PNG file to write.
        title: optional figure title.
        max_words: words shown per review; longer reviews are cut and end
            with "…" (shading still uses the whole review's largest weight).
        words_per_line: the most words on one line (a line also breaks
            before it would get wider than about `7 * words_per_line`
            characters, and single words longer than 30 characters are cut).

    Returns:
        `path`, as a string.

    Raises:
        ValueError: no reviews, a review without "words"/"weights", lengths
            that differ, an empty review, negative or non-finite weights, or
            `max_words` / `words_per_line` < 1.
    """
    if isinstance(reviews, Mapping):
        reviews = [reviews]
    if not isinstance(reviews, (list, tuple)) or not reviews:
        raise ValueError("reviews must be a non-empty list of dicts")
    for name, value in (
        ("max_words", max_words),
        ("words_per_line", words_per_line),
    ):
        if not isinstance(value, numbers.Integral) or value < 1:
            raise ValueError(
                f"{name} must be a positive integer, got {value!r}"
            )

    line_cells = max(7 * int(words_per_line), 40)
    word_cells = min(30, line_cells)
    blocks = []  # (label, lines of (word, intensity)), intensity None = no box
    for index, review in enumerate(reviews):
        where = f"reviews[{index}]"
        if (
            not isinstance(review, Mapping)
            or "words" not in review
            or "weights" not in review
        ):
            raise ValueError(
                f'{where} must be a dict with "words" and "weights"'
            )
        words = _check_words(review["words"], f'{where}["words"]')
        weights = _check_finite(
            _as_1d_floats(
                review["weights"], f'{where}["weights"]', allow_empty=True
            ),
            f'{where}["weights"]',
        )
        if len(words) != weights.size:
            raise ValueError(
                f"{where}: {len(words)} words but {weights.size} weights; "
                "they must have the same length"
            )
        if not words:
            raise ValueError(f"{where} has no words")
        if np.any(weights < 0):
            raise ValueError(f'{where}["weights"] has negative values')
        top = float(weights.max())
        intensity = weights / top if top > 0 else np.zeros_like(weights)
        cells = [
            (_clip(word, word_cells), float(x))
            for word, x in zip(words[:max_words], intensity[:max_words])
        ]
        if len(words) > max_words:
            cells.append((_ELLIPSIS, None))
        by_word = dict(enumerate(cells))
        # Wrap on positions so repeated words keep their own intensity.
        lines = _wrap([word for word, _ in cells], words_per_line, line_cells)
        positioned, cursor = [], 0
        for line in lines:
            positioned.append([by_word[cursor + i] for i in range(len(line))])
            cursor += len(line)
        label = review.get("label")
        label = f"review {index + 1}" if label is None else str(label)
        blocks.append((_clip(label, line_cells), positioned))

    # Grid: x in character cells, y in rows (0 at the top).
    fontsize = 10.0
    cell_in = fontsize * _MONO_ADVANCE / 72.0
    row_in = fontsize * 1.9 / 72.0
    margin = 1.5  # cells left and right
    title_rows = 1.6 if title else 0.4
    rows = title_rows + sum(1 + len(lines) + 0.7 for _, lines in blocks)
    width_cells = line_cells + 2 * margin
    fig = _new_figure(width_cells * cell_in, rows * row_in)
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, width_cells)
    ax.set_ylim(rows, 0)
    ax.set_axis_off()

    from matplotlib.collections import PatchCollection
    from matplotlib.patches import Rectangle

    cmap = _colormap("Reds")
    boxes, colours = [], []
    text_style = dict(
        fontfamily=_MONO_FONT,
        fontsize=fontsize,
        va="center",
        ha="left",
        parse_math=False,
    )
    if title:
        ax.text(
            width_cells / 2,
            0.8,
            str(title),
            ha="center",
            va="center",
            fontsize=fontsize * 1.3,
            fontweight="bold",
            parse_math=False,
        )
    y = title_rows
    for label, lines in blocks:
        ax.text(margin, y + 0.5, label, fontweight="bold", **text_style)
        y += 1
        for line in lines:
            x = margin
            for word, level in line:
                width = max(_cell_width(word), 1)
                if level is not None:
                    boxes.append(
                        Rectangle((x - 0.3, y + 0.1), width + 0.6, 0.8)
                    )
                    # Cap at 0.85: the darkest Reds are nearly black.
                    colours.append(cmap(0.85 * level))
                dark = level is not None and level > 0.6
                ax.text(
                    x,
                    y + 0.5,
                    word,
                    color="white" if dark else "black",
                    **text_style,
                )
                x += width + 1
            y += 1
        y += 0.7
    if boxes:
        ax.add_collection(
            PatchCollection(
                boxes, facecolors=colours, edgecolors="none", zorder=0
            )
        )
    return _save(fig, path)


# --------------------------------------------------------------------------
# 4. top words


def plot_top_words(
    words, scores, path, title=None, xlabel="mean attention weight"
):
    """Horizontal bar chart of words and scores, highest score at the top.

    Args:
        words: list of strings (e.g. the most attended vocabulary words).
        scores: 1-D array of numbers, one per word (e.g. the mean attention
            weight each word received). Bars are sorted by score, highest
            first (ties keep input order), and labelled with their value.
        path: the PNG file to write.
        title: optional figure title.
        xlabel: label of the score axis.

    Returns:
        `path`, as a string.

    Raises:
        ValueError: `words` and `scores` differ in length, are empty, or the
            scores are not finite numbers.
    """
    words = _check_words(words, "words")
    scores = _check_finite(
        _as_1d_floats(scores, "scores", allow_empty=True), "scores"
    )
    if len(words) != scores.size:
        raise ValueError(
            f"{len(words)} words but {scores.size} scores; they must have the same length"
        )
    if not words:
        raise ValueError("words and scores are empty")
    order = sorted(range(len(words)), key=lambda i: (-scores[i], i))
    labels = [_clip(words[i], 30) for i in order]
    values = scores[order]

    fig = _new_figure(6.5, 1.2 + 0.28 * len(words) + (0.3 if title else 0.0))
    ax = fig.add_subplot()
    positions = np.arange(len(words))
    bars = ax.barh(positions, values, color=_colormap("Reds")(0.6))
    ax.set_yticks(positions)
    ax.set_yticklabels(labels, parse_math=False)
    ax.invert_yaxis()  # first (highest) at the top
    ax.bar_label(bars, fmt="%.3g", padding=2, fontsize="small")
    ax.set_xlabel(str(xlabel), parse_math=False)
    ax.margins(x=0.12)
    ax.grid(axis="x", alpha=0.3)
    _set_title(fig, title)
    fig.tight_layout()
    return _save(fig, path)


# --------------------------------------------------------------------------
# 5. alignment heatmaps (translation)


def plot_alignments(alignments, path, title=None):
    """Heatmaps of attention from generated words (rows) to source words
    (columns), the a_ij of the course, one panel per sentence.

    Args:
        alignments: a list of dicts with `source_tokens` (strings),
            `target_tokens` (strings) and `weights` `(target_len,
            source_len)` (rows sum to about 1), e.g. `Translator.alignments`
            (its "mean"), and an optional `title`.
        path: the PNG file to write.
        title: optional figure title.

    Returns:
        `path`, as a string.

    Raises:
        ValueError: no alignment, or weights whose shape does not match the
            tokens, or that are not finite.
    """
    if not alignments:
        raise ValueError("alignments is empty")
    panels = []
    for i, item in enumerate(alignments):
        source = _check_words(item["source_tokens"], f"alignment {i} source")
        target = _check_words(item["target_tokens"], f"alignment {i} target")
        weights = np.asarray(item["weights"], dtype=np.float64)
        if weights.shape != (len(target), len(source)):
            raise ValueError(
                f"alignment {i}: weights of shape {weights.shape} for "
                f"{len(target)} target and {len(source)} source tokens"
            )
        _check_finite(weights, f"alignment {i} weights")
        panels.append((source, target, weights, item.get("title")))
    width = max(4.0, 0.32 * max(len(p[0]) for p in panels) + 2.0)
    heights = [max(2.0, 0.3 * len(p[1]) + 1.4) for p in panels]
    fig = _new_figure(width, sum(heights) + (0.4 if title else 0.0))
    axes = fig.subplots(
        len(panels), 1, squeeze=False, gridspec_kw={"height_ratios": heights}
    )[:, 0]
    for ax, (source, target, weights, panel_title) in zip(axes, panels):
        ax.imshow(
            weights,
            cmap=_colormap("Blues"),
            vmin=0.0,
            vmax=max(float(weights.max()), 1e-6),
            aspect="auto",
        )
        ax.set_xticks(range(len(source)))
        ax.set_xticklabels(
            [_clip(t, 12) for t in source],
            rotation=90,
            fontsize="small",
            parse_math=False,
        )
        ax.set_yticks(range(len(target)))
        ax.set_yticklabels(
            [_clip(t, 12) for t in target], fontsize="small", parse_math=False
        )
        if panel_title:
            ax.set_title(str(panel_title), fontsize="small", parse_math=False)
    _set_title(fig, title)
    fig.tight_layout()
    return _save(fig, path)


# --------------------------------------------------------------------------
# 6. table helper


def attention_words_table(words, weights, top_k):
    """The `top_k` most attended words of one review, for printing.

    Args:
        words: list of strings, the review's tokens in order.
        weights: 1-D array of attention weights, same length as `words`.
        top_k: how many rows to return (all of them if the review is
            shorter; 0 gives an empty list).

    Returns:
        A list of `(word, weight)` tuples, highest weight first; equal
        weights keep their order in the review. Weights are Python floats.

    Raises:
        ValueError: lengths differ, weights are not finite numbers, or
            `top_k` is negative or not an integer.

    Example:

    >>> attention_words_table(["a", "great", "film"], [0.1, 0.7, 0.2], 2)
    [('great', 0.7), ('film', 0.2)]
    """
    words = _check_words(words, "words")
    weights = _check_finite(
        _as_1d_floats(weights, "weights", allow_empty=True), "weights"
    )
    if len(words) != weights.size:
        raise ValueError(
            f"{len(words)} words but {weights.size} weights; they must have the same length"
        )
    if (
        isinstance(top_k, bool)
        or not isinstance(top_k, numbers.Integral)
        or top_k < 0
    ):
        raise ValueError(f"top_k must be a non-negative integer, got {top_k!r}")
    order = sorted(range(len(words)), key=lambda i: (-weights[i], i))[
        : int(top_k)
    ]
    return [(words[i], float(weights[i])) for i in order]


# --------------------------------------------------------------------------
# 7. vision transformer pictures


def plot_rollout_grid(images, maps, path, titles=None, title=None):
    """Images with their attention-rollout maps laid over them, in a grid.

    Args:
        images: `(n, H, W)` or `(n, H, W, C)` images (uint8 or floats in
            [0, 255] or [0, 1]).
        maps: `(n, rows, columns)` rollout of each image over its patch grid
            (`ViTImageClassifier.rollout_maps`); upsampled to the image.
        path: the PNG file to write.
        titles: optional caption per image (e.g. "7 -> 7").
        title: optional figure title.

    Returns:
        `path`, as a string.
    """
    images = np.asarray(images)
    maps = np.asarray(maps, dtype=np.float64)
    if len(images) == 0 or len(images) != len(maps):
        raise ValueError(f"{len(images)} images and {len(maps)} maps")
    _check_finite(maps, "rollout maps")
    count = len(images)
    columns = min(count, 8)
    rows = -(-count // columns)
    fig = _new_figure(1.6 * columns, 1.75 * rows + (0.4 if title else 0.0))
    axes = fig.subplots(rows, columns, squeeze=False)
    for index, ax in enumerate(axes.ravel()):
        ax.set_axis_off()
        if index >= count:
            continue
        image = images[index].astype(np.float64)
        if image.max() > 1.0:
            image = image / 255.0
        if image.ndim == 3 and image.shape[-1] == 1:
            image = image[..., 0]
        height, width = image.shape[:2]
        grid = maps[index]
        heat = np.kron(
            grid, np.ones((height // grid.shape[0], width // grid.shape[1]))
        )
        ax.imshow(
            image,
            cmap=_colormap("gray") if image.ndim == 2 else None,
            vmin=0.0,
            vmax=1.0,
        )
        ax.imshow(
            heat,
            cmap=_colormap("inferno"),
            alpha=0.5,
            vmin=0.0,
            vmax=max(float(heat.max()), 1e-9),
        )
        if titles is not None:
            ax.set_title(str(titles[index]), fontsize="small", parse_math=False)
    _set_title(fig, title)
    fig.tight_layout()
    return _save(fig, path)


def plot_image_grid(
    rows, path, row_titles=None, column_titles=None, title=None
):
    """Grey images in a grid, one list of images per row (ImageGPT's
    completions: the original, the kept rows, then samples).

    Args:
        rows: a list of rows, each a list (or array) of `(H, W)` images,
            uint8 or floats on [0, 255]; rows may differ in length.
        path: the PNG file to write.
        row_titles: optional label per row (left of it).
        column_titles: optional title per column (above the first row).
        title: optional figure title.

    Returns:
        `path`, as a string.

    Example:

    >>> digits = np.zeros((2, 3, 14, 14), "uint8")
    >>> plot_image_grid(digits, "/tmp/grid.png", ["a", "b"])
    '/tmp/grid.png'
    """
    rows = [[np.asarray(image, np.float64) for image in row] for row in rows]
    if not rows or not any(rows):
        raise ValueError("plot_image_grid needs at least one image.")
    for row in rows:
        for image in row:
            if image.ndim != 2:
                raise ValueError(
                    f"images must be (H, W) grey images; got shape {image.shape}."
                )
            _check_finite(image, "images")
    columns = max(len(row) for row in rows)
    fig = _new_figure(
        1.1 * columns + (0.9 if row_titles else 0.0),
        1.15 * len(rows)
        + (0.4 if title else 0.0)
        + (0.3 if column_titles else 0.0),
    )
    axes = fig.subplots(len(rows), columns, squeeze=False)
    for r, row in enumerate(rows):
        for c, ax in enumerate(axes[r]):
            ax.set_xticks([])
            ax.set_yticks([])
            if c >= len(row):
                ax.set_axis_off()
                continue
            ax.imshow(row[c], cmap=_colormap("gray"), vmin=0.0, vmax=255.0)
            if r == 0 and column_titles is not None and c < len(column_titles):
                ax.set_title(str(column_titles[c]), fontsize="small")
        if row_titles is not None and r < len(row_titles):
            axes[r][0].set_ylabel(str(row_titles[r]), fontsize="small")
    _set_title(fig, title)
    fig.tight_layout()
    return _save(fig, path)


def plot_position_similarity(
    table, grid_size, path, num_prefix_tokens=1, title=None
):
    """Cosine similarity of each patch's learned position to every other's
    (the ViT paper's figure 7): one small map per patch, laid out as the
    patch grid.

    Args:
        table: `(num_prefix_tokens + rows * columns, dim)` position vectors.
        grid_size: `(rows, columns)` of patches.
        path: the PNG file to write.
        num_prefix_tokens: rows before the grid (the class token's).
        title: optional figure title.

    Returns:
        `path`, as a string.
    """
    rows, columns = (int(n) for n in grid_size)
    table = np.asarray(table, dtype=np.float64)[num_prefix_tokens:]
    if table.shape[0] != rows * columns:
        raise ValueError(
            f"{table.shape[0]} positions for a {rows} x {columns} grid"
        )
    _check_finite(table, "positions")
    unit = table / np.maximum(
        np.linalg.norm(table, axis=1, keepdims=True), 1e-12
    )
    similarity = unit @ unit.T
    fig = _new_figure(
        0.45 * columns + 0.6, 0.45 * rows + 0.6 + (0.4 if title else 0.0)
    )
    axes = fig.subplots(rows, columns, squeeze=False)
    for index, ax in enumerate(axes.ravel()):
        ax.set_axis_off()
        ax.imshow(
            similarity[index].reshape(rows, columns),
            cmap=_colormap("viridis"),
            vmin=-1.0,
            vmax=1.0,
        )
    _set_title(fig, title)
    fig.tight_layout(pad=0.2)
    return _save(fig, path)


# --------------------------------------------------------------------------
# 8. image captioning (Show, Attend and Tell)


def _upsample_bilinear(grid, height, width):
    """`grid` `(rows, columns)` resampled to `(height, width)` bilinearly,
    each value at its cell's centre (edges held constant), as
    `align_corners=False` resizing does."""
    rows, columns = grid.shape

    def positions(size, cells):
        where = np.clip(
            (np.arange(size) + 0.5) * cells / size - 0.5, 0.0, cells - 1.0
        )
        low = np.floor(where).astype(np.int64)
        return low, np.minimum(low + 1, cells - 1), where - low

    r0, r1, wr = positions(height, rows)
    c0, c1, wc = positions(width, columns)
    tall = grid[r0] * (1.0 - wr)[:, None] + grid[r1] * wr[:, None]
    return tall[:, c0] * (1.0 - wc) + tall[:, c1] * wc


def _display_image(image, where):
    """`image` as floats in [0, 1], `(H, W)` or `(H, W, 3)`."""
    try:
        image = np.asarray(image, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise ValueError(
            f"{where} is not an array of numbers ({err})"
        ) from None
    if image.ndim == 3 and image.shape[-1] == 1:
        image = image[..., 0]
    if (
        image.ndim not in (2, 3)
        or 0 in image.shape[:2]
        or (image.ndim == 3 and image.shape[-1] not in (3, 4))
    ):
        raise ValueError(
            f"{where} of shape {image.shape} is not an (H, W) or "
            "(H, W, 3) image"
        )
    _check_finite(image, where)
    image = image[..., :3] if image.ndim == 3 else image
    if image.max() > 1.0:  # uint8-like values
        image = image / 255.0
    return np.clip(image, 0.0, 1.0)


def plot_caption_attention(items, path, title=None, columns=6):
    """Where a captioner looked for each word (the figure of Show, Attend
    and Tell): per image one row, the image and then one panel per
    generated word, its attention map upsampled smoothly (bilinear) and
    laid over the image in grey as a heat layer whose colour and opacity
    grow with the weight; the word is the panel's title.

    Each map is scaled by its own largest weight, so every panel shows
    where that word looked most (a uniform map colours the whole image).
    Captions longer than `columns` words
    continue on more rows.

    Args:
        items: a list of dicts, one per image, with
            `"image"`: `(H, W)` or `(H, W, 3)` image (uint8, or floats in
            [0, 1] or [0, 255]);
            `"words"`: the generated words (list of strings);
            `"maps"`: `(len(words), rows, columns)` non-negative attention
            over the image's grid of locations, one map per word;
            `"label"` (optional): text above the image, e.g. the reference
            caption.
        path: the PNG file to write.
        title: optional figure title.
        columns: word panels per row.

    Returns:
        `path`, as a string.

    Raises:
        ValueError: no items, an item without "image"/"words"/"maps", a
            bad image, words and maps of different counts, maps that are
            not `(words, rows, columns)`, negative or not finite, or
            `columns` < 1.

    Example:

    >>> image = np.zeros((64, 128), "uint8")
    >>> maps = np.eye(2, 4).reshape(2, 1, 4)  # 1 x 4 grid, two words
    >>> viz.plot_caption_attention(  # doctest: +SKIP
    ...     [{"image": image, "words": ["one", "two"], "maps": maps,
    ...       "label": "one two"}], "plots/captions.png")
    'plots/captions.png'
    """
    import textwrap

    if isinstance(items, Mapping):
        items = [items]
    if not isinstance(items, (list, tuple)) or not items:
        raise ValueError("items must be a non-empty list of dicts")
    if (
        isinstance(columns, bool)
        or not isinstance(columns, numbers.Integral)
        or columns < 1
    ):
        raise ValueError(f"columns must be a positive integer, got {columns!r}")
    rows_of = []  # per item: (image, words, unit-scaled maps, label)
    for index, item in enumerate(items):
        where = f"items[{index}]"
        if not isinstance(item, Mapping) or not all(
            key in item for key in ("image", "words", "maps")
        ):
            raise ValueError(
                f'{where} must be a dict with "image", "words" and "maps"'
            )
        image = _display_image(item["image"], f'{where}["image"]')
        words = _check_words(item["words"], f'{where}["words"]')
        try:
            maps = np.asarray(item["maps"], dtype=np.float64)
        except (TypeError, ValueError) as err:
            raise ValueError(
                f'{where}["maps"] is not an array of numbers ({err})'
            ) from None
        if not words and maps.size == 0:
            maps = np.zeros((0, 1, 1))
        if maps.ndim != 3 or 0 in maps.shape[1:]:
            raise ValueError(
                f'{where}["maps"] must be (words, rows, columns), '
                f"got shape {maps.shape}"
            )
        if len(maps) != len(words):
            raise ValueError(
                f"{where}: {len(words)} words but {len(maps)} "
                "maps; give one map per word"
            )
        _check_finite(maps, f'{where}["maps"]')
        if np.any(maps < 0):
            raise ValueError(f'{where}["maps"] has negative values')
        top = maps.max(axis=(1, 2), initial=0.0)
        maps = maps / np.where(top > 0, top, 1.0)[:, None, None]
        label = item.get("label")
        label = (
            None if label is None else textwrap.fill(_clip(str(label), 120), 26)
        )
        rows_of.append((image, words, maps, label))

    columns = int(columns)
    rows = [
        max(1, math.ceil(len(words) / columns)) for _, words, _, _ in rows_of
    ]
    panel = 1.7  # inches across a panel
    heights = []  # inches, one per row of panels
    for (image, _, _, label), count in zip(rows_of, rows):
        aspect = min(max(image.shape[0] / image.shape[1], 0.35), 1.6)
        heights += [panel * aspect + 0.35] * count
        heights[-count] += 0.16 * (label.count("\n") + 1 if label else 0)
    fig = _new_figure(
        panel * (columns + 1) + 0.2, sum(heights) + (0.4 if title else 0.0)
    )
    axes = fig.subplots(
        len(heights),
        columns + 1,
        squeeze=False,
        gridspec_kw={"height_ratios": heights},
    )
    for ax in axes.ravel():
        ax.set_axis_off()
    cmap, grey_map = _colormap("inferno"), _colormap("gray")
    first = 0
    for (image, words, maps, label), count in zip(rows_of, rows):
        height, width = image.shape[:2]
        ax = axes[first, 0]
        ax.imshow(
            image,
            cmap=grey_map if image.ndim == 2 else None,
            vmin=0.0,
            vmax=1.0,
        )
        if label:
            ax.set_title(label, fontsize="x-small", parse_math=False)
        grey = (
            image
            if image.ndim == 2
            else image @ np.array([0.299, 0.587, 0.114])
        )
        for k, (word, grid) in enumerate(zip(words, maps)):
            ax = axes[first + k // columns, 1 + k % columns]
            heat = _upsample_bilinear(grid, height, width)
            layer = cmap(heat)
            layer[..., 3] = 0.8 * heat
            ax.imshow(0.85 * grey, cmap=grey_map, vmin=0.0, vmax=1.0)
            ax.imshow(layer)
            ax.set_title(_clip(word, 16), fontsize="medium", parse_math=False)
        first += count
    _set_title(fig, title)
    fig.tight_layout(pad=0.4)
    return _save(fig, path)
