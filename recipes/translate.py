"""Train a translation model on Multi30k German -> English and measure BLEU.

    KERAS_BACKEND=jax python recipes/translate.py --model transformer --data-dir ../shared/data/multi30k
    python recipes/translate.py --model rnn --data-dir ../shared/data/multi30k
    python recipes/translate.py --model rnn --preset base     # for a GPU
    python recipes/translate.py --smoke                        # 30-second check, offline

Models (`--model`): `transformer` (encoder-decoder Transformer) and `rnn`
(bidirectional GRU encoder, GRU decoder with Bahdanau attention), each the
preset `<model>_cpu_small` of `zoo.models.seq2seq` unless `--preset` names
another; flags override the preset. One SentencePiece vocabulary is
learned on the training split of both languages. The `Translator` task
trains on raw sentence pairs (its preprocessor runs in `tf.data`).

Writes to `--output-dir`: `metrics.json` (sacreBLEU on validation, and on
test when the data has it: cased and detokenised with sacreBLEU's default
tokeniser, and lowercased for comparison with published tables),
`training_curves.png`, `alignments.png` (attention of generated words over
source words) and `translate_de_en[_rnn].keras`; `--ship` also writes it to
`saved_models/`. The saved model keeps the sampler BLEU was measured with
(`--beam`, `--length-penalty`) and translates raw strings with it under any
backend:

    import zoo
    translator = zoo.saving.load_model("saved_models/translate_de_en.keras")
    translator.generate(["Zwei Hunde spielen im Schnee."])  # its saved sampler
    translator.generate(["Zwei Hunde spielen im Schnee."], sampler="greedy")

A longer schedule from a saved model, ending on the mean of its last
epochs' weights (`--init-from`, `--average-epochs`):

    python recipes/translate.py --init-from saved_models/translate_de_en.keras \
        --data-dir ../shared/data/multi30k --epochs 5 --schedule cosine \
        --learning-rate 2e-4 --warmup-steps 0 --average-epochs 3
"""

import argparse
import os
import sys
import time

import keras
import numpy as np

import zoo  # noqa: F401  (first: a quiet framework start-up)
from zoo import viz
from zoo.callbacks import (
    AverageLastEpochs,
    Throughput,
    finish_run,
    resume_callbacks,
    resumed_history,
)
from zoo.cli import (
    HelpFormatter,
    accelerator_metrics,
    add_accelerator_flags,
    add_average_epochs_flag,
    add_preset_flags,
    fill_from_preset,
    non_negative_int,
    positive_float,
    positive_int,
    rate,
    setup_accelerators,
)
from zoo.data.download import DataNotFoundError
from zoo.data.multi30k import (
    load_multi30k,
    make_synthetic_pairs,
)
from zoo.data.text import pair_dataset
from zoo.data.tokenizers import train_subword_tokenizer
from zoo.distribute import even_batches
from zoo.models.generation import get_sampler
from zoo.models.quantization import quantize_matrices
from zoo.models.seq2seq import (
    PRESETS,
    RNNSeq2SeqBackbone,
    TranslationPreprocessor,
    Translator,
)
from zoo.saving import (
    ModelFileError,
    load_model,
    remove_temporaries,
    save_model_atomic,
    write_json_atomic,
)
from zoo.schedules import InverseSquareRootSchedule

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

MODELS = ("transformer", "rnn")
SCHEDULES = ("inverse_sqrt", "cosine", "constant")
TRANSFORMER_FLAGS = (
    "num_layers",
    "num_heads",
    "hidden_dim",
    "intermediate_dim",
    "positions",
    "norm_first",
    "attention_dropout",
)
RNN_FLAGS = (
    "embedding_dim",
    "encoder_units",
    "decoder_units",
    "attention",
    "attention_units",
)
TRAINING_FLAGS = (
    "epochs",
    "batch_size",
    "learning_rate",
    "warmup_steps",
    "schedule",
    "label_smoothing",
    "weight_decay",
)
# Source lengths (characters) that separate the length buckets of batches.
BUCKETS = (40, 55, 70, 90, 120)
SMOKE_PAIRS = (1200, 100)
ALIGNMENT_SENTENCES = 3

