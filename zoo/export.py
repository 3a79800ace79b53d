"""Export a task for serving (a TensorFlow SavedModel that takes raw input),
or a model's numeric forward pass to ONNX.

`export_for_serving(task, path)` writes a SavedModel whose signatures take
raw input: a `(batch,)` string tensor for text tasks, a `(batch, height,
width, channels)` uint8 tensor for image tasks. The task's preprocessor
runs inside the graph, so a server needs no Python preprocessing, no zoo
and no Keras: TensorFlow loads it (`tf.saved_model.load`), and so do TF
Serving and every SavedModel runtime.

- classifiers (`TextClassifier`, `BertTextClassifier`,
  `ViTImageClassifier`): `serving_default` returns what `predict` returns;
- `GPTCausalLM`: `serving_default` (`predict`'s logits) and `generate`
  (prompts in, greedy texts out, up to the context length);
- `Translator`, `ImageCaptioner`: `generate` (sources or images in, greedy
  texts out), also their `serving_default`;
- `BertMaskedLM`: `fill_mask` (top 5 tokens and probabilities per
  `[MASK]`), also its `serving_default`.

The SavedModel is traced under TensorFlow. A task in memory under JAX or
PyTorch is saved to a temporary `.keras` file and exported by a TensorFlow
process (`.keras` files load under every backend), so a model trained
under any backend exports the same way.

`check_export(path, inputs, expected)` loads the export in a fresh process
that imports TensorFlow only and compares its answers with `expected`.

`export_onnx(model, path, inputs)` writes a model's numeric forward pass
(a backbone on token ids and padding masks, or on float images) as ONNX
with Keras' exporter under the current backend, and `check_onnx(model,
path, inputs)` runs it in onnxruntime against `predict`
(`pip install "attention-zoo[onnx]"`; docs/export.md says what exports
on which backend).

Example:

>>> import zoo
>>> task = zoo.saving.load_model("saved_models/imdb_attention.keras")  # doctest: +SKIP
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
            "GPTCausalLM (also greedy `generate`), Translator and "
            "ImageCaptioner (greedy `generate`), BertMaskedLM "
            "(`fill_mask`)."
        )


def _predict(tf, task):
    """(function, input signature) of `predict` on raw input."""
    images = raw_input_kind(task) == "image"
    if images:
        spec = _image_spec(tf, task)
    else:
        spec = tf.TensorSpec([None], tf.string, name="texts")

    def serve(raw):
        features = task.preprocessor(tf.cast(raw, "float32") if images else raw)
        features = keras.utils.unpack_x_y_sample_weight(features)[0]
        return task(features, training=False)

    return serve, [spec]


def _first_position(tf, hit, length):
    """Per row of the boolean `(batch, length)` `hit`, the position of its
    first True, or `length` where there is none."""
    return tf.where(
        tf.reduce_any(hit, axis=1),
        tf.argmax(tf.cast(hit, "int32"), axis=1, output_type="int32"),
        length,
    )


def _generate_step(task, sampler, inputs, stop_token_ids):
    """`task.generate_step` with `sampler`, decoding from the cache; the
    task keeps its own sampler."""
    own = task.sampler
    task.sampler, task.generation_mode = sampler, "cache"
    try:
        return task.generate_step(inputs, stop_token_ids=stop_token_ids)
    finally:
        task.sampler = own


def _causal_lm_generate(tf, task):
    """(function, input signature) of a causal LM's `generate` signature:
    prompts `(batch,)` in, `(batch,)` texts out, greedy, up to the context
    length: what `task.generate(prompts, sampler="greedy")` returns."""
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
        out = _generate_step(
            task,
            sampler,
            {"token_ids": token_ids, "padding_mask": padding_mask},
            stops,
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
            keep = positions <= _first_position(tf, hit, context)[:, None]
        # keras-hub's generate_postprocess, in the graph: padding and
        # special tokens dropped, then the tokenizer's detokenize.
        for special in getattr(tokenizer, "special_token_ids", None) or ():
            keep = keep & tf.not_equal(out, special)
        texts = tokenizer.detokenize(tf.ragged.boolean_mask(out, keep))
        return {"texts": texts}

    return generate, [tf.TensorSpec([None], tf.string, name="prompts")]


def _decoder_generate(tf, task, encoder_inputs, input_spec):
    """(function, input signature) of an encoder-decoder's `generate`
    signature: raw inputs in, greedy texts out, what
    `task.generate(raw, sampler="greedy")` returns. `encoder_inputs(raw)` gives `generate_step`'s encoder
    entries; the decoder starts from `<s>` and stops at `</s>` or its
    sequence length."""
    from zoo.models.generation import get_sampler

    preprocessor = task.preprocessor
    tokenizer = preprocessor.tokenizer
    length = int(preprocessor.decoder_sequence_length)
    start, stop = int(tokenizer.start_token_id), int(tokenizer.end_token_id)
    pad = tokenizer.pad_token_id
    sampler = get_sampler("greedy")

    def generate(raw):
        rows = tf.shape(raw)[0]
        first_column = tf.range(length)[None, :] < 1
        target_ids = tf.where(first_column, start, 0) + tf.zeros(
            [rows, length], "int32"
        )
        target_mask = first_column & tf.ones([rows, length], "bool")
        out = _generate_step(
            task,
            sampler,
            {
                **encoder_inputs(raw),
                "decoder_token_ids": target_ids,
                "decoder_padding_mask": target_mask,
            },
            (stop,),
        )["decoder_token_ids"]
        out = tf.cast(out, "int32")
        # The words after <s>, up to the first </s>, padding dropped.
        positions = tf.range(length)[None, :]
        hit = tf.equal(out, stop) & (positions >= 1)
        first = _first_position(tf, hit, length)
        keep = (positions >= 1) & (positions < first[:, None])
        for special in (pad, start):
            if special is not None:
                keep = keep & tf.not_equal(out, special)
        texts = tokenizer.detokenize(tf.ragged.boolean_mask(out, keep))
        return {"texts": texts}

    return generate, [input_spec]


def _translator_generate(tf, task):
    """Source sentences `(batch,)` in, translations out."""
    preprocessor = task.preprocessor

    def encoder_inputs(sources):
        packed = preprocessor.generate_preprocess(
            {
                "encoder_text": sources,
                "decoder_text": tf.fill(tf.shape(sources), ""),
            }
        )
        return {
            "encoder_token_ids": packed["encoder_token_ids"],
            "encoder_padding_mask": tf.cast(
                packed["encoder_padding_mask"], "bool"
            ),
        }

    spec = tf.TensorSpec([None], tf.string, name="sources")
    return _decoder_generate(tf, task, encoder_inputs, spec)


def _captioner_generate(tf, task):
    """uint8 images at the encoder's size in, captions out."""

    def encoder_inputs(images):
        return {"images": tf.cast(images, "float32")}

    return _decoder_generate(tf, task, encoder_inputs, _image_spec(tf, task))


