"""Train and evaluate the course's attention sentiment classifiers on IMDB.

    KERAS_BACKEND=jax python recipes/imdb_attention.py --model attention
    python recipes/imdb_attention.py --model rnn --data-dir ../shared/data/aclImdb
    python recipes/imdb_attention.py --smoke          # 30-second check, no data

Models (`--model`), the lab in order: `mean` (mean of word embeddings, the
baseline), `attention` (learned query), `query` (query computed from the
text, with a value transform), `rnn` (bidirectional GRU + attention),
`transformer` (positional embedding + encoder blocks + attention pooling).

Writes `metrics.json`, pictures and `imdb_<model>.keras` to `--output-dir`
(`imdb_<model>_bigrams.keras` with `--ngrams 2`); `--ship` also writes it to
`saved_models/`. A saved model takes raw strings under any backend:

    import keras, zoo
    model = keras.saving.load_model("saved_models/imdb_attention.keras")
    model.predict(["an utterly wonderful film", "a waste of two hours"])
"""

import argparse
import collections
import os
import sys
import time

import keras
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, ROOT)

from recipes.flags import at_least  # noqa: E402
from recipes.flags import non_negative_int  # noqa: E402
from recipes.flags import positive_float  # noqa: E402
from recipes.flags import positive_int  # noqa: E402
from recipes.flags import rate  # noqa: E402
from zoo import viz  # noqa: E402
from zoo.callbacks import AttentionEntropyHistory  # noqa: E402
from zoo.data.glove import glove_embedding_matrix  # noqa: E402
from zoo.data.imdb import DataNotFoundError  # noqa: E402
from zoo.data.imdb import load_imdb  # noqa: E402
from zoo.data.imdb import make_synthetic_imdb  # noqa: E402
from zoo.data.text import TextClassifierPreprocessor  # noqa: E402
from zoo.data.text import token_dataset  # noqa: E402
from zoo.models import ORDER_FREE_KINDS  # noqa: E402
from zoo.models import QUERY_MAP_SCALE  # noqa: E402
from zoo.models import TEXT_CLASSIFIER_KINDS  # noqa: E402
from zoo.models import TextClassifier  # noqa: E402
from zoo.models import attention_model  # noqa: E402
from zoo.models import build_text_backbone  # noqa: E402
from zoo.saving import save_model_atomic  # noqa: E402
from zoo.saving import write_json_atomic  # noqa: E402

DEFAULT_EPOCHS = {"mean": 20, "attention": 20, "query": 20, "rnn": 25,
                  "transformer": 5}
# The GRU with unit-variance embeddings improves slowly and unevenly (best
# epoch 8-13 on the five folds), so it gets one more epoch of patience.
DEFAULT_PATIENCE = {"rnn": 3}
# Longer reviews help the pooling models (movie-disjoint 5-fold CV, JAX: mean
# 86.70% at 256 words, 87.84% at 512; attention 86.86%, 88.19%); the
# recurrent and Transformer models cost twice as much per extra word.
DEFAULT_MAX_LENGTH = {"mean": 512, "attention": 512, "query": 512, "rnn": 512,
                      "transformer": 256}
# The GRU trains on a random 128-word slice of each review, a new one every
# epoch, and predicts on all 512 words: more words than the 256 it read in
# full before, at half the cost per epoch, and an augmentation (5-fold CV in
# the README).
DEFAULT_TRAIN_WINDOW = {"rnn": 128}
SMOKE = dict(epochs=3, batch_size=32, max_length=48, vocab_size=200,
             embedding_dim=16, learning_rate=1e-2)


# For recipes/check_backends.py: every model, and the shipped bigram ones.
BIGRAM_FLAGS = ["--ngrams", "2", "--vocab-size", "100000"]
VARIANT_FLAGS = {
    **{kind: ["--model", kind] for kind in TEXT_CLASSIFIER_KINDS},
    "attention_bigrams": ["--model", "attention", *BIGRAM_FLAGS],
    "query_bigrams": ["--model", "query", *BIGRAM_FLAGS],
}
CHECK_VARIANTS = tuple(VARIANT_FLAGS)


