"""Export a task for serving: a TensorFlow SavedModel that takes raw input.

`export_for_serving(task, path)` writes a SavedModel whose
`serving_default` signature takes what `task.predict` takes, raw: a
`(batch,)` string tensor for text tasks, a `(batch, height, width,
channels)` uint8 tensor for image tasks. The task's preprocessor runs
inside the graph, so a server needs no Python preprocessing, no zoo and no
Keras: TensorFlow loads it (`tf.saved_model.load`), and so do TF Serving and
every SavedModel runtime. It returns what `predict` returns.

The SavedModel is traced under TensorFlow. A task in memory under JAX or
PyTorch is saved to a temporary `.keras` file and exported by a TensorFlow
process (`.keras` files load under every backend), so a model trained
under any backend exports the same way.

`check_export(path, inputs, expected)` loads the export in a fresh process
that imports TensorFlow only and compares its answers with `expected`.

Example:

>>> import zoo
>>> task = zoo.saving.load_model("saved_models/imdb_attention.keras")
>>> export_for_serving(task, "/tmp/imdb_serving")  # doctest: +SKIP
>>> texts = ["a wonderful film", "boring"]
>>> check_export("/tmp/imdb_serving", texts, task.predict(texts))  # doctest: +SKIP
"""

import json
import os
import subprocess
import sys
import tempfile

import keras
import numpy as np

from zoo.saving import atomic_directory


def raw_input_kind(task):
    """`"text"` or `"image"`: what `serving_default` takes for `task`."""
    preprocessor = getattr(task, "preprocessor", None)
    if preprocessor is None:
        raise ValueError(
            f"{type(task).__name__} has no preprocessor: export its "
            "numeric model with `model.export(path)` (Keras' own) instead."
        )
    if getattr(preprocessor, "image_converter", None) is not None:
        return "image"
    if getattr(preprocessor, "image_size", None) is not None:
        return "image"
    return "text"


def needs_tensorflow_text(task):
    """Whether the export's graph holds TensorFlow Text ops (keras-hub's
    WordPiece and SentencePiece tokenizers): a serving process then runs
    `import tensorflow_text` before loading."""
    import keras_hub

    tokenizer = getattr(task.preprocessor, "tokenizer", None)
    return isinstance(
        tokenizer,
        (
            keras_hub.tokenizers.WordPieceTokenizer,
            keras_hub.tokenizers.SentencePieceTokenizer,
        ),
    )


def serving_input_shape(task):
    """`(height, width, channels)` of an image task's raw input."""
    preprocessor = task.preprocessor
    converter = getattr(preprocessor, "image_converter", None)
    size = getattr(converter, "image_size", None) or preprocessor.image_size
    channels = getattr(preprocessor, "num_channels", 3)
    return int(size[0]), int(size[1]), int(channels)


def _image_spec(tf, task):
    shape = [None, *serving_input_shape(task)]
    return tf.TensorSpec(shape, tf.uint8, name="images")


def _check_exportable(task):
    if not (
        getattr(task, "exports_predict", False)
        or getattr(task, "exports_generate", None)
    ):
        raise NotImplementedError(
            f"{type(task).__name__} cannot be exported for serving yet. "
            "Exported today: TextClassifier, BertTextClassifier, "
            "ViTImageClassifier (their `predict` on raw input), "
            "GPTCausalLM (also greedy `generate`), Translator (greedy "
            "`generate`)."
        )


def _serving_default(tf, task):
    """(function, input signature) of `serving_default`."""
    _check_exportable(task)
    preprocessor = task.preprocessor
    if raw_input_kind(task) == "image":
        spec = _image_spec(tf, task)

        def serve(images):
            features = preprocessor(tf.cast(images, "float32"))
            features = keras.utils.unpack_x_y_sample_weight(features)[0]
            return task(features, training=False)

    else:
        spec = tf.TensorSpec([None], tf.string, name="texts")

        def serve(texts):
            features = preprocessor(texts)
            features = keras.utils.unpack_x_y_sample_weight(features)[0]
            return task(features, training=False)

    return serve, [spec]


