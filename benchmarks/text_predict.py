"""`predict` on raw texts: the zoo's text tasks against keras-hub's own
`Task.predict`, per backend, in one run.

    python benchmarks/text_predict.py                  # jax, tensorflow, torch
    KERAS_BACKEND=jax python benchmarks/text_predict.py --backends current

For each backend (a fresh process each), a BERT classifier and an IMDB
text classifier at smoke size (fresh weights, seed 0) predict `--texts`
short reviews, the way a user calls them:

- `zoo`: `task.predict(texts)`; the zoo's text tasks preprocess texts held
  in memory eagerly and predict on the arrays;
- `keras_hub`: `keras_hub.models.Task.predict(task, texts)`, keras-hub's
  path for the same model: a `tf.data` pipeline mapped over the texts,
  whose preprocessing graph is traced on every call.

After a warm-up call of each, `--repeats` interleaved rounds time one call
each, and the fastest round counts. The table shows milliseconds per call
and keras-hub / zoo (how many times faster the zoo's call is); both give
the same probabilities (the largest difference is printed). Timings are
only compared within one run on one machine.
"""

import sys

from zoo.testing.benchmarks import (
    benchmark_parser,
    fastest_rounds,
    run_benchmark,
)

TASKS = ("bert", "text")


def parse_args(argv=None):
    parser = benchmark_parser(__doc__.split("\n\n")[0])
    parser.add_argument(
        "--texts", type=int, default=8, help="reviews per predict call"
    )
    parser.add_argument(
        "--repeats",
        type=int,
        default=5,
        help="interleaved timed rounds; the fastest counts",
    )
    return parser.parse_args(argv)


def _tasks():
    """The two smoke-sized text tasks, on a small generated corpus."""
    import keras

    from zoo.data.imdb import make_synthetic_imdb
    from zoo.data.tokenizers import train_bert_tokenizer
    from zoo.models.bert import (
        BertBackbone,
        BertClassifier,
        BertClassifierPreprocessor,
    )
    from zoo.models.text_classifier import (
        TextClassifier,
        TextClassifierPreprocessor,
    )

    keras.utils.set_random_seed(0)
    texts = list(make_synthetic_imdb(200, 0, 0)["train"][0])
    tokenizer = train_bert_tokenizer(texts, 200)
    bert = BertClassifier(
        BertBackbone.from_preset(
            "smoke", vocabulary_size=tokenizer.vocabulary_size()
        ),
        BertClassifierPreprocessor(tokenizer, 64),
        num_classes=1,
    )
    preprocessor = TextClassifierPreprocessor.from_preset("imdb_attention")
    preprocessor.adapt(texts)
    text = TextClassifier.from_preset(
        "imdb_attention", preprocessor=preprocessor
    )
    return {"bert": bert, "text": text}, texts


def measure(args):
    import keras
    import keras_hub
    import numpy as np

    tasks, corpus = _tasks()
    texts = corpus[: args.texts]
    result = {"backend": keras.backend.backend(), "tasks": {}}
    for name, task in tasks.items():
        calls = {
            "zoo": lambda task=task: task.predict(texts, verbose=0),
            "keras_hub": lambda task=task: keras_hub.models.Task.predict(
                task, texts, verbose=0
            ),
        }
        difference = float(np.abs(calls["zoo"]() - calls["keras_hub"]()).max())
        seconds = fastest_rounds(calls, args.repeats)
        result["tasks"][name] = {**seconds, "max_abs_diff": difference}
    return result


def header(args):
    return (
        f"predict on {args.texts} raw texts, ms per call (fastest of "
        f"{args.repeats})\n"
        f"{'backend':<11}{'task':<6}{'zoo':>9}{'keras-hub':>11}"
        f"{'ratio':>8}{'max diff':>11}"
    )


def row(backend, result):
    lines = []
    for name, cell in result["tasks"].items():
        lines.append(
            f"{backend:<11}{name:<6}{cell['zoo'] * 1e3:9.1f}"
            f"{cell['keras_hub'] * 1e3:11.1f}"
            f"{cell['keras_hub'] / cell['zoo']:7.1f}x"
            f"{cell['max_abs_diff']:11.1e}"
        )
    return "\n".join(lines)


def main(argv=None):
    return run_benchmark(__file__, argv, parse_args, measure, header, row)


if __name__ == "__main__":
    main(sys.argv[1:])