def variant_argv(variant):
    """Recipe flags that build `variant` (a name in `VARIANT_FLAGS`)."""
    if variant not in VARIANT_FLAGS:
        raise ValueError(f"Unknown variant {variant!r}; expected one of "
                         f"{', '.join(VARIANT_FLAGS)}.")
    return list(VARIANT_FLAGS[variant])


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description="Attention sentiment classifiers on IMDB (any backend).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--model", choices=TEXT_CLASSIFIER_KINDS,
                        default="attention", help="which classifier to train")
    parser.add_argument("--data-dir", default=None,
                        help="local aclImdb directory (train/pos, train/neg, "
                        "optional test/); default: tensorflow-datasets")
    parser.add_argument("--epochs", type=positive_int, default=None,
                        help="training epochs (default: per model, "
                        f"{DEFAULT_EPOCHS})")
    parser.add_argument("--batch-size", type=positive_int, default=64,
                        help="reviews per training step")
    parser.add_argument("--max-length", type=positive_int, default=None,
                        help="words kept per review, longer ones truncated "
                        f"(default: per model, {DEFAULT_MAX_LENGTH})")
    parser.add_argument("--vocab-size", type=at_least(3), default=20000,
                        help="vocabulary size, built on the training split")
    parser.add_argument("--train-window", type=non_negative_int, default=None,
                        help="train on a random slice of this many words of "
                        "each review (a new one every epoch) and predict on "
                        "all --max-length words; 0 trains on whole reviews "
                        f"(default: per model, {DEFAULT_TRAIN_WINDOW}, "
                        "else 0)")
    parser.add_argument("--ngrams", type=positive_int, default=1,
                        help="2: add each review's bigrams as tokens after "
                        "its words (mean, attention and query only; give "
                        "--vocab-size room for them)")
    parser.add_argument("--embedding-dim", type=positive_int, default=64,
                        help="word embedding size (the GloVe size with --glove)")
    parser.add_argument("--learning-rate", type=positive_float, default=1e-3,
                        help="Adam learning rate")
    parser.add_argument("--dropout", type=rate, default=0.3,
                        help="dropout on the embeddings and the pooled vector")
    parser.add_argument("--word-dropout", type=rate, default=0.0,
                        help="probability of dropping a whole word while "
                        "training")
    parser.add_argument("--entropy-weight", type=float, default=0.0,
                        help="weight of the attention-entropy penalty "
                        "(>0 sharpens attention, <0 spreads it)")
    parser.add_argument("--query-initializer", default=None,
                        help="initializer of the attention query (a Keras "
                        "name; 'zeros' starts every attention model as mean "
                        "pooling); default: glorot_uniform")
    parser.add_argument("--query-map-scale", type=positive_float,
                        default=QUERY_MAP_SCALE,
                        help="--model query trains its query and value maps "
                        "this many times as fast as the other weights "
                        "(1 = like them; they then fit the training movies "
                        "within two epochs)")
    parser.add_argument("--rnn-cell", choices=("gru", "lstm"), default="gru",
                        help="recurrent cell of --model rnn (bidirectional)")
    parser.add_argument("--rnn-units", type=positive_int, default=64,
                        help="units per direction of --model rnn")
    parser.add_argument("--rnn-skip", action="store_true",
                        help="--model rnn pools the word embeddings "
                        "concatenated with the recurrent states")
    parser.add_argument("--num-layers", type=positive_int, default=2,
                        help="encoder blocks of --model transformer")
    parser.add_argument("--num-heads", type=positive_int, default=4,
                        help="attention heads of --model transformer")
    parser.add_argument("--intermediate-dim", type=positive_int, default=128,
                        help="feed-forward width of --model transformer")
    parser.add_argument("--glove", default=None, metavar="PATH",
                        help="initialise embeddings from a GloVe text file")
    parser.add_argument("--patience", type=non_negative_int, default=None,
                        help="early stopping: stop after this many epochs "
                        "without a better validation accuracy and keep the "
                        "best weights (0 disables; needs a validation split; "
                        f"default: per model, {DEFAULT_PATIENCE}, else 2)")
    parser.add_argument("--validation-fraction", type=rate, default=0.2,
                        help="share of train held out; 0 trains on the full "
                        "train split")
    parser.add_argument("--validation-fold", type=non_negative_int, default=0,
                        help="which part of train is held out, 0 <= fold < "
                        "1/fraction (run each to cross-validate)")
    parser.add_argument("--hold-out", choices=("movies", "reviews"),
                        default="movies",
                        help="hold out whole movies (like the official test "
                        "split; needs --data-dir) or random reviews (shares "
                        "movies with train, so accuracy reads high)")
    parser.add_argument("--seed", type=int, default=1337,
                        help="seed of the weights and the shuffling (and of "
                        "the held-out reviews with --hold-out reviews)")
    parser.add_argument("--output-dir", default=None,
                        help="default: runs/imdb_attention/<model>/")
    parser.add_argument("--ship", action="store_true",
                        help="also save saved_models/imdb_<model>.keras")
    parser.add_argument("--smoke", action="store_true",
                        help="same code path on a small generated dataset")
    parser.add_argument("--verbose", type=int, default=1, choices=(0, 1, 2),
                        help="Keras progress output")
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    if args.smoke:
        for key, value in SMOKE.items():
            if getattr(args, key) == parser.get_default(key):
                setattr(args, key, value)
    if args.epochs is None:
        args.epochs = DEFAULT_EPOCHS[args.model]
    if args.max_length is None:
        args.max_length = DEFAULT_MAX_LENGTH[args.model]
    if args.patience is None:
        args.patience = DEFAULT_PATIENCE.get(args.model, 2)
    if args.train_window is None:
        args.train_window = DEFAULT_TRAIN_WINDOW.get(args.model, 0)
        if args.smoke and args.train_window:
            args.train_window = args.max_length // 2  # still exercised
    if args.ngrams > 1 and args.model not in ORDER_FREE_KINDS:
        parser.error(
            f"--ngrams {args.ngrams} appends n-grams after the words, which "
            f"only order-free pooling models can use "
            f"({', '.join(ORDER_FREE_KINDS)}); --model {args.model} reads "
            f"the words in order")
    # Only order-free kinds take n-grams, and none has a default window, so
    # a window here was asked for.
    if args.train_window and args.ngrams > 1:
        parser.error("--train-window slices the words in order; it cannot "
                     "be used with --ngrams")
    if args.train_window >= args.max_length:
        args.train_window = 0  # a window as long as the review is all of it
    if args.output_dir is None:
        suffix = "-smoke" if args.smoke else ""
        args.output_dir = os.path.join(
            ROOT, "runs", "imdb_attention", args.model + suffix
        )
    return args