def _causal_lm_generate(tf, task):
    """(function, input signature) of a causal LM's `generate` signature:
    prompts `(batch,)` in, `(batch,)` texts out, greedy, up to the context
    length: what `task.generate(prompts)` returns."""
    from zoo.models.generation import get_sampler

    preprocessor = task.preprocessor
    tokenizer = preprocessor.tokenizer
    context = int(task.backbone.sequence_length)
    stops = task.resolve_stop_token_ids("auto")
    start = getattr(tokenizer, "start_token_id", None)
    if not preprocessor.add_start_token:
        start = None
    sampler = get_sampler("greedy")

    def generate(prompts):
        ids = tokenizer(prompts)
        if not isinstance(ids, tf.RaggedTensor):
            ids = tf.RaggedTensor.from_tensor(ids)
        ids = tf.cast(ids, "int32")
        if start is not None:
            starts = tf.fill([ids.nrows(), 1], tf.constant(start, "int32"))
            ids = tf.concat([starts, ids], axis=1)
        lengths = tf.cast(ids.row_lengths(), "int32")
        checks = [
            tf.debugging.assert_positive(
                lengths, message="generate: a prompt is empty"
            ),
            tf.debugging.assert_less(
                lengths,
                context,
                message=f"generate: a prompt leaves no room below the "
                f"context length {context}",
            ),
        ]
        with tf.control_dependencies(checks):
            token_ids = ids.to_tensor(default_value=0, shape=[None, context])
        padding_mask = tf.sequence_mask(lengths, context)
        task.sampler = sampler
        task.generation_mode = "cache"
        out = task.generate_step(
            {"token_ids": token_ids, "padding_mask": padding_mask},
            stop_token_ids=stops,
        )["token_ids"]
        # Each row: its prompt, then its tokens up to and including the
        # first stop token (`zoo.models.generation.finish_rows`).
        positions = tf.range(context)[None, :]
        keep = tf.ones_like(padding_mask)
        if stops:
            hit = tf.reduce_any(
                tf.equal(out[..., None], tf.constant(stops, out.dtype)),
                axis=-1,
            ) & (positions >= lengths[:, None])
            first = tf.where(
                tf.reduce_any(hit, axis=1),
                tf.argmax(tf.cast(hit, "int32"), axis=1, output_type="int32"),
                context,
            )
            keep = positions <= first[:, None]
        # keras-hub's generate_postprocess, in the graph: padding and
        # special tokens dropped, then the tokenizer's detokenize.
        for special in getattr(tokenizer, "special_token_ids", None) or ():
            keep = keep & tf.not_equal(out, special)
        texts = tokenizer.detokenize(tf.ragged.boolean_mask(out, keep))
        return {"texts": texts}

    return generate, [tf.TensorSpec([None], tf.string, name="prompts")]


def _translator_generate(tf, task):
    """(function, input signature) of a translator's `generate` signature:
    source sentences `(batch,)` in, greedy translations `(batch,)` out,
    what `task.generate(sources)` returns."""
    from zoo.models.generation import get_sampler

    preprocessor = task.preprocessor
    tokenizer = preprocessor.tokenizer
    length = int(preprocessor.decoder_sequence_length)
    start, stop = int(tokenizer.start_token_id), int(tokenizer.end_token_id)
    pad = tokenizer.pad_token_id
    sampler = get_sampler("greedy")

    def generate(sources):
        packed = preprocessor.generate_preprocess(
            {
                "encoder_text": sources,
                "decoder_text": tf.fill(tf.shape(sources), ""),
            }
        )
        rows = tf.shape(sources)[0]
        first_column = tf.range(length)[None, :] < 1
        target_ids = tf.where(first_column, start, 0) + tf.zeros(
            [rows, length], "int32"
        )
        target_mask = first_column & tf.ones([rows, length], "bool")
        task.sampler = sampler
        task.generation_mode = "cache"
        out = task.generate_step(
            {
                "encoder_token_ids": packed["encoder_token_ids"],
                "encoder_padding_mask": tf.cast(
                    packed["encoder_padding_mask"], "bool"
                ),
                "decoder_token_ids": target_ids,
                "decoder_padding_mask": target_mask,
            },
            stop_token_ids=(stop,),
        )["decoder_token_ids"]
        out = tf.cast(out, "int32")
        # The words after <s>, up to the first </s>, padding dropped.
        positions = tf.range(length)[None, :]
        hit = tf.equal(out, stop) & (positions >= 1)
        first = tf.where(
            tf.reduce_any(hit, axis=1),
            tf.argmax(tf.cast(hit, "int32"), axis=1, output_type="int32"),
            length,
        )
        keep = (positions >= 1) & (positions < first[:, None])
        if pad is not None:
            keep = keep & tf.not_equal(out, pad)
        texts = tokenizer.detokenize(tf.ragged.boolean_mask(out, keep))
        return {"texts": texts}

    return generate, [tf.TensorSpec([None], tf.string, name="sources")]


_GENERATE = {
    "causal_lm": _causal_lm_generate,
    "translator": _translator_generate,
}


def _export_in_tensorflow(task, path):
    from zoo._tensorflow import tf

    archive = keras.export.ExportArchive()
    archive.track(task)
    preprocessor = task.preprocessor
    if not preprocessor.built:
        preprocessor.build(None)  # keras-hub's make their packers here
    archive.track(preprocessor)
    kind = getattr(task, "exports_generate", None)
    if kind:
        generate, signature = _GENERATE[kind](tf, task)
        archive.add_endpoint("generate", generate, input_signature=signature)
    if getattr(task, "exports_predict", False):
        serve, signature = _serving_default(tf, task)
    else:
        # No raw-input `predict` (a translator's reads sources with their
        # targets, teacher forcing): the server's default is `generate`.
        serve = generate
    archive.add_endpoint("serving_default", serve, input_signature=signature)
    with atomic_directory(path) as tmp:
        archive.write_out(tmp, verbose=False)


