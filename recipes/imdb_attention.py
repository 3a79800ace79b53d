"""Train and evaluate the course's attention sentiment classifiers on IMDB.

    KERAS_BACKEND=jax python recipes/imdb_attention.py --model attention
    python recipes/imdb_attention.py --model rnn --data-dir ../shared/data/aclImdb
    python recipes/imdb_attention.py --preset imdb_query_bigrams --data-dir ...
    python recipes/imdb_attention.py --smoke          # 30-second check, offline

Models (`--model`, the lab in order, each a preset `imdb_<model>` of
`zoo.models.text_classifier`): `mean` (mean of word embeddings, the
baseline), `attention` (learned query), `query` (query computed from the
text, with a value transform), `rnn` (bidirectional GRU + attention),
`transformer` (positional embedding + encoder blocks + attention pooling).
`--preset` picks any preset (e.g. `imdb_query_bigrams`); flags override it.

The task (`TextClassifier`) trains on raw strings: its preprocessor runs in
`tf.data` inside `fit`. Writes `metrics.json`, pictures and
`imdb_<model>.keras` to `--output-dir` (`imdb_<model>_bigrams.keras` with
`--ngrams 2`); `--ship` also writes it to `saved_models/`. A saved model
takes raw strings under any backend:

    import zoo
    model = zoo.saving.load_model("saved_models/imdb_attention.keras")
    model.predict(["an utterly wonderful film", "a waste of two hours"])
"""

import argparse
import collections
import os
import sys
import time

import keras
import numpy as np

import zoo  # noqa: F401  (first: a quiet framework start-up)
from zoo import viz
from zoo.callbacks import (
    AttentionEntropyHistory,
    Throughput,
)
from zoo.cli import (
    HelpFormatter,
    accelerator_metrics,
    add_accelerator_flags,
    at_least,
    non_negative_int,
    positive_float,
    positive_int,
    rate,
    setup_accelerators,
)
from zoo.data.glove import glove_embedding_matrix
from zoo.data.imdb import (
    DataNotFoundError,
    load_imdb,
    make_synthetic_imdb,
)
from zoo.data.text import text_dataset
from zoo.distribute import even_batches
from zoo.models import (
    TextClassifier,
    TextClassifierPreprocessor,
    attention_model,
)
from zoo.models.quantization import quantize_matrices
from zoo.models.text_classifier import PRESETS
from zoo.saving import (
    remove_temporaries,
    save_model_atomic,
    write_json_atomic,
)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

MODELS = ("mean", "attention", "query", "rnn", "transformer")
# Models that pool a bag of tokens and never read their order, so they can
# take n-gram tokens (`--ngrams 2`).
ORDER_FREE_MODELS = ("mean", "attention", "query")
SMOKE = dict(
    epochs=3,
    batch_size=32,
    max_length=48,
    vocab_size=200,
    embedding_dim=16,
    learning_rate=1e-2,
)
# Flags that override a preset's backbone arguments (flag -> argument).
BACKBONE_FLAGS = {
    "embedding_dim": "embedding_dim",
    "dropout": "dropout",
    "word_dropout": "word_dropout",
    "entropy_weight": "entropy_weight",
    "query_initializer": "query_initializer",
    "query_map_scale": "map_scale",
    "rnn_units": "rnn_units",
    "rnn_cell": "rnn_cell",
    "rnn_skip": "rnn_skip",
    "num_layers": "num_layers",
    "num_heads": "num_heads",
    "intermediate_dim": "intermediate_dim",
    "train_window": "train_window",
}
# Which backbone arguments each kind of backbone takes.
KIND_ARGUMENTS = {
    "MeanPoolingBackbone": set(),
    "AttentionPoolingBackbone": {
        "entropy_weight",
        "query_initializer",
        "map_scale",
    },
    "RecurrentAttentionBackbone": {
        "entropy_weight",
        "query_initializer",
        "rnn_units",
        "rnn_cell",
        "rnn_skip",
    },
    "TransformerEncoderBackbone": {
        "entropy_weight",
        "query_initializer",
        "num_layers",
        "num_heads",
        "intermediate_dim",
    },
}
COMMON_ARGUMENTS = {"embedding_dim", "dropout", "word_dropout", "train_window"}

# For recipes/check_backends.py: every preset.
CHECK_VARIANTS = tuple(PRESETS.names())
CHECK_FULL_METRICS = {"validation_accuracy": 0.01, "test_accuracy": 0.01}


