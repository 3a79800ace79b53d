"""BERT on IMDB: masked-LM pretraining on unlabelled reviews, then
fine-tuning, with the gain over the same model from random weights.

    python recipes/bert_imdb.py pretrain --data-dir ../shared/data/aclImdb
    python recipes/bert_imdb.py finetune --data-dir ../shared/data/aclImdb \\
        --pretrained runs/bert_imdb/cpu_mini/bert_imdb_mlm.keras --folds 0,1,2
    python recipes/bert_imdb.py all --smoke        # both, 1-minute check, offline

`pretrain` learns a WordPiece vocabulary and a `BertMaskedLM` on IMDB's
train reviews (their text only) and its 50,000 unlabelled reviews, never the
test split; 500 unlabelled reviews are held out for the masked-token loss
and accuracy. Reviews are cut into pieces of about `--sequence-length`
tokens, tokenised once, and masked anew each epoch from (seed, epoch, batch),
so an interrupted run continues exactly where its last checkpoint was:
`--resume` (checkpoints in `<output-dir>/backup` after every epoch of
`--steps-per-epoch` batches, written atomically; Ctrl-C or a kill keeps the
last one, which stays until the run's files are written).

`finetune` trains a `BertClassifier` on the pretrained backbone for each
`--folds` fold (validation holds out whole movies, as
`recipes/imdb_attention.py` does) and, unless `--no-scratch`, the same
architecture and budget from random weights on the same folds: the gain
from pretraining, paired by fold.

Writes to `--output-dir`: `vocabulary.txt`, `bert_imdb_mlm.keras`,
`pretrain_metrics.json`, `pretrain_history.csv`, `mlm_curves.png`;
`finetune_metrics.json`, `finetune_curves.png`, `head_view.png` (attention of each head of the last
layer over one review) and `imdb_bert.keras` (fold 0's classifier). `--ship`
also writes the model to `saved_models/` with float16 weights.

    import zoo
    mlm = zoo.saving.load_model("saved_models/bert_imdb_mlm.keras")
    mlm.fill_mask("this movie was [MASK] good")
    clf = zoo.saving.load_model("saved_models/imdb_bert.keras")
    clf.predict(["an utterly wonderful film", "a waste of two hours"])
"""

import argparse
import hashlib
import json
import os
import sys
import time

import keras
import numpy as np

import zoo  # noqa: F401  (first: a quiet framework start-up)
from zoo import viz
from zoo.callbacks import (
    BackupUntilDone,
    ReproducibleEpochs,
    StopAfterMinutes,
    Throughput,
    finish_run,
    read_history,
)
from zoo.cli import (
    HelpFormatter,
    accelerator_metrics,
    add_accelerator_flags,
    open_rate,
    positive_float,
    positive_int,
    rate,
    setup_accelerators,
)
from zoo.data.imdb import (
    DataNotFoundError,
    imdb_pretraining_text,
    load_imdb,
    make_synthetic_imdb,
)
from zoo.data.masked_lm import (
    MaskedLMBatches,
    compact_ids,
    load_or_train_bert_tokenizer,
    load_packed_corpus,
    pack_texts,
    packed_corpus,
    split_into_pieces,
    words_per_piece,
)
from zoo.data.tokenizers import bert_tokenizer, train_bert_tokenizer
from zoo.distribute import trim_to_replicas
from zoo.models.bert import (
    PRESETS,
    BertBackbone,
    BertClassifier,
    BertClassifierPreprocessor,
    BertMaskedLM,
    BertMaskedLMPreprocessor,
)
from zoo.saving import (
    ModelFileError,
    atomic_path,
    load_model,
    remove_temporaries,
    save_model_atomic,
    write_json_atomic,
)
from zoo.schedules import warmup_cosine

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

MLM_VALIDATION_REVIEWS = 500
FILL_MASK_EXAMPLES = (
    "this movie was [MASK] good.",
    "the acting was [MASK] and the plot made no sense.",
    "one of the best [MASK] i have ever seen.",
)
HEAD_VIEW_TOKENS = 40


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description="BERT on IMDB: masked-LM pretraining, then fine-tuning "
        "(any backend).",
        formatter_class=HelpFormatter,
    )
    commands = parser.add_subparsers(
        dest="command", required=True, metavar="{pretrain,finetune,all}"
    )
    pretrain = commands.add_parser(
        "pretrain",
        help="masked-LM pretraining on train + unsup text",
        formatter_class=HelpFormatter,
    )
    finetune = commands.add_parser(
        "finetune",
        help="fine-tune (and train from scratch) on folds",
        formatter_class=HelpFormatter,
    )
    both = commands.add_parser(
        "all",
        help="pretrain, then fine-tune the result",
        formatter_class=HelpFormatter,
    )
    for sub in (pretrain, finetune, both):
        _common_flags(sub)
    for sub in (pretrain, both):
        _pretrain_flags(sub)
    for sub in (finetune, both):
        _finetune_flags(sub)
    finetune.add_argument(
        "--pretrained",
        default=None,
        metavar="MLM.keras",
        help="the pretrained masked LM (default: "
        "<output-dir>/bert_imdb_mlm.keras)",
    )
    args = parser.parse_args(argv)
    return resolve(parser, args)