def model_name(args):
    """imdb_<model>, with _bigrams (_<n>grams) when n-grams are tokens."""
    if args.ngrams == 1:
        return f"imdb_{args.model}"
    grams = "bigrams" if args.ngrams == 2 else f"{args.ngrams}grams"
    return f"imdb_{args.model}_{grams}"


def load_splits(args):
    if args.smoke:
        return make_synthetic_imdb(seed=args.seed)
    return load_imdb(args.data_dir, args.validation_fraction, args.seed,
                     validation_fold=args.validation_fold,
                     hold_out=args.hold_out)


def build_classifier(args, preprocessor):
    embedding_dim = args.embedding_dim
    matrix = None
    if args.glove:
        matrix, found = glove_embedding_matrix(
            preprocessor.get_vocabulary(), args.glove, seed=args.seed
        )
        embedding_dim = matrix.shape[1]
        print(f"GloVe: {found}/{len(matrix)} words have a vector "
              f"({embedding_dim}-d)")
    backbone = build_text_backbone(
        args.model,
        vocabulary_size=preprocessor.vocabulary_size,
        sequence_length=preprocessor.output_length,
        embedding_dim=embedding_dim,
        dropout=args.dropout,
        word_dropout=args.word_dropout,
        entropy_weight=args.entropy_weight,
        query_initializer=args.query_initializer,
        query_map_scale=args.query_map_scale,
        rnn_units=args.rnn_units,
        rnn_cell=args.rnn_cell,
        rnn_skip=args.rnn_skip,
        num_layers=args.num_layers,
        num_heads=args.num_heads,
        intermediate_dim=args.intermediate_dim,
    )
    if matrix is not None:
        embedding = backbone.get_layer("embedding")
        table = getattr(embedding, "token_embedding", embedding)
        table.embeddings.assign(matrix)
    backbone.compile(
        optimizer=keras.optimizers.Adam(args.learning_rate),
        loss="binary_crossentropy",
        metrics=["accuracy"],
    )
    return backbone


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
    scored = [(totals[i] / counts[i], vocabulary[i]) for i in counts
              if counts[i] >= min_count]
    scored.sort(reverse=True)
    return [(word, score) for score, word in scored[:k]]