def export_for_serving(task, path):
    """Writes `task` to `path` as a TensorFlow SavedModel on raw input.

    Args:
        task: a zoo task with a preprocessor (text or image classifier,
            GPT, translator), or the path of its `.keras` file (exported
            from the file as it is, without saving it again).
        path: the SavedModel folder to write (replaced atomically).

    Returns:
        `path`.
    """
    from zoo.saving import load_model

    if isinstance(task, (str, os.PathLike)):
        source, task = os.fspath(task), load_model(task)
    else:
        source = None
    raw_input_kind(task)  # a clear error for tasks without a preprocessor
    _check_exportable(task)
    path = os.fspath(path)
    if keras.backend.backend() == "tensorflow":
        _export_in_tensorflow(task, path)
        return path
    with tempfile.TemporaryDirectory() as tmp:
        if source is None:
            source = os.path.join(tmp, "task.keras")
            task.save(source)
        result = subprocess.run(
            [
                sys.executable,
                "-c",
                "import sys, zoo.export\n"
                "zoo.export.export_for_serving(sys.argv[1], sys.argv[2])\n",
                source,
                path,
            ],
            env=dict(os.environ, KERAS_BACKEND="tensorflow"),
            capture_output=True,
            text=True,
        )
    if result.returncode != 0:
        raise RuntimeError(
            "exporting under TensorFlow failed: "
            + result.stderr.strip().splitlines()[-1]
        )
    return path


_CHECK = """
import json, sys
import numpy as np
{imports}
assert "zoo" not in sys.modules
served = tf.saved_model.load(sys.argv[1])
serve = served.signatures["serving_default"]
inputs = np.load(sys.argv[2])
outputs = serve(tf.constant(inputs))
got = np.asarray(next(iter(outputs.values())))
result = {{"shape": list(got.shape)}}
if sys.argv[3] != "-":
    expected = np.load(sys.argv[3])
    result["max_abs_diff"] = float(np.max(np.abs(got - expected)))
if sys.argv[4] != "-":
    texts = served.signatures["generate"](tf.constant(inputs))["texts"]
    texts = [t.decode("utf-8") for t in texts.numpy()]
    wanted = json.load(open(sys.argv[4]))
    result["generate_identical"] = sum(a == b for a, b in zip(texts, wanted))
result["zoo_imported"] = "zoo" in sys.modules
print(json.dumps(result))
"""


class ServingExportMixin:
    """`export(path)` on raw input for tasks with `exports_predict`.

    `task.export(path)` writes `export_for_serving`'s SavedModel (raw
    strings or uint8 images in, `predict`'s output out). Any other format,
    or an explicit `input_signature`, is Keras' own `Model.export` of the
    numeric model (e.g. `format="onnx"`).
    """

    exports_predict = True

    def export(
        self,
        filepath,
        format="tf_saved_model",
        verbose=None,
        input_signature=None,
        **kwargs,
    ):
        if (
            format == "tf_saved_model"
            and input_signature is None
            and not kwargs
        ):
            return export_for_serving(self, filepath)
        return super().export(
            filepath,
            format=format,
            verbose=verbose,
            input_signature=input_signature,
            **kwargs,
        )


def check_export(path, inputs, expected, tensorflow_text=False, generated=None):
    """Runs `serving_default` on `inputs` in a fresh process that imports
    TensorFlow only (and TensorFlow Text when `tensorflow_text`), and
    compares its output with `expected` (what `predict` returned; None
    skips the comparison). With `generated` (what `generate(inputs)`
    returned), also runs the `generate` signature on `inputs` and counts
    identical texts (`generate_identical`).

    Returns:
        dict: `max_abs_diff` (with `expected`), `generate_identical` (with
        `generated`), `serving_default`'s output `shape`, and `zoo_imported`
        (False: the serving process runs `import tensorflow` and
        `tf.saved_model.load` only).
    """
    imports = "import tensorflow as tf"
    if tensorflow_text:
        imports += "\nimport tensorflow_text"
    with tempfile.TemporaryDirectory() as tmp:
        files = []
        for name, array in (("inputs", inputs), ("expected", expected)):
            files.append("-")
            if array is not None:
                files[-1] = os.path.join(tmp, f"{name}.npy")
                np.save(files[-1], np.asarray(array), allow_pickle=False)
        files.append("-")
        if generated is not None:
            files[-1] = os.path.join(tmp, "generated.json")
            with open(files[-1], "w") as f:
                json.dump(list(generated), f)
        result = subprocess.run(
            [
                sys.executable,
                "-c",
                _CHECK.format(imports=imports),
                os.fspath(path),
                *files,
            ],
            capture_output=True,
            text=True,
            # TensorFlow imports Keras (for `tf.keras`) by itself; let it
            # pick TensorFlow rather than start another framework.
            env=dict(os.environ, KERAS_BACKEND="tensorflow"),
        )
    if result.returncode != 0:
        raise RuntimeError(
            "the TensorFlow-only check failed: "
            + result.stderr.strip().splitlines()[-1]
        )
    return json.loads(result.stdout.strip().splitlines()[-1])