def _common_flags(parser):
    parser.add_argument(
        "--preset",
        choices=PRESETS.names(),
        default=None,
        help="a zoo.models.bert preset (default: cpu_mini; smoke with --smoke)",
    )
    parser.add_argument(
        "--data-dir",
        default=None,
        help="an aclImdb folder (train/{pos,neg,unsup}); "
        "default: tensorflow-datasets' imdb_reviews",
    )
    parser.add_argument("--seed", type=int, default=1337)
    parser.add_argument(
        "--output-dir", default=None, help="default: runs/bert_imdb/<preset>/"
    )
    parser.add_argument(
        "--ship",
        action="store_true",
        help="also write the model(s) to saved_models/ (float16 weights)",
    )
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="generated reviews and the smoke preset: the "
        "same code path in about a minute, offline",
    )
    parser.add_argument(
        "--verbose",
        type=int,
        default=1,
        choices=(0, 1, 2),
        help="Keras progress output",
    )
    add_accelerator_flags(parser)


def _pretrain_flags(parser):
    group = parser.add_argument_group("pretraining (defaults: the preset's)")
    group.add_argument("--epochs", type=positive_int, default=None)
    group.add_argument(
        "--steps-per-epoch",
        type=positive_int,
        default=None,
        help="batches per epoch (a checkpoint each epoch); "
        "default: the preset's, or one pass over the text",
    )
    group.add_argument("--batch-size", type=positive_int, default=None)
    group.add_argument(
        "--learning-rate",
        type=positive_float,
        default=None,
        help="peak of the warm-up + cosine schedule",
    )
    group.add_argument(
        "--sequence-length",
        type=positive_int,
        default=None,
        help="tokens per pretraining piece",
    )
    group.add_argument("--vocab-size", type=positive_int, default=None)
    group.add_argument(
        "--mask-rate",
        type=open_rate,
        default=0.15,
        help="share of the ordinary tokens chosen for prediction, in (0, 1)",
    )
    group.add_argument(
        "--warmup-fraction",
        type=rate,
        default=None,
        help="share of the steps warming up",
    )
    group.add_argument(
        "--dropout",
        type=rate,
        default=None,
        help="backbone dropout while pretraining (the "
        "saved model keeps it for fine-tuning)",
    )
    group.add_argument(
        "--attention-dropout",
        type=rate,
        default=None,
        help="dropout on the attention weights alone "
        "(default: --dropout); 0 trains on the fused "
        "attention kernel (flash/cuDNN on a GPU)",
    )
    group.add_argument(
        "--norm-first",
        action="store_true",
        default=None,
        help="pre-LN blocks and a final LayerNorm instead of BERT's post-LN",
    )
    group.add_argument(
        "--max-minutes",
        type=positive_float,
        default=None,
        help="stop (at an epoch's end) before this budget "
        "runs out; --resume continues later",
    )
    group.add_argument(
        "--resume",
        action="store_true",
        help="continue the run in --output-dir from its last checkpoint",
    )
    group.add_argument(
        "--prepare-only",
        action="store_true",
        help="tokenise and pack the text into "
        "<output-dir>/packed_<length>.npz (the vocabulary "
        "inside) and stop",
    )
    group.add_argument(
        "--packed",
        default=None,
        metavar="PACKED.npz",
        help="pretrain on a corpus packed earlier by "
        "--prepare-only: no text and no TensorFlow needed "
        "(an accelerator machine)",
    )


def _finetune_flags(parser):
    group = parser.add_argument_group("fine-tuning (defaults: the preset's)")
    group.add_argument(
        "--folds",
        default="0",
        help="validation folds, comma-separated, each in "
        "[0, 5): the gain is paired by fold",
    )
    group.add_argument("--finetune-epochs", type=positive_int, default=None)
    group.add_argument("--finetune-batch-size", type=positive_int, default=None)
    group.add_argument(
        "--finetune-learning-rate", type=positive_float, default=None
    )
    group.add_argument(
        "--finetune-sequence-length", type=positive_int, default=None
    )
    group.add_argument(
        "--finetune-truncate",
        choices=("round_robin", "head_tail"),
        default="round_robin",
        help="how a review longer than the length is cut: keep its "
        "opening (keras-hub's round_robin, the default) or its opening and "
        "ending (head_tail, Sun et al. 2019)",
    )
    group.add_argument(
        "--finetune-head-length",
        type=int,
        default=None,
        help="with head_tail: opening tokens kept (default: a quarter)",
    )
    group.add_argument(
        "--no-scratch",
        action="store_true",
        help="skip the from-scratch baseline",
    )