# For recipes/check_backends.py.
SIZES = ["cpu-small", "base"]  # --preset cpu-small: <model>_cpu_small
CHECK_VARIANTS = ("transformer", "rnn")
CHECK_FULL_METRICS = {"validation_bleu": 1.0}


def variant_argv(variant):
    return ["--model", variant]


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description="German -> English translation on Multi30k (any backend).",
        formatter_class=HelpFormatter,
    )
    parser.add_argument(
        "--model",
        choices=MODELS,
        default=None,
        help="the preset <model>_cpu_small (default: transformer)",
    )
    parser.add_argument(
        "--preset",
        choices=SIZES + PRESETS.names(),
        default=None,
        help="cpu-small or base (of --model), or a seq2seq "
        "preset's full name (zoo.models.seq2seq.PRESETS); "
        "flags below override it",
    )
    parser.add_argument(
        "--data-dir",
        default=None,
        help="folder with train.{de,en}, val.{de,en} [and "
        "test_2016_flickr.{de,en}]; default: download "
        "Multi30k with keras.utils.get_file",
    )
    add_preset_flags(
        parser,
        (
            ("epochs", positive_int, "training epochs"),
            ("batch-size", positive_int, "sentence pairs per step"),
            ("learning-rate", positive_float, "peak learning rate (Adam)"),
            ("warmup-steps", non_negative_int, "linear warm-up steps"),
            ("label-smoothing", rate, "label smoothing of the loss"),
            ("weight-decay", float, "AdamW weight decay (0: Adam)"),
            (
                "vocab-size",
                positive_int,
                "SentencePiece pieces, both languages together",
            ),
            ("dropout", rate, "dropout rate"),
            (
                "num-layers",
                positive_int,
                "transformer: encoder and decoder blocks",
            ),
            ("num-heads", positive_int, "transformer: attention heads"),
            ("hidden-dim", positive_int, "transformer: model width"),
            ("intermediate-dim", positive_int, "transformer: MLP width"),
            ("embedding-dim", positive_int, "rnn: token embedding size"),
            ("encoder-units", positive_int, "rnn: GRU units per direction"),
            ("decoder-units", positive_int, "rnn: decoder GRU units"),
            ("attention-units", positive_int, "rnn: additive score size"),
        ),
    )
    parser.add_argument(
        "--attention-dropout",
        type=rate,
        default=None,
        help="transformer: dropout on the attention weights "
        "alone (default: --dropout); 0 trains on the fused "
        "attention kernel (flash/cuDNN on a GPU)",
    )
    parser.add_argument(
        "--schedule",
        choices=SCHEDULES,
        default=None,
        help="learning rate after the warm-up: inverse "
        "square root, cosine to 0, or constant; default from "
        "the preset",
    )
    parser.add_argument(
        "--positions",
        choices=("sinusoidal", "learned"),
        default=None,
        help="transformer positions (default: the preset's, sinusoidal)",
    )
    parser.add_argument(
        "--norm-first",
        action="store_true",
        default=None,
        help="transformer: pre-LN blocks instead of post-LN",
    )
    parser.add_argument(
        "--attention",
        choices=("bahdanau", "luong_dot", "luong_general"),
        default=None,
        help="rnn: the attention score (default: bahdanau)",
    )
    parser.add_argument(
        "--beam",
        type=positive_int,
        default=4,
        help="beams for the BLEU evaluation and of the sampler saved "
        "with the model (1: greedy)",
    )
    parser.add_argument(
        "--length-penalty",
        type=float,
        default=0.6,
        help="beam search length penalty (GNMT's alpha), for the BLEU "
        "evaluation and saved with the model",
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=1337,
        help="seed of the weights and the shuffling",
    )
    parser.add_argument(
        "--output-dir", default=None, help="default: runs/translate/<preset>/"
    )
    parser.add_argument(
        "--ship",
        action="store_true",
        help="also save saved_models/translate_de_en"
        "[_rnn].keras, with float16 weights, and report the "
        "BLEU of that file",
    )
    parser.add_argument(
        "--int8",
        action="store_true",
        help="with --ship: store the Dense and Embedding "
        "layers as Keras int8 (int8 weights; Dense layers "
        "quantise their inputs per token as they run)",
    )
    parser.add_argument(
        "--evaluate",
        default=None,
        metavar="MODEL.keras",
        help="train nothing: measure BLEU of a saved "
        "translator on --data-dir's validation (and test) "
        "split; with --ship, ship it",
    )
    parser.add_argument(
        "--init-from",
        default=None,
        metavar="MODEL.keras",
        help="start training from a saved translator (its "
        "architecture, vocabulary and weights; the schedule "
        "and the other training flags are this run's), e.g. "
        "a longer schedule after saved_models/translate_de_en.keras",
    )
    add_average_epochs_flag(parser)
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="a tiny model on generated pairs, offline, in seconds",
    )
    add_accelerator_flags(parser)
    parser.add_argument(
        "--verbose",
        type=int,
        default=1,
        choices=(0, 1, 2),
        help="Keras progress output",
    )
    args = parser.parse_args(argv)
    if args.preset in SIZES:
        args.preset = f"{args.model or 'transformer'}_" + (
            args.preset.replace("-", "_")
        )
    if args.preset is None:
        model = args.model or "transformer"
        args.preset = (
            ("smoke" if model == "transformer" else "rnn_smoke")
            if args.smoke
            else f"{model}_cpu_small"
        )
    return fill_from_preset(
        parser, args, PRESETS, os.path.join(ROOT, "runs", "translate")
    )