def variant_argv(variant):
    """Recipe flags that build `variant` (a preset name)."""
    if variant not in PRESETS:
        raise ValueError(
            f"Unknown variant {variant!r}; expected one of "
            f"{', '.join(CHECK_VARIANTS)}."
        )
    return ["--preset", variant]


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description="Attention sentiment classifiers on IMDB (any backend).",
        formatter_class=HelpFormatter,
    )
    parser.add_argument(
        "--model",
        choices=MODELS,
        default=None,
        help="which classifier to train: the preset "
        "imdb_<model> (default: attention)",
    )
    parser.add_argument(
        "--preset",
        choices=PRESETS.names(),
        default=None,
        help="a text classifier preset (see "
        "zoo.models.text_classifier.PRESETS); flags below "
        "override it",
    )
    parser.add_argument(
        "--data-dir",
        default=None,
        help="local aclImdb directory (train/pos, train/neg, "
        "optional test/); default: tensorflow-datasets",
    )
    parser.add_argument(
        "--epochs",
        type=positive_int,
        default=None,
        help="training epochs (default: the preset's)",
    )
    parser.add_argument(
        "--batch-size",
        type=positive_int,
        default=None,
        help="reviews per training step (default: the preset's, 64)",
    )
    parser.add_argument(
        "--max-length",
        type=positive_int,
        default=None,
        help="words kept per review, longer ones truncated "
        "(default: the preset's, 512; 256 for transformer)",
    )
    parser.add_argument(
        "--vocab-size",
        type=at_least(3),
        default=None,
        help="vocabulary size, built on the training split "
        "(default: the preset's, 20000; 100000 with bigrams)",
    )
    parser.add_argument(
        "--train-window",
        type=non_negative_int,
        default=None,
        help="train on a random slice of this many words of "
        "each review (a new one every step) and predict on "
        "all --max-length words; 0 trains on whole reviews "
        "(default: the preset's: 128 for rnn, else 0)",
    )
    parser.add_argument(
        "--ngrams",
        type=positive_int,
        default=None,
        help="2: add each review's bigrams as tokens after "
        "its words (mean, attention and query only; give "
        "--vocab-size room for them)",
    )
    parser.add_argument(
        "--embedding-dim",
        type=positive_int,
        default=None,
        help="word embedding size, 64 (the GloVe size with --glove)",
    )
    parser.add_argument(
        "--learning-rate",
        type=positive_float,
        default=None,
        help="Adam learning rate (default: the preset's, 1e-3)",
    )
    parser.add_argument(
        "--dropout",
        type=rate,
        default=None,
        help="dropout on the embeddings and the pooled vector (default 0.3)",
    )
    parser.add_argument(
        "--word-dropout",
        type=rate,
        default=None,
        help="probability of dropping a whole word while training (default 0)",
    )
    parser.add_argument(
        "--entropy-weight",
        type=float,
        default=None,
        help="weight of the attention-entropy penalty "
        "(>0 sharpens attention, <0 spreads it; default 0)",
    )
    parser.add_argument(
        "--query-initializer",
        default=None,
        help="initializer of the attention query (a Keras "
        "name; 'zeros' starts every attention model as mean "
        "pooling); default: glorot_uniform",
    )
    parser.add_argument(
        "--query-map-scale",
        type=positive_float,
        default=None,
        help="--model query trains its query and value maps "
        "this many times as fast as the other weights "
        "(default 0.03; 1 = like them: they then fit the "
        "training movies within two epochs)",
    )
    parser.add_argument(
        "--rnn-cell",
        choices=("gru", "lstm"),
        default=None,
        help="recurrent cell of --model rnn (bidirectional; default gru)",
    )
    parser.add_argument(
        "--rnn-units",
        type=positive_int,
        default=None,
        help="units per direction of --model rnn (default 64)",
    )
    parser.add_argument(
        "--rnn-skip",
        action="store_true",
        default=None,
        help="--model rnn pools the word embeddings "
        "concatenated with the recurrent states",
    )
    parser.add_argument(
        "--num-layers",
        type=positive_int,
        default=None,
        help="encoder blocks of --model transformer (2)",
    )
    parser.add_argument(
        "--num-heads",
        type=positive_int,
        default=None,
        help="attention heads of --model transformer (4)",
    )
    parser.add_argument(
        "--intermediate-dim",
        type=positive_int,
        default=None,
        help="feed-forward width of --model transformer (128)",
    )
    parser.add_argument(
        "--glove",
        default=None,
        metavar="PATH",
        help="initialise embeddings from a GloVe text file",
    )
    parser.add_argument(
        "--patience",
        type=non_negative_int,
        default=None,
        help="early stopping: stop after this many epochs "
        "without a better validation accuracy and keep the "
        "best weights (0 disables; needs a validation split; "
        "default: the preset's, 2; 3 for rnn)",
    )
    parser.add_argument(
        "--validation-fraction",
        type=rate,
        default=0.2,
        help="share of train held out; 0 trains on the full train split",
    )
    parser.add_argument(
        "--validation-fold",
        type=non_negative_int,
        default=0,
        help="which part of train is held out, 0 <= fold < "
        "1/fraction (run each to cross-validate)",
    )
    parser.add_argument(
        "--hold-out",
        choices=("movies", "reviews"),
        default="movies",
        help="hold out whole movies (like the official test "
        "split; needs --data-dir) or random reviews (shares "
        "movies with train, so accuracy reads high)",
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=1337,
        help="seed of the weights and the shuffling (and of "
        "the held-out reviews with --hold-out reviews)",
    )
    parser.add_argument(
        "--output-dir",
        default=None,
        help="default: runs/imdb_attention/<model>-<backend>/ "
        "(what imdb_results_table.py reads)",
    )
    parser.add_argument(
        "--ship",
        action="store_true",
        help="also save saved_models/imdb_<model>.keras (int8 token table, "
        "float16 weights)",
    )
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="same code path on a small generated dataset "
        "(offline, about 30 s)",
    )
    parser.add_argument(
        "--verbose",
        type=int,
        default=1,
        choices=(0, 1, 2),
        help="Keras progress output",
    )
    add_accelerator_flags(parser)
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    resolve_preset(parser, args)
    if args.output_dir is None:
        suffix = "-smoke" if args.smoke else ""
        args.output_dir = os.path.join(
            ROOT,
            "runs",
            "imdb_attention",
            f"{args.model}-{keras.backend.backend()}{suffix}",
        )
    return args