def resolve(parser, args):
    if args.preset is None:
        args.preset = "smoke" if args.smoke else "cpu_mini"
    if args.output_dir is None:
        args.output_dir = os.path.join(ROOT, "runs", "bert_imdb", args.preset)
    training = PRESETS.part(args.preset, "training")
    preprocessor = PRESETS.part(args.preset, "preprocessor")
    pretraining = {**training["pretraining"], **preprocessor["masked_lm"]}
    finetuning = {
        **training["finetuning"],
        **preprocessor["classifier"],
        **PRESETS.part(args.preset, "task")["classifier"],
    }
    if args.command in ("pretrain", "all"):
        for key in (
            "epochs",
            "steps_per_epoch",
            "batch_size",
            "learning_rate",
            "sequence_length",
        ):
            if getattr(args, key) is None:
                setattr(args, key, pretraining[key])
        if args.warmup_fraction is None:
            args.warmup_fraction = pretraining["warmup_fraction"]
        args.weight_decay = pretraining["weight_decay"]
        backbone = PRESETS.part(args.preset, "backbone")
        if args.dropout is None:
            args.dropout = backbone["dropout"]
        if args.norm_first is None:
            args.norm_first = backbone.get("norm_first", False)
        if args.vocab_size is None:
            args.vocab_size = PRESETS.part(args.preset, "tokenizer")[
                "vocabulary_size"
            ]
        backbone = PRESETS.part(args.preset, "backbone")
        if args.sequence_length > backbone["max_sequence_length"]:
            parser.error(
                f"--sequence-length {args.sequence_length} is "
                "longer than the preset's "
                f"{backbone['max_sequence_length']} positions"
            )
    if args.command in ("finetune", "all"):
        for key in ("epochs", "batch_size", "learning_rate", "sequence_length"):
            flag = f"finetune_{key}"
            if getattr(args, flag) is None:
                setattr(args, flag, finetuning[key])
        args.finetune_warmup_fraction = finetuning["warmup_fraction"]
        args.finetune_weight_decay = finetuning["weight_decay"]
        args.finetune_dropout = finetuning["dropout"]
        try:
            args.folds = sorted({int(f) for f in str(args.folds).split(",")})
        except ValueError:
            parser.error(
                f"--folds {args.folds!r}: expected integers like 0,1,2"
            )
        if not all(0 <= f < 5 for f in args.folds):
            parser.error(f"--folds {args.folds}: each fold is in [0, 5)")
        if (
            args.finetune_head_length is not None
            and args.finetune_truncate != "head_tail"
        ):
            parser.error(
                "--finetune-head-length needs --finetune-truncate head_tail"
            )
        room = args.finetune_sequence_length - 2
        if args.finetune_truncate == "head_tail":
            if args.finetune_head_length is None:
                args.finetune_head_length = room // 4
            if not 0 <= args.finetune_head_length <= room:
                parser.error(
                    f"--finetune-head-length {args.finetune_head_length}: "
                    f"a packed review holds {room} tokens of text"
                )
        if args.command == "finetune" and args.pretrained is None:
            args.pretrained = os.path.join(
                args.output_dir, "bert_imdb_mlm.keras"
            )
    return args


# --- data -------------------------------------------------------------------


def pretraining_text(args):
    """(pretraining texts, held-out texts): train's reviews (text only) and
    the unlabelled ones, minus MLM_VALIDATION_REVIEWS unlabelled ones (40
    of the generated ones under --smoke)."""
    synthetic = args.smoke and args.data_dir is None
    return imdb_pretraining_text(
        args.data_dir,
        held_out=40 if synthetic else MLM_VALIDATION_REVIEWS,
        seed=args.seed,
        synthetic=synthetic,
    )


def classification_splits(args, fold):
    if args.smoke and args.data_dir is None:
        return make_synthetic_imdb(
            num_train=480, num_validation=160, num_test=0, seed=args.seed + fold
        )
    return load_imdb(args.data_dir, 0.2, args.seed, validation_fold=fold)


# --- pretraining --------------------------------------------------------------


def load_packed(args):
    """(tokenizer, train ids, held-out ids, reviews) from `--packed`."""
    try:
        corpus = load_packed_corpus(args.packed)
    except FileNotFoundError:
        raise SystemExit(
            f"error: --packed {args.packed}: no such file; "
            "write one with `pretrain --prepare-only`"
        ) from None
    except (OSError, ValueError, KeyError) as error:
        raise SystemExit(
            f"error: --packed {args.packed} is not a packed "
            f"corpus ({type(error).__name__}: {error}); "
            "write one with `pretrain --prepare-only`"
        ) from None
    length = corpus.train.shape[1]
    if length != args.sequence_length:
        raise SystemExit(
            f"error: --packed {args.packed} holds pieces of {length} tokens;"
            f" pass --sequence-length {length} (or pack again)"
        )
    return (
        bert_tokenizer(corpus.vocabulary),
        corpus.train,
        corpus.validation,
        corpus.reviews,
    )