def make_pictures(args, history, entropy_history, classifier, texts, labels):
    out = args.output_dir
    viz.plot_training_curves(history, os.path.join(out, "training_curves.png"),
                             title=f"IMDB {args.model} ({keras.backend.backend()})")
    weights_model = attention_model(classifier.backbone)
    if weights_model is None:
        return
    epochs = sorted(entropy_history.entropies)
    viz.plot_entropy_histograms(
        {f"epoch {e}": entropy_history.entropies[e]
         for e in (epochs[0], epochs[-1])},
        os.path.join(out, "attention_entropy.png"),
        max_entropy=entropy_history.max_entropies,
        title=f"Attention entropy, {args.model}",
    )
    sample = min(len(texts), 2000)
    weights, token_ids = classifier.attention_weights(texts[:sample])
    probabilities = classifier.backbone.predict(token_ids, verbose=0)[:, 0]
    vocabulary = classifier.preprocessor.get_vocabulary()
    reviews = []
    for i in range(min(4, sample)):
        length = int((token_ids[i] != 0).sum())
        reviews.append({
            "words": [vocabulary[t] for t in token_ids[i][:length]],
            "weights": weights[i][:length],
            "label": f"{'positive' if labels[i] else 'negative'} review, "
                     f"P(positive) = {probabilities[i]:.2f}",
        })
    viz.plot_attention_text(reviews, os.path.join(out, "attention_text.png"),
                            title=f"Attention weights, {args.model}")
    top = top_attended_words(weights, token_ids, vocabulary,
                             min_count=3 if args.smoke else 20)
    if top:
        viz.plot_top_words([w for w, _ in top], [s for _, s in top],
                           os.path.join(out, "top_words.png"),
                           title="Most attended words (validation)",
                           xlabel="attention / uniform attention")
        print("most attended words:", ", ".join(w for w, _ in top[:15]))


def run(args):
    keras.utils.set_random_seed(args.seed)
    os.makedirs(args.output_dir, exist_ok=True)
    splits = load_splits(args)
    train_texts, train_labels = splits["train"]
    holdout = getattr(splits, "validation_holdout", None)
    print(f"IMDB: " + ", ".join(f"{k} {len(v[0])}" for k, v in splits.items())
          + f" | backend {keras.backend.backend()}")
    if holdout:
        print(f"validation: fold {args.validation_fold}, {holdout}")

    preprocessor = TextClassifierPreprocessor(args.vocab_size, args.max_length,
                                              ngrams=args.ngrams)
    preprocessor.adapt(train_texts)  # vocabulary from the training split only
    backbone = build_classifier(args, preprocessor)
    classifier = TextClassifier(backbone, preprocessor, name=model_name(args))
    print(f"{args.model}: {backbone.count_params():,} parameters, "
          f"vocabulary {preprocessor.vocabulary_size}, max length "
          f"{args.max_length}"
          + (f", trained on random {args.train_window}-word windows"
             if args.train_window else ""))

    def dataset(split, shuffle=False, window=None):
        texts, labels = splits[split]
        return token_dataset(texts, labels, preprocessor, args.batch_size,
                             shuffle=shuffle, seed=args.seed, window=window)

    train_ds = dataset("train", shuffle=True,
                       window=args.train_window or None)
    val_ds = dataset("validation") if "validation" in splits else None
    monitor_texts, monitor_labels = splits.get("validation", splits["train"])
    callbacks = []
    entropy_history = None
    weights_model = attention_model(backbone)
    if weights_model is not None:
        monitor_ids = keras.ops.convert_to_numpy(
            preprocessor(monitor_texts[:512]))
        entropy_history = AttentionEntropyHistory(weights_model, monitor_ids)
        callbacks.append(entropy_history)

    stopper = None
    if val_ds is not None and args.patience > 0:
        stopper = keras.callbacks.EarlyStopping(
            monitor="val_accuracy", patience=args.patience,
            restore_best_weights=True)
        callbacks.append(stopper)

    start = time.perf_counter()
    history = backbone.fit(train_ds, validation_data=val_ds,
                           epochs=args.epochs, callbacks=callbacks,
                           shuffle=False,  # the dataset shuffles itself
                           verbose=args.verbose)
    seconds = time.perf_counter() - start

    metrics = {
        "model": args.model,
        "backend": keras.backend.backend(),
        "epochs": len(history.history["loss"]),
        "best_epoch": (stopper.best_epoch + 1 if stopper and stopper.best_weights
                       else len(history.history["loss"])),
        "train_seconds": round(seconds, 1),
        "parameters": int(backbone.count_params()),
        "max_length": args.max_length,
        "train_window": args.train_window,
        "ngrams": args.ngrams,
        "vocabulary_size": int(preprocessor.vocabulary_size),
        "entropy_weight": args.entropy_weight,
        "word_dropout": args.word_dropout,
        "query_initializer": args.query_initializer,
        **({"query_map_scale": args.query_map_scale}
           if args.model == "query" else {}),
        "dropout": args.dropout,
        "learning_rate": args.learning_rate,
        "embedding_dim": args.embedding_dim,
        **({"rnn_cell": args.rnn_cell, "rnn_units": args.rnn_units,
            "rnn_skip": args.rnn_skip} if args.model == "rnn" else {}),
        **({"num_layers": args.num_layers, "num_heads": args.num_heads,
            "intermediate_dim": args.intermediate_dim}
           if args.model == "transformer" else {}),
        "batch_size": args.batch_size,
        "seed": args.seed,
        "validation_holdout": holdout,
        "validation_fold": args.validation_fold if holdout else None,
        "glove": args.glove,
        "smoke": args.smoke,
        "data": "synthetic" if args.smoke else (args.data_dir or "tfds"),
        "argv": args.argv,
        "history": {k: [float(v) for v in vs]
                    for k, vs in history.history.items()},
    }
    for split in splits:
        loss, accuracy = backbone.evaluate(dataset(split), verbose=0)
        metrics[f"{split}_loss"] = round(float(loss), 4)
        metrics[f"{split}_accuracy"] = round(float(accuracy), 4)

    # A fresh optimizer: Adam's moment estimates (twice the size of the
    # weights) are of no use to someone who loads the model to predict.
    backbone.compile(optimizer=keras.optimizers.Adam(args.learning_rate),
                     loss="binary_crossentropy", metrics=["accuracy"])
    model_path = save_model_atomic(
        classifier, os.path.join(args.output_dir, f"{model_name(args)}.keras"))
    if args.ship:
        save_model_atomic(classifier, os.path.join(
            ROOT, "saved_models", f"{model_name(args)}.keras"))
    write_json_atomic(metrics, os.path.join(args.output_dir, "metrics.json"))
    make_pictures(args, history.history, entropy_history, classifier,
                  monitor_texts, monitor_labels)

    scores = " ".join(f"{s} acc {metrics[f'{s}_accuracy']:.4f}"
                      for s in ("train", "validation", "test") if s in splits)
    print(f"RESULT imdb_attention model={args.model} "
          f"backend={keras.backend.backend()} {scores} "
          f"train_time={seconds:.0f}s params={metrics['parameters']} "
          f"-> {model_path}")
    return metrics