def resolve_preset(parser, args):
    """Fills every unset flag from the preset (then `--smoke`'s sizes), and
    refuses combinations the model cannot take."""
    if args.preset is None:
        args.preset = f"imdb_{args.model or 'attention'}"
    backbone = PRESETS.part(args.preset, "backbone")
    kind = backbone.pop("class")
    model = {
        v: k
        for k, v in {
            "mean": "MeanPoolingBackbone",
            "rnn": "RecurrentAttentionBackbone",
            "transformer": "TransformerEncoderBackbone",
        }.items()
    }.get(kind)
    if model is None:
        model = "query" if backbone.get("query") == "computed" else "attention"
    if args.model is not None and args.model != model:
        parser.error(
            f"--model {args.model} and --preset {args.preset} "
            f"disagree: the preset is a {model} model"
        )
    args.model = model
    args.backbone_class = kind
    preprocessor = PRESETS.part(args.preset, "preprocessor")
    training = PRESETS.part(args.preset, "training")
    defaults = {
        "vocab_size": preprocessor["max_tokens"],
        "max_length": preprocessor["sequence_length"],
        "ngrams": preprocessor.get("ngrams", 1),
        **training,
        **{
            flag: backbone[argument]
            for flag, argument in BACKBONE_FLAGS.items()
            if argument in backbone
        },
    }
    if args.smoke:
        defaults.update(SMOKE)
    for key, value in defaults.items():
        if getattr(args, key, None) is None:
            setattr(args, key, value)
    if args.train_window is None:
        args.train_window = 0
    elif (
        args.smoke
        and args.train_window
        and args.train_window >= args.max_length
    ):
        args.train_window = args.max_length // 2  # still exercised
    if args.ngrams > 1 and args.model not in ORDER_FREE_MODELS:
        parser.error(
            f"--ngrams {args.ngrams} appends n-grams after the words, which "
            f"only order-free pooling models can use "
            f"({', '.join(ORDER_FREE_MODELS)}); --model {args.model} reads "
            f"the words in order"
        )
    if args.train_window and args.ngrams > 1:
        parser.error(
            "--train-window slices the words in order; it cannot "
            "be used with --ngrams"
        )
    if args.train_window >= args.max_length:
        args.train_window = 0  # a window as long as the review is all of it
    # Flags of other kinds (--rnn-units for mean, ...) are ignored, so one
    # set of flags can serve every model of a cross-validation.
    for flag, default in (
        ("entropy_weight", 0.0),
        ("word_dropout", 0.0),
        ("dropout", 0.3),
        ("embedding_dim", 64),
    ):
        if getattr(args, flag) is None:
            setattr(args, flag, default)