def pretrain(args):
    keras.utils.set_random_seed(args.seed)
    strategy = setup_accelerators(args, args.batch_size)
    os.makedirs(args.output_dir, exist_ok=True)
    remove_temporaries(args.output_dir)  # what a killed save left
    backup = os.path.join(args.output_dir, "backup")
    if os.path.isdir(backup) and not args.resume:
        raise SystemExit(
            f"error: {args.output_dir} holds an unfinished run (backup/). "
            "Pass --resume to continue it, or another --output-dir."
        )
    start = time.perf_counter()
    if args.packed:
        tokenizer, token_ids, validation_ids, reviews = load_packed(args)
    else:
        texts, held_out = pretraining_text(args)
        reviews = len(texts)
        per_piece = words_per_piece(args.sequence_length)
        pieces = split_into_pieces(texts, per_piece)
        validation_pieces = split_into_pieces(held_out, per_piece)
        tokenizer = load_or_train_bert_tokenizer(
            os.path.join(args.output_dir, "vocabulary.txt"),
            pieces,
            args.vocab_size,
            reuse=args.resume,
        )
        # Kept with the vocabulary and counts (what --packed reads) and
        # read back by a later run with the same inputs.
        packed = os.path.join(
            args.output_dir, f"packed_{args.sequence_length}.npz"
        )
        token_ids, validation_ids = packed_corpus(
            packed,
            tokenizer,
            pieces,
            validation_pieces,
            args.sequence_length,
            reviews,
        )
        if args.prepare_only:
            print(
                f"RESULT bert_imdb prepare {len(pieces)} pieces of <= "
                f"{args.sequence_length} tokens from {reviews} reviews, "
                f"vocabulary {tokenizer.vocabulary_size()} -> {packed}"
            )
            return {"packed": packed}
    (validation_ids,), _ = trim_to_replicas((validation_ids,), strategy)
    data_seconds = time.perf_counter() - start
    real_tokens = int((token_ids != tokenizer.pad_token_id).sum())
    print(
        f"pretraining text: {reviews} reviews -> {len(token_ids)} pieces "
        f"of <= {args.sequence_length} tokens ({real_tokens / 1e6:.1f}M "
        f"tokens), vocabulary {tokenizer.vocabulary_size()}; held out "
        f"{len(validation_ids)} pieces; {data_seconds:.0f} s | backend "
        f"{keras.backend.backend()}"
    )

    preprocessor = BertMaskedLMPreprocessor(
        tokenizer,
        sequence_length=args.sequence_length,
        mask_selection_rate=args.mask_rate,
    )
    with strategy.scope():
        mlm = BertMaskedLM.from_preset(
            args.preset,
            preprocessor=preprocessor,
            backbone_dropout=args.dropout,
            backbone_attention_dropout=args.attention_dropout,
            backbone_norm_first=args.norm_first,
            name="bert_masked_lm",
        )
    mask_options = dict(
        mask_rate=args.mask_rate,
        mask_selection_length=preprocessor.mask_selection_length,
    )
    batches = MaskedLMBatches(
        token_ids,
        args.batch_size,
        tokenizer,
        seed=args.seed,
        steps_per_epoch=args.steps_per_epoch,
        **mask_options,
    )
    validation = MaskedLMBatches(
        validation_ids,
        min(args.batch_size, len(validation_ids)),
        tokenizer,
        seed=args.seed,
        shuffle=False,
        **mask_options,
    )
    total_steps = args.epochs * len(batches)
    with strategy.scope():
        mlm.compile(
            optimizer=keras.optimizers.AdamW(
                warmup_cosine(
                    args.learning_rate,
                    total_steps,
                    args.warmup_fraction,
                    alpha=0.1,
                ),
                weight_decay=args.weight_decay,
                global_clipnorm=1.0,
            )
        )
    print(
        f"BertMaskedLM ({args.preset}): "
        f"{mlm.count_params() / 1e6:.2f}M parameters; {args.epochs} epochs "
        f"x {len(batches)} batches of {args.batch_size} "
        f"({total_steps * args.batch_size / len(token_ids):.2f} passes)"
    )
    stopper = StopAfterMinutes(
        args.max_minutes or float("inf"), note="; --resume continues"
    )
    history_path = os.path.join(args.output_dir, "pretrain_history.csv")
    # Packed positions (padding included) per second of training; first,
    # so its clock stops before the others' epoch-end work.
    speed = Throughput(args.batch_size * args.sequence_length, unit="tokens")
    callbacks = [
        speed,
        ReproducibleEpochs(args.seed, [batches]),
        # Every finished epoch's figures, kept across interruptions.
        keras.callbacks.CSVLogger(history_path, append=args.resume),
        # Kept when --max-minutes stops the run or it is killed, even after
        # training: --resume continues; removed once the run's files are
        # written.
        BackupUntilDone(backup),
        stopper,
    ]
    start = time.perf_counter()
    this_run = mlm.fit(
        batches,
        validation_data=validation,
        epochs=args.epochs,
        callbacks=callbacks,
        verbose=args.verbose,
    )
    seconds = time.perf_counter() - start
    print(speed.describe())
    history = read_history(history_path)
    history["epochs_this_run"] = len(this_run.history.get("loss", []))
    if stopper.stopped:
        print(
            f"RESULT bert_imdb pretrain stopped after "
            f"{len(history['loss'])} of {args.epochs} epochs; resume with "
            "--resume"
        )
        return {"stopped": True, "history": history}

    loss, accuracy = mlm.evaluate(validation, verbose=0)
    examples = mlm.fill_mask(list(FILL_MASK_EXAMPLES), top_k=5)
    metrics = {
        "preset": args.preset,
        "backend": keras.backend.backend(),
        "parameters": int(mlm.count_params()),
        "vocabulary_size": int(tokenizer.vocabulary_size()),
        "reviews": reviews,
        "pieces": len(token_ids),
        "tokens": real_tokens,
        "sequence_length": args.sequence_length,
        "epochs": args.epochs,
        "steps_per_epoch": len(batches),
        "batch_size": args.batch_size,
        "learning_rate": args.learning_rate,
        "warmup_fraction": args.warmup_fraction,
        "dropout": args.dropout,
        "attention_dropout": mlm.backbone.attention_dropout,
        "norm_first": args.norm_first,
        "passes": round(total_steps * args.batch_size / len(token_ids), 3),
        "train_seconds_this_run": round(seconds, 1),
        "validation_mlm_loss": round(float(loss), 4),
        "validation_mlm_accuracy": round(float(accuracy), 4),
        "fill_mask": {
            text: [
                [token for token, _ in candidates] for candidates in per_text
            ]
            for text, per_text in zip(FILL_MASK_EXAMPLES, examples)
        },
        "history": history,
        "smoke": args.smoke,
        **accelerator_metrics(args, strategy, speed),
        "data": args.packed
        or (
            "generated"
            if args.smoke and args.data_dir is None
            else (args.data_dir or "tensorflow-datasets")
        ),
    }
    # A fresh optimizer: AdamW's moments are of no use afterwards.
    with strategy.scope():
        mlm.compile(optimizer="auto")
    path = save_model_atomic(
        mlm, os.path.join(args.output_dir, "bert_imdb_mlm.keras")
    )
    if args.ship:
        metrics["shipped"] = os.path.relpath(
            save_model_atomic(
                mlm,
                os.path.join(ROOT, "saved_models", "bert_imdb_mlm.keras"),
                weights_dtype="float16",
            ),
            ROOT,
        )
    write_json_atomic(
        metrics, os.path.join(args.output_dir, "pretrain_metrics.json")
    )
    viz.plot_training_curves(
        {
            "loss": history["loss"],
            "val_loss": history["val_loss"],
            "accuracy": history["sparse_categorical_accuracy"],
            "val_accuracy": history["val_sparse_categorical_accuracy"],
        },
        os.path.join(args.output_dir, "mlm_curves.png"),
        title=f"masked-LM pretraining, {args.preset} "
        f"({keras.backend.backend()})",
    )
    for text, per_text in zip(FILL_MASK_EXAMPLES, examples):
        print(f"  {text} -> {', '.join(t for t, _ in per_text[0])}")
    print(
        f"RESULT bert_imdb pretrain preset={args.preset} "
        f"backend={keras.backend.backend()} masked-token accuracy "
        f"{accuracy:.4f} loss {loss:.4f} (held-out reviews) "
        f"train_time={seconds:.0f}s params={mlm.count_params()} -> {path}"
    )
    finish_run(args.output_dir)  # everything written: the backup can go
    return metrics