def load_pairs(args):
    if args.smoke and args.data_dir is None:
        train, validation = SMOKE_PAIRS
        return {
            "train": make_synthetic_pairs(train, seed=args.seed),
            "validation": make_synthetic_pairs(validation, seed=args.seed + 1),
        }
    return load_multi30k(args.data_dir)


def backbone_overrides(args):
    names = TRANSFORMER_FLAGS if args.model == "transformer" else RNN_FLAGS
    overrides = {
        f"backbone_{n}": getattr(args, n)
        for n in names
        if getattr(args, n) is not None
    }
    overrides["backbone_dropout"] = args.dropout
    return overrides


def learning_rate(args, steps_per_epoch):
    if args.schedule == "inverse_sqrt":
        return InverseSquareRootSchedule(
            args.learning_rate, max(args.warmup_steps, 1)
        )
    if args.schedule == "cosine":
        total = max(args.epochs * steps_per_epoch - args.warmup_steps, 1)
        return keras.optimizers.schedules.CosineDecay(
            0.0 if args.warmup_steps else args.learning_rate,
            total,
            warmup_target=args.learning_rate if args.warmup_steps else None,
            warmup_steps=args.warmup_steps,
        )
    if args.warmup_steps:  # constant after a linear warm-up (alpha=1: the
        # "decay" keeps the whole rate)
        return keras.optimizers.schedules.CosineDecay(
            0.0,
            1,
            alpha=1.0,
            warmup_target=args.learning_rate,
            warmup_steps=args.warmup_steps,
        )
    return args.learning_rate


def make_optimizer(args, steps_per_epoch):
    schedule = learning_rate(args, steps_per_epoch)
    if args.weight_decay:
        optimizer = keras.optimizers.AdamW(
            schedule, weight_decay=args.weight_decay, global_clipnorm=1.0
        )
        optimizer.exclude_from_weight_decay(var_names=["bias", "gamma", "beta"])
        return optimizer
    return keras.optimizers.Adam(schedule, global_clipnorm=1.0)


def build(args, tokenizer, steps_per_epoch=100):
    preprocessor = TranslationPreprocessor.from_preset(
        args.preset, tokenizer=tokenizer
    )
    translator = Translator.from_preset(
        args.preset,
        preprocessor=preprocessor,
        name="translator",
        **backbone_overrides(args),
    )
    translator.compile(
        optimizer=make_optimizer(args, steps_per_epoch),
        label_smoothing=args.label_smoothing,
    )
    return translator