def model_name(args):
    """imdb_<model>, with _bigrams (_<n>grams) when n-grams are tokens."""
    if args.ngrams == 1:
        return f"imdb_{args.model}"
    grams = "bigrams" if args.ngrams == 2 else f"{args.ngrams}grams"
    return f"imdb_{args.model}_{grams}"


def load_splits(args):
    if args.smoke:
        return make_synthetic_imdb(seed=args.seed)
    return load_imdb(
        args.data_dir,
        args.validation_fraction,
        args.seed,
        validation_fold=args.validation_fold,
        hold_out=args.hold_out,
    )


def build_classifier(args, preprocessor):
    """The preset's `TextClassifier` with the flags' overrides, for an
    adapted preprocessor; compiled with Adam."""
    embedding_dim = args.embedding_dim
    matrix = None
    if args.glove:
        matrix, found = glove_embedding_matrix(
            preprocessor.get_vocabulary(), args.glove, seed=args.seed
        )
        embedding_dim = matrix.shape[1]
        print(
            f"GloVe: {found}/{len(matrix)} words have a vector "
            f"({embedding_dim}-d)"
        )
    allowed = COMMON_ARGUMENTS | KIND_ARGUMENTS[args.backbone_class]
    overrides = {
        f"backbone_{argument}": getattr(args, flag)
        for flag, argument in BACKBONE_FLAGS.items()
        if argument in allowed and getattr(args, flag) is not None
    }
    overrides["backbone_embedding_dim"] = embedding_dim
    overrides["backbone_train_window"] = args.train_window or None
    classifier = TextClassifier.from_preset(
        args.preset,
        preprocessor=preprocessor,
        dropout=args.dropout,
        name=model_name(args),
        **overrides,
    )
    if matrix is not None:
        table = classifier.backbone.get_layer("embedding")
        table = getattr(table, "token_embedding", table)
        table.embeddings.assign(matrix)
    classifier.compile(optimizer=keras.optimizers.Adam(args.learning_rate))
    return classifier


def top_attended_words(weights, token_ids, vocabulary, min_count=20, k=25):
    """Words whose attention most exceeds uniform (weight x review length),
    averaged over their occurrences."""
    lengths = np.maximum((token_ids != 0).sum(axis=1, keepdims=True), 1)
    ratio = weights * lengths
    totals, counts = collections.defaultdict(float), collections.Counter()
    for ids, values in zip(token_ids, ratio):
        for i, value in zip(ids, values):
            if i > 1:  # skip padding and out-of-vocabulary
                totals[i] += float(value)
                counts[i] += 1
    scored = [
        (totals[i] / counts[i], vocabulary[i])
        for i in counts
        if counts[i] >= min_count
    ]
    scored.sort(reverse=True)
    return [(word, score) for score, word in scored[:k]]


def make_pictures(args, history, entropy_history, classifier, texts, labels):
    out = args.output_dir
    viz.plot_training_curves(
        history,
        os.path.join(out, "training_curves.png"),
        title=f"IMDB {args.model} ({keras.backend.backend()})",
    )
    if entropy_history is None:
        return
    epochs = sorted(entropy_history.entropies)
    viz.plot_entropy_histograms(
        {
            f"epoch {e}": entropy_history.entropies[e]
            for e in (epochs[0], epochs[-1])
        },
        os.path.join(out, "attention_entropy.png"),
        max_entropy=entropy_history.max_entropies,
        title=f"Attention entropy, {args.model}",
    )
    sample = min(len(texts), 2000)
    weights, token_ids = classifier.attention_weights(texts[:sample])
    shown = min(4, sample)
    probabilities = classifier.predict(list(texts[:shown]), verbose=0)[:, 0]
    vocabulary = classifier.preprocessor.get_vocabulary()
    reviews = []
    for i in range(shown):
        length = int((token_ids[i] != 0).sum())
        reviews.append(
            {
                "words": [vocabulary[t] for t in token_ids[i][:length]],
                "weights": weights[i][:length],
                "label": f"{'positive' if labels[i] else 'negative'} review, "
                f"P(positive) = {probabilities[i]:.2f}",
            }
        )
    viz.plot_attention_text(
        reviews,
        os.path.join(out, "attention_text.png"),
        title=f"Attention weights, {args.model}",
    )
    top = top_attended_words(
        weights, token_ids, vocabulary, min_count=3 if args.smoke else 20
    )
    if top:
        viz.plot_top_words(
            [w for w, _ in top],
            [s for _, s in top],
            os.path.join(out, "top_words.png"),
            title="Most attended words (validation)",
            xlabel="attention / uniform attention",
        )
        print("most attended words:", ", ".join(w for w, _ in top[:15]))