# --- fine-tuning --------------------------------------------------------------


class EncodedReviews:
    """Reviews -> the classifier preprocessor's arrays, each review encoded
    once per run and kept in <output-dir>/encoded_<length>.npz for later
    runs with the same vocabulary (folds and the from-scratch baseline
    share it). Fine-tuning then fits arrays: no TensorFlow needed where the
    file already holds every review (an accelerator machine)."""

    def __init__(self, args, preprocessor):
        self.preprocessor = preprocessor
        cut = ""
        if preprocessor.truncate == "head_tail":
            cut = f"_head_tail_{preprocessor.head_length}"
        self.path = os.path.join(
            args.output_dir,
            f"encoded_{preprocessor.sequence_length}{cut}.npz",
        )
        self.key = hashlib.sha256(
            "\n".join(
                preprocessor.tokenizer.get_vocabulary()
                + [str(preprocessor.sequence_length), cut]
            ).encode()
        ).hexdigest()
        self.rows, self.ids = {}, []
        if os.path.exists(self.path):
            with np.load(self.path) as cached:
                if str(cached["key"]) == self.key:
                    self.ids = list(cached["token_ids"].astype("int32"))
                    self.rows = {
                        d: i for i, d in enumerate(cached["digests"].tolist())
                    }

    @staticmethod
    def digest(text):
        return hashlib.sha1(str(text).encode("utf-8")).hexdigest()

    def __call__(self, texts):
        digests = [self.digest(t) for t in texts]
        missing = {d: t for d, t in zip(digests, texts) if d not in self.rows}
        if missing:
            new = list(missing.items())
            for start in range(0, len(new), 1024):
                chunk = new[start : start + 1024]
                ids = keras.ops.convert_to_numpy(
                    self.preprocessor([str(t) for _, t in chunk])["token_ids"]
                )
                for (d, _), row in zip(chunk, ids):
                    self.rows[d] = len(self.ids)
                    self.ids.append(np.asarray(row, "int32"))
            self.save()
        token_ids = np.stack([self.ids[self.rows[d]] for d in digests])
        pad = self.preprocessor.tokenizer.pad_token_id
        return {
            "token_ids": token_ids,
            "segment_ids": np.zeros_like(token_ids),
            "padding_mask": token_ids != pad,
        }

    def save(self):
        order = sorted(self.rows, key=self.rows.get)
        with atomic_path(self.path) as tmp:
            np.savez_compressed(
                tmp,
                key=np.array(self.key),
                digests=np.array(order),
                token_ids=compact_ids(
                    np.stack(self.ids),
                    self.preprocessor.tokenizer.vocabulary_size(),
                ),
            )