def warm_start(args, steps_per_epoch):
    """The translator of `--init-from`, compiled with this run's optimizer
    and schedule; `args.model` set to its kind. A file with int8 layers is
    one clear error (it cannot be trained further)."""
    translator = load_model(args.init_from, expected=Translator)
    if any(
        getattr(layer, "quantization_mode", None)
        for layer in translator._flatten_layers()
    ):
        raise ModelFileError(
            f"{args.init_from} has int8 layers, which do not train: "
            "start from a float model file."
        )
    args.model = (
        "rnn"
        if isinstance(translator.backbone, RNNSeq2SeqBackbone)
        else "transformer"
    )
    translator.compile(
        optimizer=make_optimizer(args, steps_per_epoch),
        label_smoothing=args.label_smoothing,
    )
    print(
        f"starting from {args.init_from} (its architecture and vocabulary; "
        "this run's schedule)"
    )
    return translator


def sampler_options(args):
    """`generate`'s sampler arguments for `--beam` and `--length-penalty`:
    greedy for one beam."""
    if args.beam == 1:
        return {"sampler": "greedy"}
    return dict(
        sampler="beam", num_beams=args.beam, length_penalty=args.length_penalty
    )


def decoding(args):
    """How `--beam` and `--length-penalty` translate, in words."""
    if args.beam == 1:
        return "greedy"
    return f"beam {args.beam}, length penalty {args.length_penalty:g}"


def compile_for_translating(translator, args):
    """Compiles `translator` as it is saved: Adam without state, the
    per-token loss, and the sampler of `--beam` and `--length-penalty`,
    which the file keeps (`generate()` without a sampler uses it)."""
    options = sampler_options(args)
    translator.compile(
        optimizer="auto",
        label_smoothing=args.label_smoothing,
        sampler=get_sampler(options.pop("sampler"), **options),
    )


def translate_all(translator, sentences, args, batch_size=64):
    options = sampler_options(args)
    out = []
    for start in range(0, len(sentences), batch_size):
        out += translator.generate(
            sentences[start : start + batch_size], **options
        )
    return out


def bleu_scores(hypotheses, references):
    """sacreBLEU, cased and detokenised (its defaults), and lowercased."""
    import sacrebleu

    cased = sacrebleu.corpus_bleu(hypotheses, [references])
    lower = sacrebleu.corpus_bleu(hypotheses, [references], lowercase=True)
    return round(cased.score, 2), round(lower.score, 2), str(cased)