def run(args):
    keras.utils.set_random_seed(args.seed)
    strategy = setup_accelerators(args, args.batch_size)
    os.makedirs(args.output_dir, exist_ok=True)
    remove_temporaries(args.output_dir)  # what a killed save left
    splits = load_splits(args)
    train_texts, _ = splits["train"]
    holdout = getattr(splits, "validation_holdout", None)
    print(
        "IMDB: "
        + ", ".join(f"{k} {len(v[0])}" for k, v in splits.items())
        + f" | backend {keras.backend.backend()}"
    )
    if holdout:
        print(f"validation: fold {args.validation_fold}, {holdout}")

    preprocessor = TextClassifierPreprocessor.from_preset(
        args.preset,
        max_tokens=args.vocab_size,
        sequence_length=args.max_length,
        ngrams=args.ngrams,
    )
    preprocessor.adapt(train_texts)  # vocabulary from the training split only
    with strategy.scope():
        classifier = build_classifier(args, preprocessor)
    parameters = int(classifier.count_params())
    print(
        f"{args.model} ({args.preset}): {parameters:,} parameters, "
        f"vocabulary {preprocessor.vocabulary_size}, max length "
        f"{args.max_length}"
        + (
            f", trained on random {args.train_window}-word windows"
            if args.train_window
            else ""
        )
    )

    def dataset(split, shuffle=False):
        texts, labels = splits[split]
        return even_batches(
            text_dataset(
                texts,
                labels.astype("float32"),
                args.batch_size,
                shuffle=shuffle,
                seed=args.seed,
            ),
            strategy,
        )

    val_ds = dataset("validation") if "validation" in splits else None
    monitor_texts, monitor_labels = splits.get("validation", splits["train"])
    # First, so its clock stops before the others' epoch-end work.
    speed = Throughput(args.batch_size, unit="reviews")
    callbacks = [speed]
    entropy_history = None
    weights_model = attention_model(classifier.backbone)
    if weights_model is not None:
        monitor_ids = keras.ops.convert_to_numpy(
            preprocessor(list(monitor_texts[:512]))
        )
        entropy_history = AttentionEntropyHistory(weights_model, monitor_ids)
        callbacks.append(entropy_history)

    stopper = None
    if val_ds is not None and args.patience > 0:
        stopper = keras.callbacks.EarlyStopping(
            monitor="val_accuracy",
            patience=args.patience,
            restore_best_weights=True,
        )
        callbacks.append(stopper)

    start = time.perf_counter()
    history = classifier.fit(
        dataset("train", shuffle=True),
        validation_data=val_ds,
        epochs=args.epochs,
        callbacks=callbacks,
        verbose=args.verbose,
    )
    seconds = time.perf_counter() - start
    print(speed.describe())

    metrics = {
        "model": args.model,
        "preset": args.preset,
        "backend": keras.backend.backend(),
        "epochs": len(history.history["loss"]),
        "best_epoch": (
            stopper.best_epoch + 1
            if stopper and stopper.best_weights
            else len(history.history["loss"])
        ),
        "train_seconds": round(seconds, 1),
        "parameters": parameters,
        "max_length": args.max_length,
        "train_window": args.train_window,
        "ngrams": args.ngrams,
        "vocabulary_size": int(preprocessor.vocabulary_size),
        "entropy_weight": args.entropy_weight,
        "word_dropout": args.word_dropout,
        "query_initializer": args.query_initializer,
        **(
            {"query_map_scale": args.query_map_scale}
            if args.model == "query"
            else {}
        ),
        "dropout": args.dropout,
        "learning_rate": args.learning_rate,
        "embedding_dim": args.embedding_dim,
        **(
            {
                "rnn_cell": args.rnn_cell,
                "rnn_units": args.rnn_units,
                "rnn_skip": bool(args.rnn_skip),
            }
            if args.model == "rnn"
            else {}
        ),
        **(
            {
                "num_layers": args.num_layers,
                "num_heads": args.num_heads,
                "intermediate_dim": args.intermediate_dim,
            }
            if args.model == "transformer"
            else {}
        ),
        "batch_size": args.batch_size,
        "seed": args.seed,
        "validation_holdout": holdout,
        "validation_fold": args.validation_fold if holdout else None,
        "glove": args.glove,
        "smoke": args.smoke,
        **accelerator_metrics(args, strategy, speed),
        "data": "synthetic" if args.smoke else (args.data_dir or "tfds"),
        "argv": args.argv,
        "history": {
            k: [float(v) for v in vs] for k, vs in history.history.items()
        },
    }
    for split in splits:
        scores = classifier.evaluate(
            dataset(split), verbose=0, return_dict=True
        )
        metrics[f"{split}_loss"] = round(float(scores["loss"]), 4)
        metrics[f"{split}_accuracy"] = round(float(scores["accuracy"]), 4)

    # A fresh optimizer: Adam's moment estimates (twice the size of the
    # weights) are of no use to someone who loads the model to predict.
    with strategy.scope():
        classifier.compile(optimizer=keras.optimizers.Adam(args.learning_rate))
    model_path = save_model_atomic(
        classifier, os.path.join(args.output_dir, f"{model_name(args)}.keras")
    )
    write_json_atomic(metrics, os.path.join(args.output_dir, "metrics.json"))
    make_pictures(
        args,
        history.history,
        entropy_history,
        classifier,
        monitor_texts,
        monitor_labels,
    )
    if args.ship:
        # Shipped as the other IMDB files: the token table (most of the
        # file) in int8 rows with a scale each, the rest in float16.
        quantize_matrices(classifier, kinds=(keras.layers.Embedding,))
        save_model_atomic(
            classifier,
            os.path.join(ROOT, "saved_models", f"{model_name(args)}.keras"),
            weights_dtype="float16",
        )

    scores = " ".join(
        f"{s} acc {metrics[f'{s}_accuracy']:.4f}"
        for s in ("train", "validation", "test")
        if s in splits
    )
    print(
        f"RESULT imdb_attention model={args.model} preset={args.preset} "
        f"backend={keras.backend.backend()} {scores} "
        f"train_time={seconds:.0f}s params={metrics['parameters']} "
        f"-> {model_path}"
    )
    return metrics