def finetune_one(args, make_classifier, splits, label, strategy):
    """Trains one classifier for the fine-tuning budget on the encoded
    reviews; returns it, its history and its validation accuracy after the
    last epoch."""
    (train_x, train_y), (val_x, val_y) = splits
    with strategy.scope():
        classifier = make_classifier()
    steps = args.finetune_epochs * -(-len(train_y) // args.finetune_batch_size)
    with strategy.scope():
        classifier.compile(
            optimizer=keras.optimizers.AdamW(
                warmup_cosine(
                    args.finetune_learning_rate,
                    steps,
                    args.finetune_warmup_fraction,
                    alpha=0.1,
                ),
                weight_decay=args.finetune_weight_decay,
                global_clipnorm=1.0,
            )
        )
    start = time.perf_counter()
    # Keras' own fit on arrays (the task's would run its preprocessor on
    # what is already token ids); reshuffled every epoch.
    history = keras.Model.fit(
        classifier,
        train_x,
        train_y,
        batch_size=args.finetune_batch_size,
        epochs=args.finetune_epochs,
        shuffle=True,
        validation_data=(val_x, val_y),
        verbose=args.verbose,
    )
    seconds = time.perf_counter() - start
    history = {k: [float(v) for v in vs] for k, vs in history.history.items()}
    accuracy = history["val_accuracy"][-1]
    print(f"  {label}: validation accuracy {accuracy:.4f} ({seconds:.0f} s)")
    return classifier, history, accuracy, seconds


def fold_settings(args):
    """What a fold's result depends on: a stored fold is reused only when
    these match."""
    return {
        "preset": args.preset,
        "seed": args.seed,
        "smoke": args.smoke,
        "mixed_precision": args.mixed_precision,
        "pretrained_model": os.path.abspath(args.pretrained),
        "pretrained_modified": os.path.getmtime(args.pretrained),
        "scratch": not args.no_scratch,
        **{
            k: getattr(args, k) for k in vars(args) if k.startswith("finetune_")
        },
    }


def load_fold(folder, fold, settings):
    """A fold finished by an earlier run with the same settings, or None."""
    path = os.path.join(folder, f"fold_{fold}.json")
    model = os.path.join(folder, f"fold_{fold}_classifier.keras")
    if not (os.path.exists(path) and os.path.exists(model)):
        return None
    with open(path) as f:
        stored = json.load(f)
    return stored if stored.get("settings") == settings else None


def finetune_fold(args, fold, strategy):
    """Fine-tunes the pretrained model and (unless --no-scratch) the same
    architecture from random weights on one fold; returns the fold's row,
    its curves and the fine-tuned classifier."""
    keras.utils.set_random_seed(args.seed + fold)
    splits = classification_splits(args, fold)
    print(
        f"fold {fold}: train {len(splits['train'][0])}, validation "
        f"{len(splits['validation'][0])} "
        f"({getattr(splits, 'validation_holdout', None) or 'generated'})"
        f" | backend {keras.backend.backend()}"
    )

    def pretrained():
        # In --mixed-precision's policy, whatever the file was saved in.
        return BertClassifier.from_pretrained(
            mlm,
            sequence_length=args.finetune_sequence_length,
            truncate=args.finetune_truncate,
            head_length=args.finetune_head_length,
            dtype=keras.config.dtype_policy().name,
            dropout=args.finetune_dropout,
            name="bert_classifier",
        )

    # Loaded for each fold: the classifier fine-tunes the masked LM's own
    # backbone object, so a model shared by the folds would carry one
    # fold's fine-tuning into the next.
    mlm = load_model(args.pretrained, expected=BertMaskedLM)
    preprocessor = BertClassifierPreprocessor(
        mlm.preprocessor.tokenizer,
        sequence_length=args.finetune_sequence_length,
        truncate=args.finetune_truncate,
        head_length=args.finetune_head_length,
    )
    encode = EncodedReviews(args, preprocessor)
    arrays = []
    for part in ("train", "validation"):
        texts, labels = splits[part]
        (x, y), _ = trim_to_replicas(
            (encode(texts), np.asarray(labels, "float32")), strategy
        )
        arrays.append((x, y))
    classifier, history, accuracy, seconds = finetune_one(
        args, pretrained, arrays, "pretrained", strategy
    )
    row = {
        "fold": fold,
        "pretrained": accuracy,
        "pretrained_seconds": round(seconds, 1),
    }
    curves = {"pretrained": history}
    if not args.no_scratch:
        tokenizer = preprocessor.tokenizer
        keras.utils.set_random_seed(args.seed + fold)

        architecture = {
            **classifier.backbone.get_config(),
            "dtype": keras.config.dtype_policy().name,
        }

        def scratch():  # the pretrained model's architecture, fresh weights
            return BertClassifier(
                BertBackbone.from_config(architecture),
                BertClassifierPreprocessor(
                    tokenizer,
                    sequence_length=args.finetune_sequence_length,
                    truncate=args.finetune_truncate,
                    head_length=args.finetune_head_length,
                ),
                dropout=args.finetune_dropout,
                name="bert_classifier",
            )

        _, history, accuracy, seconds = finetune_one(
            args, scratch, arrays, "from scratch", strategy
        )
        row.update(
            scratch=accuracy,
            scratch_seconds=round(seconds, 1),
            gain=row["pretrained"] - accuracy,
        )
        curves["scratch"] = history
    return row, curves, classifier, splits["validation"][0]


def finetune(args):
    """Every fold of --folds; a fold finished by an earlier run with the
    same settings (in <output-dir>/folds/) is reused, so an interrupted
    comparison continues where it stopped."""
    os.makedirs(args.output_dir, exist_ok=True)
    if not os.path.exists(args.pretrained):
        raise SystemExit(
            f"error: no pretrained model at {args.pretrained}; "
            "run the pretrain command first or pass "
            "--pretrained"
        )
    strategy = setup_accelerators(args, args.finetune_batch_size)
    folder = os.path.join(args.output_dir, "folds")
    os.makedirs(folder, exist_ok=True)
    for path in (args.output_dir, folder):
        remove_temporaries(path)  # what a killed save left
    settings = fold_settings(args)
    results, first = [], None
    for fold in args.folds:
        stored = load_fold(folder, fold, settings)
        if stored is not None:
            print(
                f"fold {fold}: finished earlier, reused "
                f"({os.path.join(folder, f'fold_{fold}.json')})"
            )
            row, curves = stored["row"], stored["curves"]
        else:
            row, curves, classifier, _ = finetune_fold(args, fold, strategy)
            with strategy.scope():
                classifier.compile(optimizer="auto")
            save_model_atomic(
                classifier,
                os.path.join(folder, f"fold_{fold}_classifier.keras"),
            )
            write_json_atomic(
                {"settings": settings, "row": row, "curves": curves},
                os.path.join(folder, f"fold_{fold}.json"),
            )
        results.append(row)
        if first is None:
            first = (fold, curves)

    # The first fold's fine-tuned classifier is the one shipped and drawn.
    fold, curves = first
    classifier = load_model(
        os.path.join(folder, f"fold_{fold}_classifier.keras"),
        expected=BertClassifier,
    )
    summary = summarize(results)
    metrics = {
        "preset": args.preset,
        "backend": keras.backend.backend(),
        "pretrained_model": args.pretrained,
        "epochs": args.finetune_epochs,
        "batch_size": args.finetune_batch_size,
        "learning_rate": args.finetune_learning_rate,
        "sequence_length": args.finetune_sequence_length,
        "truncate": args.finetune_truncate,
        "head_length": args.finetune_head_length,
        "folds": results,
        **summary,
        "smoke": args.smoke,
        **accelerator_metrics(args, strategy),
    }
    path = save_model_atomic(
        classifier, os.path.join(args.output_dir, "imdb_bert.keras")
    )
    if args.ship:
        metrics["shipped"] = os.path.relpath(
            save_model_atomic(
                classifier,
                os.path.join(ROOT, "saved_models", "imdb_bert.keras"),
                weights_dtype="float16",
            ),
            ROOT,
        )
    write_json_atomic(
        metrics, os.path.join(args.output_dir, "finetune_metrics.json")
    )
    plot_curves(
        curves, os.path.join(args.output_dir, "finetune_curves.png"), fold
    )
    keras.utils.set_random_seed(args.seed + fold)
    validation_texts = classification_splits(args, fold)["validation"][0]
    head_view(
        classifier,
        validation_texts,
        os.path.join(args.output_dir, "head_view.png"),
    )
    scratch = (
        f" from scratch {summary['scratch_mean']:.4f}, gain "
        f"{summary['gain_mean'] * 100:+.2f} points (sd "
        f"{summary['gain_sd'] * 100:.2f}, paired over "
        f"{len(results)} folds)"
        if "gain_mean" in summary
        else ""
    )
    print(
        f"RESULT bert_imdb finetune preset={args.preset} "
        f"backend={keras.backend.backend()} folds={args.folds} "
        f"pretrained {summary['pretrained_mean']:.4f}{scratch} -> {path}"
    )
    return metrics


def summarize(results):
    out = {
        "pretrained_mean": float(np.mean([r["pretrained"] for r in results]))
    }
    if results and "scratch" in results[0]:
        gains = np.array([r["gain"] for r in results])
        out.update(
            scratch_mean=float(np.mean([r["scratch"] for r in results])),
            gain_mean=float(gains.mean()),
            gain_sd=float(gains.std(ddof=1)) if len(gains) > 1 else 0.0,
        )
    return out


def plot_curves(curves, path, fold):
    history = {}
    for name, values in curves.items():
        history[f"{name} loss"] = values["loss"]
        history[f"{name} val_loss"] = values["val_loss"]
    viz.plot_training_curves(
        history,
        path,
        title=f"fine-tuning, fold {fold} ({keras.backend.backend()})",
    )


def head_view(classifier, texts, path, layer_index=-1):
    """Attention of every head of one layer over the tokens of the shortest
    of the first validation reviews (the course's head view)."""
    review = min(list(texts[:50]), key=len)
    inputs = classifier.preprocessor([review])
    inputs = {k: keras.ops.convert_to_numpy(v) for k, v in inputs.items()}
    length = min(int(inputs["padding_mask"].sum()), HEAD_VIEW_TOKENS)
    inputs = {k: v[:, :length] for k, v in inputs.items()}
    scores = keras.ops.convert_to_numpy(
        classifier.backbone.attention_scores(inputs, layer_index)
    )[0]
    tokenizer = classifier.preprocessor.tokenizer
    tokens = [
        str(tokenizer.id_to_token(int(i))) for i in inputs["token_ids"][0]
    ]
    layer = range(classifier.backbone.num_layers)[layer_index]
    panels = [
        {
            "source_tokens": tokens,
            "target_tokens": tokens,
            "weights": head,
            "title": f"layer {layer}, head {h}",
        }
        for h, head in enumerate(scores)
    ]
    return viz.plot_alignments(
        panels, path, title="Each head's attention (rows: from, columns: to)"
    )


CHECK_VARIANTS = ("masked_lm", "classifier")


def check_setup(
    variant="masked_lm",
    smoke=True,
    seed=1337,
    num_steps=20,
    batch_size=8,
    data_dir=None,
):
    """What `recipes/check_backends.py` compares across backends (see
    `zoo.testing.cross_backend.CheckSetup`): the smoke-sized (or cpu_mini,
    when `smoke` is False) masked LM or classifier with dropout off, a
    WordPiece vocabulary learned on the generated reviews (or `data_dir`'s
    IMDB), and `num_steps` batches in a NumPy-seeded order. The masked LM
    takes batches masked by `zoo.data.masked_lm` (no preprocessor: the
    masks are the same on every backend); the classifier takes raw reviews.
    """
    from zoo.data.masked_lm import mask_tokens, unselectable_token_ids
    from zoo.testing.cross_backend import CheckSetup

    if variant not in CHECK_VARIANTS:
        raise SystemExit(
            f"unknown variant {variant!r}; known: {', '.join(CHECK_VARIANTS)}"
        )
    argv = ["all", "--seed", str(seed)] + (["--smoke"] if smoke else [])
    if data_dir is not None:
        argv += ["--data-dir", data_dir]
    args = parse_args(argv)
    keras.utils.set_random_seed(seed)
    splits = classification_splits(args, 0)
    texts, labels = splits["train"]
    texts = [str(t) for t in texts]
    tokenizer = train_bert_tokenizer(texts, args.vocab_size)
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(texts))
    steps = [
        order[(i * batch_size) % len(order) :][:batch_size]
        for i in range(num_steps)
    ]
    if variant == "classifier":
        preprocessor = BertClassifierPreprocessor(
            tokenizer, sequence_length=args.finetune_sequence_length
        )
        model = BertClassifier.from_preset(
            args.preset,
            preprocessor=preprocessor,
            backbone_dropout=0.0,
            dropout=0.0,
        )
        model.compile(optimizer="sgd")
        return CheckSetup(
            model=model,
            inputs=[str(t) for t in splits["validation"][0][:batch_size]],
            train_batches=[
                ([texts[i] for i in rows], labels[rows].astype("float32"))
                for rows in steps
            ],
            loss="binary_crossentropy",
        )
    ids = pack_texts(tokenizer, texts, args.sequence_length)
    options = dict(
        vocabulary_size=int(tokenizer.vocabulary_size()),
        mask_token_id=int(tokenizer.mask_token_id),
        special_token_ids=unselectable_token_ids(tokenizer),
        mask_selection_length=max(args.sequence_length // 5, 1),
    )

    def masked(rows, step):
        x, y, _ = mask_tokens(
            ids[rows], np.random.default_rng([seed, step]), **options
        )
        return x, y

    preprocessor = BertMaskedLMPreprocessor.from_preset(
        args.preset, tokenizer=tokenizer
    )
    backbone = BertMaskedLM.from_preset(
        args.preset, preprocessor=preprocessor, backbone_dropout=0.0
    ).backbone
    model = BertMaskedLM(backbone, preprocessor=None)
    return CheckSetup(
        model=model,
        inputs=masked(order[:batch_size], num_steps)[0],
        train_batches=[masked(rows, step) for step, rows in enumerate(steps)],
        loss=None,
    )


def main(argv=None):
    args = parse_args(argv)
    try:
        if args.command == "pretrain":
            return pretrain(args)
        if args.command == "finetune":
            return finetune(args)
        metrics = pretrain(args)
        if metrics.get("stopped") or "packed" in metrics:
            return metrics
        args.pretrained = os.path.join(args.output_dir, "bert_imdb_mlm.keras")
        return {"pretrain": metrics, "finetune": finetune(args)}
    except (DataNotFoundError, ModelFileError) as error:
        print(f"error: {error}", file=sys.stderr)
        raise SystemExit(2) from None


if __name__ == "__main__":
    main()