def check_setup(variant="attention", smoke=True, seed=1337, num_steps=20,
                batch_size=16, data_dir=None):
    """What `recipes/check_backends.py` compares across backends.

    Builds the `variant` classifier (dropout off) on the smoke data, or on
    real IMDB when `smoke` is False (from `data_dir` when given), with a
    vocabulary from its training split. Returns a dict with:
        model: the `TextClassifier` (fresh weights, preprocessor adapted);
        inputs: a fixed `(batch, seq)` int32 batch of token ids;
        train_batches: `num_steps` `(token_ids, labels)` NumPy batches, in a
            NumPy-seeded order;
        texts: raw review strings for saved-model agreement;
        loss: the training loss name.
    """
    argv = variant_argv(variant) + ["--seed", str(seed), "--dropout", "0"]
    if data_dir is not None:
        argv += ["--data-dir", data_dir]
    args = parse_args(argv + (["--smoke"] if smoke else []))
    keras.utils.set_random_seed(seed)
    splits = load_splits(args)
    texts, labels = splits["train"]
    preprocessor = TextClassifierPreprocessor(args.vocab_size, args.max_length,
                                              ngrams=args.ngrams)
    preprocessor.adapt(texts)
    backbone = build_classifier(args, preprocessor)
    model = TextClassifier(backbone, preprocessor, name=model_name(args))
    token_ids = np.asarray(keras.ops.convert_to_numpy(preprocessor(texts)),
                           dtype="int32")
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(texts))
    steps = [order[(i * batch_size) % len(order):][:batch_size]
             for i in range(num_steps)]
    val_texts = splits.get("validation", splits["train"])[0]
    return {
        "model": model,
        "inputs": token_ids[:batch_size],
        "train_batches": [(token_ids[i], labels[i].astype("float32"))
                          for i in steps],
        "texts": [str(t) for t in val_texts[:8]],
        "loss": "binary_crossentropy",
    }


def main(argv=None):
    args = parse_args(argv)
    try:
        return run(args)
    except DataNotFoundError as error:
        print(f"error: {error}", file=sys.stderr)
        raise SystemExit(2)


if __name__ == "__main__":
    main()