def run(args):
    keras.utils.set_random_seed(args.seed)
    strategy = setup_accelerators(args, args.batch_size)
    os.makedirs(args.output_dir, exist_ok=True)
    remove_temporaries(args.output_dir)  # what a killed save left
    splits = load_pairs(args)
    train_de, train_en = splits["train"]
    print(
        "Multi30k: "
        + ", ".join(f"{k} {len(v[0])}" for k, v in splits.items())
        + f" | backend {keras.backend.backend()}"
    )
    steps = (len(train_de) + args.batch_size - 1) // args.batch_size
    if args.init_from:
        with strategy.scope():
            translator = warm_start(args, steps)
        tokenizer = translator.preprocessor.tokenizer
    else:
        tokenizer = train_subword_tokenizer(
            train_de + train_en, args.vocab_size
        )
        with strategy.scope():
            translator = build(args, tokenizer, steps)
    parameters = int(translator.count_params())
    print(
        f"{args.model} ({args.preset}): {parameters / 1e6:.2f}M parameters,"
        f" vocabulary {tokenizer.vocabulary_size()}"
    )

    train = even_batches(
        pair_dataset(
            train_de,
            train_en,
            args.batch_size,
            shuffle=True,
            seed=args.seed,
            bucket_boundaries=BUCKETS,
        ),
        strategy,
    )
    val_de, val_en = splits["validation"]
    validation = even_batches(
        pair_dataset(
            val_de, val_en, args.batch_size, bucket_boundaries=BUCKETS
        ),
        strategy,
    )
    # Batches come in length buckets: the speed counts sentence pairs.
    speed = Throughput(args.batch_size, unit="sentence_pairs")
    average = AverageLastEpochs(args.output_dir, args.average_epochs)
    start = time.perf_counter()
    # An interrupted run, even a killed one, resumes from its last finished
    # epoch (weights, optimizer, schedule step; its curves kept); the
    # backup stays until the run's files are written.
    this_run = translator.fit(
        train,
        validation_data=validation,
        epochs=args.epochs,
        callbacks=[
            speed,
            average,
            *resume_callbacks(args.output_dir),
        ],
        verbose=args.verbose,
    )
    seconds = time.perf_counter() - start
    print(speed.describe())
    if len(average.averaged) > 1:
        print(f"averaged the weights of epochs {average.averaged}")
    history, resumed_at_epoch = resumed_history(args.output_dir, this_run)
    # The trained model first, before the long BLEU measurements (a rerun
    # after an interruption here finds the backup, trains nothing and
    # measures again). A fresh optimizer: Adam's moments are of no use to
    # translate.
    with strategy.scope():
        compile_for_translating(translator, args)
    name = "translate_de_en" + ("_rnn" if args.model == "rnn" else "")
    model_path = save_model_atomic(
        translator, os.path.join(args.output_dir, f"{name}.keras")
    )

    start = time.perf_counter()
    hypotheses = translate_all(translator, val_de, args)
    translate_seconds = time.perf_counter() - start
    bleu, bleu_lower, signature = bleu_scores(hypotheses, val_en)
    metrics = {
        "model": args.model,
        "preset": args.preset,
        "backend": keras.backend.backend(),
        "parameters": parameters,
        "vocabulary_size": int(tokenizer.vocabulary_size()),
        "epochs": args.epochs,
        "resumed_at_epoch": resumed_at_epoch,
        "init_from": args.init_from,
        "averaged_epochs": average.averaged,
        "train_seconds": round(seconds, 1),
        "train_loss": round(history["loss"][-1], 4),
        "validation_loss": round(history["val_loss"][-1], 4),
        "validation_bleu": bleu,
        "validation_bleu_lowercase": bleu_lower,
        "bleu_signature": signature,
        "beam": args.beam,
        "length_penalty": args.length_penalty,
        "translate_seconds": round(translate_seconds, 1),
        "config": {
            k: getattr(args, k)
            for k in TRAINING_FLAGS
            + (TRANSFORMER_FLAGS if args.model == "transformer" else RNN_FLAGS)
            + ("dropout", "vocab_size")
        },
        "history": history,
        "smoke": args.smoke,
        **accelerator_metrics(args, strategy, speed),
        "data": "generated"
        if args.smoke and args.data_dir is None
        else (args.data_dir or "Multi30k download"),
        "samples": [
            {"source": s, "reference": r, "translation": h}
            for s, r, h in list(zip(val_de, val_en, hypotheses))[:5]
        ],
    }
    if "test" in splits:
        test_de, test_en = splits["test"]
        test_bleu, test_lower, _ = bleu_scores(
            translate_all(translator, test_de, args), test_en
        )
        metrics.update(test_bleu=test_bleu, test_bleu_lowercase=test_lower)

    if args.ship:
        metrics["shipped"] = ship(translator, name, splits, args)
    write_json_atomic(metrics, os.path.join(args.output_dir, "metrics.json"))
    viz.plot_training_curves(
        {"loss": history["loss"], "val_loss": history["val_loss"]},
        os.path.join(args.output_dir, "training_curves.png"),
        title=f"{args.preset} ({keras.backend.backend()})",
    )
    pictures = []
    for source in val_de[:ALIGNMENT_SENTENCES]:
        item = translator.alignments(source)
        pictures.append(
            {
                "source_tokens": item["source_tokens"],
                "target_tokens": item["target_tokens"],
                "weights": item["mean"],
            }
        )
    viz.plot_alignments(
        pictures,
        os.path.join(args.output_dir, "alignments.png"),
        title=f"Attention of generated words over source words, {args.model}",
    )
    for sample in metrics["samples"][:3]:
        print(
            f"  {sample['source']}\n  -> {sample['translation']}\n"
            f"     ({sample['reference']})"
        )
    test = (
        f" test BLEU {metrics['test_bleu']:.2f}"
        if "test_bleu" in metrics
        else ""
    )
    print(
        f"RESULT translate model={args.model} preset={args.preset} "
        f"backend={keras.backend.backend()} validation BLEU {bleu:.2f} "
        f"(lowercased {bleu_lower:.2f}, {decoding(args)}){test} "
        f"train_time={seconds:.0f}s params={parameters} -> {model_path}"
    )
    finish_run(args.output_dir)  # everything written: the backup can go
    return metrics