def check_setup(
    variant="imdb_attention",
    smoke=True,
    seed=1337,
    num_steps=20,
    batch_size=16,
    data_dir=None,
):
    """What `recipes/check_backends.py` compares across backends (see
    `zoo.testing.cross_backend.CheckSetup`): the `variant` preset's
    classifier with dropout and training windows off, its vocabulary adapted on the smoke data
    (or real IMDB when `smoke` is False), raw reviews as inputs and
    `num_steps` batches of raw reviews and labels in a NumPy-seeded order.
    """
    from zoo.testing.cross_backend import CheckSetup

    # Dropout and the random training windows off: each backend draws its
    # own random numbers, and the training steps must be the same.
    argv = variant_argv(variant) + [
        "--seed",
        str(seed),
        "--dropout",
        "0",
        "--train-window",
        "0",
    ]
    if data_dir is not None:
        argv += ["--data-dir", data_dir]
    args = parse_args(argv + (["--smoke"] if smoke else []))
    keras.utils.set_random_seed(seed)
    splits = load_splits(args)
    texts, labels = splits["train"]
    preprocessor = TextClassifierPreprocessor.from_preset(
        args.preset,
        max_tokens=args.vocab_size,
        sequence_length=args.max_length,
        ngrams=args.ngrams,
    )
    preprocessor.adapt(texts)
    model = build_classifier(args, preprocessor)
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(texts))
    steps = [
        order[(i * batch_size) % len(order) :][:batch_size]
        for i in range(num_steps)
    ]
    texts = np.asarray([str(t) for t in texts], dtype=object)
    val_texts = splits.get("validation", splits["train"])[0]
    return CheckSetup(
        model=model,
        inputs=[str(t) for t in val_texts[:8]],
        train_batches=[
            (list(texts[i]), labels[i].astype("float32")) for i in steps
        ],
        loss="binary_crossentropy",
    )


def main(argv=None):
    args = parse_args(argv)
    try:
        return run(args)
    except DataNotFoundError as error:
        print(f"error: {error}", file=sys.stderr)
        raise SystemExit(2) from None


if __name__ == "__main__":
    main()