def _masked_lm_fill_mask(tf, task, top_k=5):
    """(function, input signature) of a masked LM's `fill_mask` signature:
    texts `(batch,)`, each with at least one `[MASK]`, in; for each mask
    (left to right, padded to the batch's most) the `top_k` most likely
    `tokens` and their `probabilities`, and each text's `mask_count`:
    what `task.fill_mask(texts, top_k)` returns, as tensors."""
    from zoo.models.bert.bert_preprocessor import strip_markup

    tokenizer = task.preprocessor.tokenizer
    length = int(task.preprocessor.sequence_length)
    cls, sep = int(tokenizer.cls_token_id), int(tokenizer.sep_token_id)
    pad, mask = int(tokenizer.pad_token_id), int(tokenizer.mask_token_id)
    vocabulary = tf.constant(tokenizer.get_vocabulary())

    def fill_mask(texts):
        ids = tf.cast(tokenizer(strip_markup(texts)), "int32")
        ids = ids[:, : length - 2]
        rows = ids.nrows()
        ids = tf.concat(
            [
                tf.fill([rows, 1], cls),
                ids,
                tf.fill([rows, 1], sep),
            ],
            axis=1,
        )
        token_ids = ids.to_tensor(default_value=pad, shape=[None, length])
        is_mask = tf.equal(token_ids, mask)
        counts = tf.reduce_sum(tf.cast(is_mask, "int32"), axis=1)
        check = tf.debugging.assert_positive(
            counts, message="fill_mask: a text has no [MASK] token"
        )
        positions = tf.ragged.boolean_mask(
            tf.broadcast_to(tf.range(length), tf.shape(token_ids)), is_mask
        )
        with tf.control_dependencies([check]):
            positions = positions.to_tensor(default_value=0)
        logits = task(
            {
                "token_ids": token_ids,
                "segment_ids": tf.zeros_like(token_ids),
                "padding_mask": tf.not_equal(token_ids, pad),
                "mask_positions": positions,
            },
            training=False,
        )
        probabilities = tf.nn.softmax(tf.cast(logits, "float32"), axis=-1)
        best, indices = tf.math.top_k(probabilities, k=top_k)
        return {
            "tokens": tf.gather(vocabulary, indices),
            "probabilities": best,
            "mask_count": counts,
        }

    return fill_mask, [tf.TensorSpec([None], tf.string, name="texts")]