def ship(translator, name, splits, args):
    """Writes `saved_models/<name>.keras` with float16 weights (half the
    size; with `--int8`, its Dense and Embedding layers as Keras int8) and
    the settings `compile_for_translating` gave it (the sampler of `--beam`
    and `--length-penalty`), reloads it and measures its BLEU: what a user
    of the file gets."""
    if args.int8:
        quantize_matrices(translator)
    path = save_model_atomic(
        translator,
        os.path.join(ROOT, "saved_models", f"{name}.keras"),
        weights_dtype="float16",
    )
    report = {
        "path": os.path.relpath(path, ROOT),
        "megabytes": round(os.path.getsize(path) / 1e6, 2),
        **split_bleu(load_model(path, expected=Translator), splits, args),
    }
    print(
        f"shipped {report['path']} ({report['megabytes']} MB, float16 "
        f"weights{', int8 matrices' if args.int8 else ''}): validation "
        f"BLEU {report['validation_bleu']:.2f}"
    )
    return report


def split_bleu(translator, splits, args):
    """`{validation,test}_bleu[_lowercase]` of `translator` on the splits
    there are."""
    scores = {}
    for split in ("validation", "test"):
        if split in splits:
            german, english = splits[split]
            bleu, lower, _ = bleu_scores(
                translate_all(translator, german, args), english
            )
            scores.update(
                {f"{split}_bleu": bleu, f"{split}_bleu_lowercase": lower}
            )
    return scores


def evaluate_saved(args):
    """BLEU of a saved translator (`--evaluate`), and `--ship` of it."""
    translator = load_model(args.evaluate, expected=Translator)
    splits = load_pairs(args)
    metrics = {
        "model": args.evaluate,
        "beam": args.beam,
        "length_penalty": args.length_penalty,
        "backend": keras.backend.backend(),
    }
    start = time.perf_counter()
    metrics.update(split_bleu(translator, splits, args))
    metrics["translate_seconds"] = round(time.perf_counter() - start, 1)
    if args.ship:
        name = os.path.basename(args.evaluate)[: -len(".keras")]
        compile_for_translating(translator, args)
        metrics["shipped"] = ship(translator, name, splits, args)
    print(
        f"RESULT translate evaluate {args.evaluate} "
        f"backend={keras.backend.backend()} validation BLEU "
        f"{metrics['validation_bleu']:.2f} (lowercased "
        f"{metrics['validation_bleu_lowercase']:.2f}, {decoding(args)})"
    )
    return metrics


def check_setup(
    variant="transformer",
    smoke=True,
    seed=1337,
    num_steps=20,
    batch_size=8,
    data_dir=None,
):
    """What `recipes/check_backends.py` compares across backends: the
    variant's smoke-sized translator (dropout off) with a vocabulary learned
    on the generated pairs (or `data_dir`'s Multi30k), raw sentence pairs,
    and greedy translations."""
    from zoo.testing.cross_backend import CheckSetup

    argv = [
        "--model",
        variant,
        "--smoke",
        "--seed",
        str(seed),
        "--dropout",
        "0",
    ]
    if data_dir is not None:
        argv += ["--data-dir", data_dir]
    args = parse_args(argv)
    keras.utils.set_random_seed(seed)
    german, english = load_pairs(args)["train"]
    tokenizer = train_subword_tokenizer(german + english, args.vocab_size)
    model = build(args, tokenizer)
    rng = np.random.default_rng(seed)
    batches = []
    for _ in range(num_steps):
        rows = rng.choice(len(german), batch_size, replace=False)
        batches.append(([german[i] for i in rows], [english[i] for i in rows]))
    return CheckSetup(
        model=model,
        inputs={
            "encoder_text": german[:batch_size],
            "decoder_text": english[:batch_size],
        },
        train_batches=batches,
        loss=None,
        generate=dict(inputs=german[:3]),
    )


def main(argv=None):
    args = parse_args(argv)
    try:
        if args.evaluate:
            return evaluate_saved(args)
        return run(args)
    except (DataNotFoundError, ModelFileError) as error:
        print(f"error: {error}", file=sys.stderr)
        raise SystemExit(2) from None


if __name__ == "__main__":
    main()