# A task's `exports_generate` -> (the signature's name, its builder).
_SIGNATURES = {
    "causal_lm": ("generate", _causal_lm_generate),
    "translator": ("generate", _translator_generate),
    "captioner": ("generate", _captioner_generate),
    "masked_lm": ("fill_mask", _masked_lm_fill_mask),
}


def _export_in_tensorflow(task, path):
    from zoo._tensorflow import tf

    archive = keras.export.ExportArchive()
    # The endpoints track the variables they use. Only the preprocessor's
    # lookup tables are tracked by hand: tracking the task itself would
    # also save Keras' traced default signature of its `call`, which not
    # every task can trace on symbolic lengths (the captioner's scan).
    preprocessor = task.preprocessor
    if not preprocessor.built:
        preprocessor.build(None)  # keras-hub's make their packers here
    archive.track(preprocessor)
    kind = getattr(task, "exports_generate", None)
    if kind:
        name, build = _SIGNATURES[kind]
        serve, signature = build(tf, task)
        archive.add_endpoint(name, serve, input_signature=signature)
    # Without a raw-input `predict` (a translator's reads sources with
    # their targets, teacher forcing), the server's default is that one.
    if getattr(task, "exports_predict", False):
        serve, signature = _predict(tf, task)
    archive.add_endpoint("serving_default", serve, input_signature=signature)
    with atomic_directory(path) as tmp:
        archive.write_out(tmp, verbose=False)


def _run_tensorflow_process(code, args, what):
    """`python -c code *args` with Keras on TensorFlow; its stdout, or a
    RuntimeError naming `what` with the process's last error line."""
    result = subprocess.run(
        [sys.executable, "-c", code, *args],
        env=dict(os.environ, KERAS_BACKEND="tensorflow"),
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        lines = result.stderr.strip().splitlines() or [
            f"exit status {result.returncode}"
        ]
        raise RuntimeError(f"{what} failed: {lines[-1]}")
    return result.stdout


def export_for_serving(task, path, keras_file=None):
    """Writes `task` to `path` as a TensorFlow SavedModel on raw input.

    Args:
        task: a zoo task with a preprocessor (see the module's list).
        path: the SavedModel folder to write (replaced atomically).
        keras_file: the `.keras` file `task` was loaded from, if any:
            under JAX or PyTorch the TensorFlow process exports that file
            instead of a copy the task saves first.

    Returns:
        `path`.
    """
    raw_input_kind(task)  # a clear error for tasks without a preprocessor
    _check_exportable(task)
    path = os.fspath(path)
    if keras.backend.backend() == "tensorflow":
        _export_in_tensorflow(task, path)
        return path
    with tempfile.TemporaryDirectory() as tmp:
        if keras_file is None:
            keras_file = os.path.join(tmp, "task.keras")
            task.save(keras_file)
        _run_tensorflow_process(
            "import sys, zoo, zoo.export\n"
            "task = zoo.saving.load_model(sys.argv[1])\n"
            "zoo.export.export_for_serving(task, sys.argv[2])\n",
            [os.fspath(keras_file), path],
            "exporting under TensorFlow",
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
if sys.argv[4] != "-" and "fill_mask" in served.signatures:
    out = served.signatures["fill_mask"](tf.constant(inputs))
    tokens, probabilities = out["tokens"].numpy(), out["probabilities"].numpy()
    same, worst, masks = 0, 0.0, 0
    for i, per_text in enumerate(json.load(open(sys.argv[4]))):
        assert int(out["mask_count"][i]) == len(per_text)
        for j, pairs in enumerate(per_text):
            masks += 1
            same += [t.decode() for t in tokens[i, j]] == [t for t, _ in pairs]
            wanted = np.array([p for _, p in pairs])
            worst = max(worst, float(np.abs(probabilities[i, j] - wanted).max()))
    result["fill_mask_identical"] = f"{{same}}/{{masks}}"
    result["max_probability_diff"] = worst
elif sys.argv[4] != "-":
    texts = served.signatures["generate"](tf.constant(inputs))["texts"]
    texts = [t.decode("utf-8") for t in texts.numpy()]
    wanted = json.load(open(sys.argv[4]))
    result["generate_identical"] = sum(a == b for a, b in zip(texts, wanted))
result["zoo_imported"] = "zoo" in sys.modules
print(json.dumps(result))
"""


class ServingExportMixin:
    """`task.export(path)` writes `export_for_serving`'s SavedModel (raw
    strings or uint8 images in; the signatures listed in this module).
    Any other format, or an explicit `input_signature`, is Keras' own
    `Model.export` of the numeric model (e.g. `format="onnx"`).

    A task sets `exports_predict = False` when its `predict` takes more
    than one raw input, and `exports_generate` to the kind of its
    generation signature (a key of `_SIGNATURES`).
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
    skips the comparison). With `generated` (what
    `generate(inputs, sampler="greedy")` returned, or a masked LM's `fill_mask(inputs)`), also runs the
    `generate` (or `fill_mask`) signature on `inputs` and counts identical
    texts (`generate_identical`; for `fill_mask`, identical top-k lists
    `fill_mask_identical` and `max_probability_diff`).

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
        # TensorFlow imports Keras (for `tf.keras`) by itself; the runner
        # lets it pick TensorFlow rather than start another framework.
        stdout = _run_tensorflow_process(
            _CHECK.format(imports=imports),
            [os.fspath(path), *files],
            "the TensorFlow-only check",
        )
    return json.loads(stdout.strip().splitlines()[-1])


# ---- ONNX: the numeric model, checked in onnxruntime -----------------------

ONNX_INSTALL_HINT = (
    'pip install "attention-zoo[onnx]" (onnx, onnxruntime, and the '
    "backend's converter: tf2onnx, jax2onnx, or onnxscript for torch.onnx)"
)


def onnx_input_signature(model, inputs=None):
    """Keras' `input_signature` for exporting `model`: its own input specs
    (unknown sizes stay unknown), or, with `inputs`, specs of exactly their
    shapes. Each spec is named after its input (a dict input's key)."""
    struct = model._inputs_struct  # the functional model's input structure
    if isinstance(struct, dict):
        named = struct
    else:
        named = {struct.name: struct}
    if inputs is not None and not isinstance(inputs, dict):
        inputs = {next(iter(named)): inputs}
    specs = {}
    for name, tensor in named.items():
        shape = tuple(tensor.shape)
        if inputs is not None:
            shape = tuple(int(d) for d in np.shape(inputs[name]))
        specs[name] = keras.InputSpec(
            shape=shape, dtype=tensor.dtype, name=name
        )
    if isinstance(struct, dict):
        return [specs]
    return [next(iter(specs.values()))]


_ERFC_REGISTERED = []


def _register_tf2onnx_erfc():
    """Teaches tf2onnx TensorFlow's `Erfc` (exact GELU is `0.5 x erfc(-x /
    sqrt 2)` in TensorFlow), which it lacks: `1 - Erf(x)`, with ONNX's
    `Erf` (opset 9 on)."""
    if _ERFC_REGISTERED:
        return
    from tf2onnx import utils
    from tf2onnx.handler import tf_op

    @tf_op("Erfc")
    class Erfc:
        @classmethod
        def version_9(cls, ctx, node, **kwargs):
            node.type = "Erf"
            dtype = utils.map_onnx_to_numpy_type(ctx.get_dtype(node.input[0]))
            one = ctx.make_const(
                utils.make_name("erfc_one"), np.ones((), dtype)
            )
            ctx.insert_new_node_on_output(
                "Sub", node.output[0], inputs=[one.output[0], node.output[0]]
            )

    _ERFC_REGISTERED.append(Erfc)


def export_onnx(model, path, inputs=None, opset_version=None):
    """Writes `model`'s forward pass to `path` as ONNX: Keras'
    `model.export(path, format="onnx")` on the model's numeric inputs
    (token ids and padding masks, float images), with what a zoo backbone
    needs on each backend:

    - TensorFlow (tf2onnx): TensorFlow's `Erfc` (exact GELU) converted as
      `1 - Erf`; batch and lengths may stay dynamic (`inputs=None`).
    - JAX (jax2onnx): give `inputs`. jax2onnx cannot slice a position
      table to a symbolic length, and with a symbolic batch it writes
      graphs onnxruntime rejects.
    - PyTorch (torch.onnx): give `inputs` (raises otherwise). Keras exports
      dynamic sizes by tracing sizes of 1 with TorchScript, which fails on
      layer normalisation and fixes some lengths in the graph. A keras-hub
      model's variables are registered with PyTorch first (keras-hub sets
      them past `torch.nn.Module`, where the exporter cannot see them).

    Args:
        model: a functional Keras model, e.g. a zoo backbone.
        path: the `.onnx` file to write.
        inputs: example inputs (what `model.predict` takes): the export
            takes exactly their shapes. None: the model's own input shapes,
            unknown sizes dynamic (TensorFlow).
        opset_version: the ONNX opset; None: the converter's default.

    Returns:
        `path`.

    Example:

    >>> import numpy as np
    >>> from zoo.models.vit import ViTBackbone
    >>> backbone = ViTBackbone.from_preset("smoke")
    >>> images = np.random.default_rng(0).random((2, 8, 8, 1), "float32")
    >>> export_onnx(backbone, "/tmp/vit.onnx", images)  # doctest: +SKIP
    '/tmp/vit.onnx'
    >>> check_onnx(backbone, "/tmp/vit.onnx", images) < 1e-4  # doctest: +SKIP
    True
    """
    backend = keras.backend.backend()
    if backend == "torch" and inputs is None:
        raise ValueError(
            "Under PyTorch, export_onnx needs `inputs`: the export takes "
            "their shapes (dynamic sizes are traced at 1 and some stay "
            "fixed in the graph)."
        )
    path = os.fspath(path)
    if backend == "tensorflow":
        _register_tf2onnx_erfc()
    if backend == "torch" and hasattr(model, "_track_variables"):
        # keras-hub's `__setattr__` stores the variables' ParameterDict
        # with `object.__setattr__` during construction; setting it again
        # registers it, so `model.parameters()` and the exporter see them.
        model._track_variables()
    model.export(
        path,
        format="onnx",
        verbose=False,
        input_signature=onnx_input_signature(model, inputs),
        opset_version=opset_version,
    )
    return path


_ONNX_DTYPES = {
    "tensor(float)": "float32",
    "tensor(double)": "float64",
    "tensor(float16)": "float16",
    "tensor(int32)": "int32",
    "tensor(int64)": "int64",
    "tensor(bool)": "bool",
}


def run_onnx(path, inputs):
    """Runs the ONNX file at `path` in onnxruntime (CPU) on `inputs` (what
    the exported model's `predict` takes: a dict's entries go to the graph
    inputs of their names, other inputs in Keras' flattening order; each
    is cast to the dtype the graph declares). Returns the outputs as a
    list of NumPy arrays, in the order of
    `keras.tree.flatten(model.predict(inputs))`."""
    try:
        import onnxruntime
    except ImportError as error:
        raise ImportError(
            f"run_onnx needs onnxruntime: {ONNX_INSTALL_HINT}."
        ) from error
    session = onnxruntime.InferenceSession(
        os.fspath(path), providers=["CPUExecutionProvider"]
    )
    arrays = keras.tree.flatten(inputs)
    declared = session.get_inputs()
    names = [spec.name.split(":")[0] for spec in declared]
    if isinstance(inputs, dict) and set(names) == set(inputs):
        arrays = [inputs[name] for name in names]
    if len(arrays) != len(declared):
        raise ValueError(
            f"The ONNX graph takes {len(declared)} inputs "
            f"({[i.name for i in declared]}); got {len(arrays)}."
        )
    feed = {
        spec.name: np.asarray(array).astype(_ONNX_DTYPES[spec.type])
        for spec, array in zip(declared, arrays)
    }
    return session.run(None, feed)


def check_onnx(model, path, inputs):
    """The largest absolute difference between `model.predict(inputs)`
    and the ONNX export at `path` run in onnxruntime on the same inputs
    (`run_onnx`), over every output; NaN where either gives a NaN.

    Raises:
        ValueError: the export's outputs differ from `predict`'s in number
            or shape.
    """
    got = run_onnx(path, inputs)
    want = [
        np.asarray(w)
        for w in keras.tree.flatten(model.predict(inputs, verbose=0))
    ]
    if len(got) != len(want):
        raise ValueError(
            f"The ONNX graph returns {len(got)} outputs; predict "
            f"returns {len(want)}."
        )
    worst = [0.0]
    for output, expected in zip(got, want):
        if output.shape != expected.shape:
            raise ValueError(
                f"An ONNX output has shape {output.shape} where predict's "
                f"has {expected.shape}."
            )
        difference = np.abs(output.astype("float64") - expected)
        worst.append(np.max(difference, initial=0.0))
    return float(np.max(worst))  # NaN where either side has one
