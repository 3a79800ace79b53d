"""zoo.models.gpt: architecture, causality, the key/value cache, generation
with keras-hub samplers (within the context and past it), errors, saving,
presets, mixed precision and training on raw strings."""

import contextlib
import json
import zipfile

import keras
import keras_hub
import numpy as np
import pytest
from keras import ops

import zoo  # noqa: F401  (registers the layers for loading)
from zoo.data.tokenizers import CharacterTokenizer
from zoo.models.generation import get_sampler
from zoo.models.gpt import GPT, GPTBackbone, GPTPreprocessor

TEXT = "to be, or not to be, that is the question:\nwhether 'tis nobler\n"
CONTEXT = 24


def make_gpt(tie_weights=True, dropout=0.0, num_layers=2, dtype=None):
    tokenizer = CharacterTokenizer.from_text(TEXT)
    backbone = GPTBackbone(
        tokenizer.vocabulary_size(),
        num_layers=num_layers,
        num_heads=2,
        hidden_dim=16,
        intermediate_dim=32,
        sequence_length=CONTEXT,
        dropout=dropout,
        tie_weights=tie_weights,
        dtype=dtype,
    )
    return GPT(backbone, GPTPreprocessor(tokenizer, CONTEXT))


def token_ids(gpt, text, length):
    ids = np.asarray(gpt.preprocessor.tokenizer(text), "int32")[:length]
    return ids[None, :]


def logits_of(gpt, ids):
    inputs = {"token_ids": ids, "padding_mask": np.ones_like(ids)}
    return ops.convert_to_numpy(gpt(inputs))


def test_backbone_returns_a_dict_of_features():
    gpt = make_gpt()
    ids = token_ids(gpt, TEXT, 10)
    features = gpt.backbone(
        {"token_ids": ids, "padding_mask": np.ones_like(ids)}
    )
    assert set(features) == {"sequence_output"}
    assert tuple(features["sequence_output"].shape) == (1, 10, 16)


def test_parameter_count_matches_the_architecture():
    # Tied: token table, positions, per block 2 LayerNorms, QKV+O with biases
    # and the MLP; a final LayerNorm; no separate output matrix.
    gpt = make_gpt()
    v, d, f, t = gpt.backbone.vocabulary_size, 16, 32, CONTEXT
    block = 2 * 2 * d + 4 * (d * d + d) + (d * f + f) + (f * d + d)
    expected = v * d + t * d + 2 * block + 2 * d
    assert gpt.backbone.count_params() == expected
    assert (
        make_gpt(tie_weights=False).backbone.count_params() == expected + v * d
    )


def test_flops_per_token_follow_nanogpts_formula():
    # 6 N (N without the t x d position table) + 12 L d T, 2 blocks.
    backbone = make_gpt().backbone
    d, t = 16, CONTEXT
    n = backbone.count_params() - t * d
    assert backbone.flops_per_token() == 6 * n + 12 * 2 * d * t
    assert backbone.flops_per_token(context=4) == 6 * n + 12 * 2 * d * 4


def test_logits_shape_and_float32():
    gpt = make_gpt()
    logits = logits_of(gpt, token_ids(gpt, TEXT, 10))
    assert logits.shape == (1, 10, gpt.backbone.vocabulary_size)
    assert logits.dtype == np.float32


def test_the_whole_model_is_causal():
    gpt = make_gpt()
    ids = token_ids(gpt, TEXT, 16)
    changed = ids.copy()
    changed[0, 9:] = (changed[0, 9:] + 3) % gpt.backbone.vocabulary_size
    a, b = logits_of(gpt, ids), logits_of(gpt, changed)
    np.testing.assert_allclose(a[:, :9], b[:, :9], atol=1e-6)
    assert np.abs(a[:, 9:] - b[:, 9:]).max() > 1e-4


@pytest.mark.parametrize("layout", ["per_block", "stacked"])
def test_cached_logits_equal_full_logits_token_by_token(layout):
    gpt = make_gpt()
    ids = token_ids(gpt, TEXT, 20)
    full = logits_of(gpt, ids)
    if layout == "stacked":  # keras-hub's (batch, layers, 2, len, heads, dim)
        cache = ops.zeros((1, 2, 2, 20, 2, 8))
    else:  # what generate() carries: one (batch, 2, len, heads, dim) per block
        cache = tuple(ops.zeros((1, 2, 20, 2, 8)) for _ in range(2))
    for t in range(20):
        logits, _, cache = gpt.call_with_cache(ids[:, t : t + 1], cache, t)
        np.testing.assert_allclose(
            ops.convert_to_numpy(logits)[0, 0], full[0, t], atol=1e-5
        )
    if layout == "stacked":
        assert tuple(cache.shape) == (1, 2, 2, 20, 2, 8)
    else:
        assert isinstance(cache, tuple) and len(cache) == 2


def test_greedy_with_cache_equals_greedy_without():
    gpt = make_gpt()
    prompts = ["to be", "whether 'tis"]  # different lengths in one batch
    cached = gpt.generate(prompts, max_length=CONTEXT)
    uncached = gpt.generate(prompts, max_length=CONTEXT, use_cache=False)
    assert cached == uncached
    assert [s[: len(p)] for s, p in zip(cached, prompts)] == prompts


def no_gradients():
    """PyTorch's `no_grad` (what generate runs under); nothing elsewhere."""
    if keras.backend.backend() != "torch":
        return contextlib.nullcontext()
    import torch

    return torch.no_grad()


def test_generation_writes_its_own_caches_in_place_and_nothing_else():
    """Under PyTorch the decoding loop writes each new position into the
    caches it made (`zoo.accelerator.in_place_updates`), with the text of
    the cache-free path; a direct `call_with_cache` never changes the cache
    it is given, on any backend."""
    gpt = make_gpt()
    step, written = gpt.call_with_cache, []

    def spy(ids, cache, index):
        outputs = step(ids, cache, index)
        written.append(all(a is b for a, b in zip(cache, outputs[2])))
        return outputs

    gpt.call_with_cache = spy
    prompts = ["to be", "whether 'tis"]
    cached = gpt.generate(prompts, max_length=CONTEXT, sampler="beam")
    del gpt.call_with_cache
    assert written and set(written) == {keras.backend.backend() == "torch"}
    assert cached == gpt.generate(
        prompts, max_length=CONTEXT, sampler="beam", use_cache=False
    )
    ids = token_ids(gpt, TEXT, 4)
    cache = tuple(ops.zeros((1, 2, 4, 2, 8)) for _ in range(2))
    with no_gradients():  # as inside generate: nothing else forces a copy
        _, _, new = gpt.call_with_cache(ids, cache, 0)
    assert all(not np.any(ops.convert_to_numpy(c)) for c in cache)
    assert all(np.any(ops.convert_to_numpy(c)) for c in new)


def test_generate_string_in_string_out_and_strip_prompt():
    gpt = make_gpt()
    full = gpt.generate("to be", max_length=12)
    assert isinstance(full, str) and full.startswith("to be")
    assert gpt.generate("to be", max_length=12, strip_prompt=True) == full[5:]


def test_top_k_never_picks_outside_the_top_k():
    gpt = make_gpt()
    ids_model = GPT(gpt.backbone, preprocessor=None)  # ids in, ids out
    k = 3
    prompt = np.zeros((2, 20), "int32")
    prompt[:, :5] = token_ids(gpt, "to be", 5)
    mask = np.zeros((2, 20), bool)
    mask[:, :5] = True
    for seed in range(3):
        out = ids_model.generate(
            {"token_ids": prompt, "padding_mask": mask},
            sampler="top_k",
            k=k,
            seed=seed,
            stop_token_ids=None,
        )
        ids = np.asarray(out["token_ids"])
        logits = logits_of(gpt, ids)
        for row in range(2):
            for t in range(4, 19):  # position t predicts t + 1
                top = np.argsort(logits[row, t])[-k:]
                assert ids[row, t + 1] in top, (seed, row, t)


def test_seeded_sampling_is_reproducible():
    gpt = make_gpt()
    for sampler in ("top_k", "top_p", "random"):
        a = gpt.generate(
            ["to be"] * 2, max_length=CONTEXT, sampler=sampler, seed=7
        )
        b = gpt.generate(
            ["to be"] * 2, max_length=CONTEXT, sampler=sampler, seed=7
        )
        c = gpt.generate(
            ["to be"] * 2, max_length=CONTEXT, sampler=sampler, seed=8
        )
        assert a == b, sampler
        assert a != c, sampler


def test_repeated_calls_reuse_the_compiled_function():
    gpt = make_gpt()
    gpt.generate("to be", max_length=16, sampler="top_k", seed=1)
    function = gpt.generate_function
    gpt.generate("or not", max_length=16, sampler="top_k", seed=2)
    assert gpt.generate_function is function
    gpt.generate("to be", max_length=16)  # greedy: its own function
    gpt.generate("or not", max_length=16, sampler="top_k", seed=3)
    assert gpt.generate_function is function


def test_beam_search_returns_the_highest_scoring_beam():
    # Hand-made next-token distribution over 4 tokens, after prompt [0]:
    # step 1: P(1)=0.5, P(2)=0.4, P(3)=0.1. After 1: max P = 0.4 (total
    # 0.2). After 2: P(3) = 0.9 (total 0.36). Greedy takes 1, beam takes 2, 3.
    table = np.log(
        np.array(
            [
                [1e-9, 0.5, 0.4, 0.1],  # after token 0
                [0.3, 0.3, 0.4, 1e-9],  # after token 1
                [0.05, 0.05, 1e-9, 0.9],  # after token 2
                [0.25, 0.25, 0.25, 0.25],
            ],
            "float32",
        )
    )

    def next(prompt, cache, index):
        last = ops.take_along_axis(
            prompt,
            ops.reshape(index - 1, (1, 1)) * ops.ones_like(prompt[:, :1]),
            axis=1,
        )[:, 0]
        return ops.take(ops.convert_to_tensor(table), last, axis=0), None, cache

    prompt = np.zeros((1, 3), "int32")
    mask = np.array([[True, False, False]])
    cache = np.zeros((1, 1), "float32")
    beam = get_sampler("beam", num_beams=2)(
        next, prompt, cache=cache, index=1, mask=mask
    )
    greedy = get_sampler("greedy")(
        next, prompt, cache=cache, index=1, mask=mask
    )
    assert ops.convert_to_numpy(beam).tolist() == [[0, 2, 3]]
    assert ops.convert_to_numpy(greedy).tolist() == [[0, 1, 2]]


def test_beam_sampler_runs_through_generate():
    gpt = make_gpt()
    out = gpt.generate(
        ["to be", "or"], max_length=16, sampler="beam", num_beams=3
    )
    assert len(out) == 2 and out[0].startswith("to be")
    assert out == gpt.generate(
        ["to be", "or"],
        max_length=16,
        sampler="beam",
        num_beams=3,
        use_cache=False,
    )


def test_generation_stops_at_a_stop_token():
    gpt = make_gpt()
    ids_model = GPT(gpt.backbone, preprocessor=None)
    prompt = {
        "token_ids": np.zeros((1, 12), "int32"),
        "padding_mask": np.zeros((1, 12), bool),
    }
    prompt["token_ids"][0, :5] = token_ids(gpt, "to be", 5)[0]
    prompt["padding_mask"][0, :5] = True
    free = ids_model.generate(dict(prompt), stop_token_ids=None)
    assert np.asarray(free["padding_mask"]).all()
    first_new = int(np.asarray(free["token_ids"])[0, 5])
    stopped = ids_model.generate(dict(prompt), stop_token_ids=(first_new,))
    mask = np.asarray(stopped["padding_mask"])[0]
    assert mask[:6].all() and not mask[6:].any()


def test_end_token_of_the_tokenizer_is_the_auto_stop():
    tokenizer = CharacterTokenizer.from_text(TEXT, end_token="<eos>")
    assert tokenizer.end_token_id == 2
    backbone = GPTBackbone(
        tokenizer.vocabulary_size(),
        num_layers=1,
        num_heads=2,
        hidden_dim=16,
        sequence_length=CONTEXT,
    )
    gpt = GPT(backbone, GPTPreprocessor(tokenizer, CONTEXT))
    out = gpt.generate("to", max_length=12)
    assert out.startswith("to") and "<eos>" not in out


def window_greedy_reference(gpt, prompt, max_length):
    """Greedy decoding as nanoGPT writes it: at every step, the logits of
    the last `CONTEXT` tokens (a full forward pass), argmax."""
    ids = list(np.asarray(gpt.preprocessor.tokenizer(prompt)))
    ids_model = GPT(gpt.backbone, preprocessor=None)  # the same weights
    while len(ids) < max_length:
        window = ids[-CONTEXT:]
        # Padded at the end to one shape (one compiled call): a causal
        # model's logits at the last real position do not see it.
        padded = np.zeros((1, CONTEXT), "int32")
        padded[0, : len(window)] = window
        logits = ids_model.predict_on_batch(
            {"token_ids": padded, "padding_mask": np.ones_like(padded)}
        )
        ids.append(int(np.argmax(np.asarray(logits)[0, len(window) - 1])))
    return gpt.preprocessor.tokenizer.detokenize(ids)


def test_generation_past_the_context_slides_a_window_of_the_context():
    gpt = make_gpt()
    max_length = CONTEXT + 10
    prompts = ["to be", "whether 'tis"]
    cached = gpt.generate(prompts, max_length=max_length)
    assert cached == [
        window_greedy_reference(gpt, p, max_length) for p in prompts
    ]
    assert cached == gpt.generate(
        prompts, max_length=max_length, use_cache=False
    )
    # A prompt longer than the context is read through the same window.
    long_prompt = cached[1][: CONTEXT + 4]
    assert gpt.generate(
        long_prompt, max_length=CONTEXT + 8
    ) == window_greedy_reference(gpt, long_prompt, CONTEXT + 8)


def test_samplers_past_the_context():
    gpt = make_gpt()
    ids_model = GPT(gpt.backbone, preprocessor=None)  # ids in, ids out
    prompt = np.zeros((2, 2 * CONTEXT), "int32")
    prompt[:, :5] = token_ids(gpt, "to be", 5)
    inputs = {"token_ids": prompt, "padding_mask": prompt > 0}
    for options in (
        dict(sampler="top_k", k=3, seed=2),
        dict(sampler="beam", num_beams=2),
    ):
        out = ids_model.generate(dict(inputs), stop_token_ids=None, **options)
        assert np.asarray(out["padding_mask"]).all()  # filled to the end
        np.testing.assert_array_equal(out["token_ids"][:, :5], prompt[:, :5])
        again = ids_model.generate(dict(inputs), stop_token_ids=None, **options)
        np.testing.assert_array_equal(out["token_ids"], again["token_ids"])


def test_prompt_and_length_errors():
    gpt = make_gpt()
    # max_length: an integer from 2 to a named cap, refused before any
    # buffer is allocated (1e12 would be terabytes).
    for bad in (1, 1e12, float("nan"), 12.5, "12"):
        with pytest.raises(
            ValueError,
            match=r"max_length must be an integer in \[2, 1000000\] "
            r"\(.*MAX_GENERATION_LENGTH\)",
        ):
            gpt.generate("to be", max_length=bad)
    with pytest.raises(ValueError, match="at least one prompt"):
        gpt.generate([], max_length=10)
    with pytest.raises(ValueError, match="no room"):
        gpt.generate("x" * CONTEXT, max_length=CONTEXT)
    with pytest.raises(ValueError, match="empty"):
        gpt.generate("", max_length=CONTEXT)
    # Not text: one error naming the value (before, str() made "None" or
    # "[1, 2]" into a prompt).
    for prompt in (None, [1, 2], ["to be", None]):
        with pytest.raises(TypeError, match="reads text, but got .*token_ids"):
            gpt.generate(prompt, max_length=10)
    assert gpt.generate(
        np.array(["to be"]), max_length=8, strip_prompt=True
    ) == gpt.generate(["to be"], max_length=8, strip_prompt=True)
    with pytest.raises(
        TypeError, match="predict\\(\\) reads text, but got int"
    ):
        gpt.predict(np.array([[1, 2, 3]]))
    with pytest.raises(ValueError, match="sampler must be one of"):
        gpt.generate("to be", max_length=10, sampler="nucleus")
    # A zero (or NaN) temperature divides the logits by zero: refused for
    # every sampler rather than sampling garbage.
    for sampler in ("greedy", "top_k", None):
        for temperature in (0.0, -1.0, float("nan")):
            with pytest.raises(
                ValueError, match="temperature must be a finite number > 0"
            ):
                gpt.generate(
                    "to be",
                    max_length=10,
                    sampler=sampler,
                    temperature=temperature,
                )
    # Sampler options: one line on every backend (k=0 returned the prompt
    # unchanged under TensorFlow and failed otherwise under JAX and torch),
    # checked before the prompts are read.
    for options, message in (
        (dict(sampler="top_k", k=0), "k must be an integer >= 1"),
        (dict(sampler="top_p", p=1.5), r"p must be a number in \(0, 1\]"),
        (dict(sampler="beam", num_beams=0), "num_beams must be an integer"),
    ):
        with pytest.raises(ValueError, match=message) as error:
            gpt.generate(None, max_length=10, **options)
        assert "\n" not in str(error.value)
    with pytest.raises(ValueError, match="k must be an integer >= 1"):
        gpt.compile(sampler=keras_hub.samplers.TopKSampler(k=0))


def test_out_of_range_token_ids_are_an_error():
    gpt = make_gpt()
    ids = np.array([[1, 2, gpt.backbone.vocabulary_size]], "int32")
    with pytest.raises(ValueError, match="outside"):
        gpt({"token_ids": ids, "padding_mask": np.ones_like(ids)})
    with pytest.raises(ValueError, match="longer than sequence_length"):
        long = np.ones((1, CONTEXT + 1), "int32")
        gpt({"token_ids": long, "padding_mask": long})
    # generate() on token ids without a preprocessor: checked before the
    # compiled loop, where a bad id would silently embed as NaN.
    gpt.preprocessor = None
    prompt = np.zeros((1, CONTEXT), "int32")
    prompt[0, :3] = [1, gpt.backbone.vocabulary_size, 2]
    with pytest.raises(ValueError, match="outside"):
        gpt.generate(
            {"token_ids": prompt, "padding_mask": prompt > 0},
            max_length=CONTEXT,
            stop_token_ids=None,
        )


def test_save_load_generate(tmp_path):
    gpt = make_gpt(tie_weights=False)
    path = str(tmp_path / "gpt.keras")
    gpt.save(path)
    loaded = keras.saving.load_model(path)
    assert isinstance(loaded, GPT)
    assert loaded.backbone.get_config() == gpt.backbone.get_config()
    ids = token_ids(gpt, TEXT, 12)
    np.testing.assert_allclose(
        logits_of(loaded, ids), logits_of(gpt, ids), atol=1e-6
    )
    assert loaded.generate(["to be"], max_length=20) == gpt.generate(
        ["to be"], max_length=20
    )
    assert loaded.generate(
        "or", max_length=20, sampler="top_k", seed=3
    ) == gpt.generate("or", max_length=20, sampler="top_k", seed=3)


def _with_compile_config(path, new_path, change):
    """A copy of the `.keras` file `path` whose compile config is
    `change(compile_config)`."""
    with zipfile.ZipFile(path) as source:
        files = {name: source.read(name) for name in source.namelist()}
    config = json.loads(files["config.json"])
    change(config["compile_config"])
    files["config.json"] = json.dumps(config).encode()
    with zipfile.ZipFile(new_path, "w") as target:
        for name, data in files.items():
            target.writestr(name, data)
    return new_path


def test_the_compiled_sampler_and_its_settings_are_saved(tmp_path):
    gpt = make_gpt()
    sampler_of_gpt = get_sampler("top_p", p=0.8, k=7, temperature=0.7, seed=3)
    gpt.compile(sampler=sampler_of_gpt)
    path = str(tmp_path / "gpt.keras")
    gpt.save(path)
    loaded = keras.saving.load_model(path)
    sampler = loaded.sampler
    assert type(sampler).__name__ == "TopPSampler"
    assert (sampler.p, sampler.k, sampler.temperature, sampler.seed) == (
        0.8,
        7,
        0.7,
        3,
    )
    assert loaded.generate("to be", max_length=16, seed=5) == gpt.generate(
        "to be", max_length=16, seed=5
    )
    greedy = gpt.generate("to be", max_length=16, sampler="greedy")
    assert gpt.sampler is sampler_of_gpt  # what generate() uses by default

    # A file saved before samplers were saved generates greedily.
    old = _with_compile_config(
        path, str(tmp_path / "old.keras"), lambda c: c.pop("sampler")
    )
    loaded = keras.saving.load_model(old)
    assert isinstance(loaded.sampler, keras_hub.samplers.GreedySampler)
    assert loaded.generate("to be", max_length=16) == greedy

    # A sampler whose class is unknown where the file loads: greedy too.
    def unknown(config):
        config["sampler"].update(module=None, registered_name="me>Mine")

    unknown = _with_compile_config(path, str(tmp_path / "mine.keras"), unknown)
    with pytest.warns(UserWarning, match="saved sampler TopPSampler cannot"):
        loaded = keras.saving.load_model(unknown)
    assert loaded.generate("to be", max_length=16) == greedy


def _keras_hub_gpt2_and_zoo(activation):
    """keras-hub's GPT2Backbone and a zoo GPTBackbone of the same size,
    keras-hub's weights copied into zoo's by name."""
    import keras_hub

    size = dict(num_layers=2, num_heads=2, hidden_dim=16)
    keras.utils.set_random_seed(0)
    theirs = keras_hub.models.GPT2Backbone(
        vocabulary_size=40,
        intermediate_dim=64,
        max_sequence_length=CONTEXT,
        **size,
    )
    ours = GPTBackbone(
        40, sequence_length=CONTEXT, activation=activation, **size
    )
    rng = np.random.default_rng(0)  # larger than GPT-2's N(0, 0.02), so
    for weight in theirs.weights:  # the two GELUs differ visibly
        weight.assign(rng.normal(0.0, 0.3, weight.shape))
    values = {w.path: ops.convert_to_numpy(w) for w in theirs.weights}
    for weight in ours.weights:  # zoo nests both tables under "embeddings/"
        weight.assign(values[weight.path.removeprefix("embeddings/")])
    return theirs, ours


def test_approximate_gelu_backbone_equals_keras_hub_gpt2():
    theirs, ours = _keras_hub_gpt2_and_zoo("gelu_approximate")
    ids = np.random.default_rng(0).integers(1, 40, (2, 10)).astype("int32")
    padding = np.ones_like(ids).astype(bool)
    padding[1, 7:] = False
    inputs = {"token_ids": ids, "padding_mask": padding}
    expected = ops.convert_to_numpy(theirs(inputs))
    np.testing.assert_allclose(
        ops.convert_to_numpy(ours(inputs)["sequence_output"])[padding],
        expected[padding],
        atol=5e-6,
    )
    # The default, exact GELU is a different function of the same weights.
    exact = GPTBackbone.from_config({**ours.get_config(), "activation": "gelu"})
    exact.set_weights(ours.get_weights())
    assert (
        np.abs(
            ops.convert_to_numpy(exact(inputs)["sequence_output"]) - expected
        ).max()
        > 5e-5
    )


def test_approximate_gelu_survives_saving(tmp_path):
    _, backbone = _keras_hub_gpt2_and_zoo("gelu_approximate")
    path = str(tmp_path / "gpt.keras")
    backbone.save(path)
    loaded = keras.saving.load_model(path)
    assert loaded.get_config()["activation"] == "gelu_approximate"
    ids = np.arange(1, 11, dtype="int32")[None]
    inputs = {"token_ids": ids, "padding_mask": np.ones_like(ids)}
    np.testing.assert_allclose(
        ops.convert_to_numpy(loaded(inputs)["sequence_output"]),
        ops.convert_to_numpy(backbone(inputs)["sequence_output"]),
        atol=1e-6,
    )


def test_an_unknown_activation_is_an_error_naming_the_choices():
    with pytest.raises(ValueError, match="gelu_approximate"):
        GPTBackbone(
            40, num_layers=1, num_heads=2, hidden_dim=16, activation="relu"
        )


def test_mixed_bfloat16_forward_and_generate():
    gpt = make_gpt(dtype="mixed_bfloat16")
    logits = logits_of(gpt, token_ids(gpt, TEXT, 10))
    assert logits.dtype == np.float32 and np.isfinite(logits).all()
    assert gpt.generate("to be", max_length=16).startswith("to be")


def test_fit_and_evaluate_on_raw_strings():
    """keras-hub's CausalLM way: the preprocessor (character tokenizer
    included) runs inside fit's tf.data pipeline."""
    gpt = make_gpt()
    gpt.compile(optimizer=keras.optimizers.Adam(1e-2))
    lines = TEXT.split("\n")[:2] * 4
    before = gpt.evaluate(lines, batch_size=4, verbose=0, return_dict=True)
    gpt.fit(lines, batch_size=4, epochs=3, verbose=0)
    after = gpt.evaluate(lines, batch_size=4, verbose=0, return_dict=True)
    assert np.isfinite(after["loss"]) and after["loss"] < before["loss"]


def test_fit_and_evaluate_on_token_windows():
    """Model-ready NumPy batches (a PyDataset) skip the preprocessor."""
    from zoo.data.corpus import TokenWindows
    from zoo.data.tokenizers import encode_corpus

    gpt = make_gpt()
    gpt.compile(optimizer=keras.optimizers.Adam(1e-2))
    ids = encode_corpus(gpt.preprocessor.tokenizer, TEXT * 4)
    train = TokenWindows(ids, CONTEXT, 4, steps=3, seed=1)
    held_out = TokenWindows(ids, CONTEXT, 4, shuffle=False)
    before = gpt.evaluate(held_out, verbose=0, return_dict=True)
    gpt.fit(train, epochs=3, validation_data=held_out, verbose=0)
    after = gpt.evaluate(held_out, verbose=0, return_dict=True)
    assert np.isfinite(after["loss"]) and after["loss"] < before["loss"]
    with pytest.raises(ValueError, match="PyDataset"):
        gpt.fit(train, ids, verbose=0)  # the targets are in the batches


def test_training_steps_on_raw_text_change_weights_and_are_finite():
    """The task trains itself on raw strings: no separate trainer model."""
    gpt = make_gpt(dropout=0.1)
    gpt.compile(optimizer=keras.optimizers.AdamW(1e-2))
    window = [TEXT[: CONTEXT + 1]]
    before = ops.convert_to_numpy(
        gpt.backbone.token_embedding.embeddings
    ).copy()
    first = gpt.train_on_batch(window, return_dict=True)["loss"]
    for _ in range(5):
        last = gpt.train_on_batch(window, return_dict=True)["loss"]
    assert np.isfinite(last) and last < first
    after = ops.convert_to_numpy(gpt.backbone.token_embedding.embeddings)
    assert np.abs(after - before).max() > 0


def test_presets_build_their_sizes():
    tokenizer = CharacterTokenizer.from_text(TEXT)
    backbone = GPTBackbone.from_preset("cpu_small", vocabulary_size=65)
    assert (
        backbone.num_layers,
        backbone.hidden_dim,
        backbone.sequence_length,
    ) == (4, 128, 128)
    assert backbone.count_params() == 818048
    # GPT-2 small's published size: tests/models/test_families.py builds
    # every preset and checks it.
    gpt = GPT.from_preset(
        "smoke",
        preprocessor=GPTPreprocessor(tokenizer, 32),
        backbone_num_layers=1,
    )
    assert gpt.backbone.num_layers == 1 and gpt.backbone.hidden_dim == 32
    assert gpt.backbone.vocabulary_size == tokenizer.vocabulary_size()
    assert (
        GPTPreprocessor.from_preset(
            "nanogpt", tokenizer=tokenizer
        ).sequence_length
        == 256
    )
    with pytest.raises(ValueError, match="Unknown gpt preset"):
        GPTBackbone.from_preset("huge", vocabulary_size=10)


def _table_next(table):
    table = ops.convert_to_tensor(np.log(np.asarray(table, "float32")))

    def next(prompt, cache, index):
        last = ops.take_along_axis(
            prompt,
            ops.reshape(index - 1, (1, 1)) * ops.ones_like(prompt[:, :1]),
            axis=1,
        )[:, 0]
        return ops.take(table, last, axis=0), None, cache

    return next


def test_beam_search_keeps_each_row_s_beams_and_cache_apart():
    """Rows of a batch search on their own: each row's cache (here an id
    that picks the row's own next-token table, beside an integer entry the
    step writes to) follows its beams, and a batch gives what each row
    gives alone."""
    rng = np.random.default_rng(0)
    tables = np.log(rng.dirichlet(np.ones(5) * 0.3, size=(3, 5))).astype(
        "float32"
    )  # tables[row, last token] -> next-token log-probabilities

    def next(prompt, cache, index):
        row_ids, history = cache
        last = ops.take_along_axis(
            prompt,
            ops.reshape(index - 1, (1, 1)) * ops.ones_like(prompt[:, :1]),
            axis=1,
        )[:, 0]
        rows = ops.cast(row_ids[:, 0], "int32")
        logits = ops.take(
            ops.reshape(ops.convert_to_tensor(tables), (15, 5)),
            rows * 5 + last,
            axis=0,
        )
        history = ops.slice_update(
            history, [0, index - 1], ops.cast(last, history.dtype)[:, None]
        )
        return logits, None, (row_ids, history)

    def search(rows):
        prompt = np.zeros((len(rows), 6), "int32")
        prompt[:, 0] = [r + 1 for r in rows]
        mask = np.zeros((len(rows), 6), bool)
        mask[:, 0] = True
        cache = (
            np.array(rows, "float32")[:, None],
            np.full((len(rows), 6), -1, "int32"),
        )
        out = get_sampler("beam", num_beams=3)(
            next, prompt, cache=cache, index=1, mask=mask, stop_token_ids=(4,)
        )
        return ops.convert_to_numpy(out).tolist()

    together = search([0, 1, 2])
    assert together == search([0]) + search([1]) + search([2])
    assert len({tuple(row[1:]) for row in together}) > 1  # rows differ


def test_beam_search_ends_hypotheses_at_the_stop_token_and_penalises_length():
    """Token 3 is the stop token. From the start (token 0) a short sentence
    ends at once with P = 0.4 (0 -> 3); the long one goes 0 -> 1 -> 2 -> 3
    with P = 0.6 * 0.6 * 0.6 = 0.216. Raw log-probabilities prefer the short
    one; a strong length penalty prefers the long one. keras-hub's beam
    search would also count what it samples after the stop token."""
    table = [
        [1e-9, 0.6, 1e-9, 0.4],  # after 0
        [1e-9, 0.4 - 1e-9, 0.6, 1e-9],  # after 1
        [1e-9, 0.4, 1e-9, 0.6],  # after 2
        [0.97, 0.01, 0.01, 0.01],  # after the stop token: anything
    ]
    prompt = np.zeros((1, 6), "int32")
    mask = np.array([[True] + [False] * 5])
    cache = np.zeros((1, 1), "float32")
    short = get_sampler("beam", num_beams=2, length_penalty=0.0)(
        _table_next(table),
        prompt,
        cache=cache,
        index=1,
        mask=mask,
        stop_token_ids=(3,),
    )
    assert ops.convert_to_numpy(short).tolist()[0][:2] == [0, 3]
    long = get_sampler("beam", num_beams=2, length_penalty=4.0)(
        _table_next(table),
        prompt,
        cache=cache,
        index=1,
        mask=mask,
        stop_token_ids=(3,),
    )
    assert ops.convert_to_numpy(long).tolist()[0][:4] == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="num_beams"):
        get_sampler("beam", num_beams=0)


def test_beam_search_length_counts_to_whichever_stop_token_comes_first():
    """After token 3, stop token 1 (P = 0.5) or stop token 2 (P = 0.45).
    Both hypotheses end there, so the length penalty cannot tell them
    apart and the likelier wins, whatever the order of the stop ids."""
    table = [
        [0.25, 0.25, 0.25, 0.25],
        [0.97, 0.01, 0.01, 0.01],
        [0.97, 0.01, 0.01, 0.01],
        [0.05, 0.5, 0.45, 1e-4],  # after 3
    ]
    prompt = np.array([[3, 0, 0, 0]], "int32")
    mask = np.array([[True, False, False, False]])
    for stops in ((1, 2), (2, 1)):
        out = get_sampler("beam", num_beams=2, length_penalty=4.0)(
            _table_next(table),
            prompt,
            cache=np.zeros((1, 1), "float32"),
            index=1,
            mask=mask,
            stop_token_ids=stops,
        )
        assert ops.convert_to_numpy(out).tolist()[0][:2] == [3, 1], stops


@pytest.mark.parametrize("stop_token_ids", [None, (2,)])
def test_beam_search_of_a_longer_prompt_ignores_the_rest_of_the_batch(
    stop_token_ids,
):
    """A bigram model; row 0's prompt is 5 tokens, row 1's one. The search
    starts at the shortest prompt's end; row 0's beams must not be ranked
    on tokens its prompt then overwrites."""
    rng = np.random.default_rng(36)
    table = np.exp(rng.normal(size=(6, 6)) * 1.5)
    table /= table.sum(1, keepdims=True)
    prompt = np.zeros((2, 9), "int32")
    mask = np.zeros((2, 9), bool)
    prompt[0, :5], mask[0, :5] = [5, 1, 4, 1, 1], True
    prompt[1, :1], mask[1, :1] = [3], True

    def search(prompt, mask):
        out = get_sampler("beam", num_beams=3)(
            _table_next(table),
            prompt,
            cache=np.zeros((len(prompt), 1)),
            index=int(mask.sum(1).min()),
            mask=mask,
            stop_token_ids=stop_token_ids,
        )
        return ops.convert_to_numpy(out)

    together = search(prompt, mask)
    np.testing.assert_array_equal(together[0], search(prompt[:1], mask[:1])[0])
    np.testing.assert_array_equal(together[1], search(prompt[1:], mask[1:])[0])
    assert together[0, :5].tolist() == [5, 1, 4, 1, 1]


@pytest.mark.parametrize("name", ["top_k", "top_p"])
def test_k_above_the_vocabulary_samples_from_all_of_it(name):
    """keras-hub's samplers asked `top_k` for more entries than the
    vocabulary has (an error on every backend), with the default k=10 too."""
    table = np.full((6, 6), 1 / 6)
    prompt = np.ones((2, 40), "int32")
    mask = np.zeros((2, 40), bool)
    mask[:, 0] = True
    out = get_sampler(name, k=10, seed=1)(
        _table_next(table), prompt, cache=np.zeros((2, 1)), index=1, mask=mask
    )
    drawn = ops.convert_to_numpy(out)[:, 1:]
    assert set(np.unique(drawn)) == set(range(6))


def test_compile_with_a_sampler_name_takes_the_zoo_sampler():
    gpt = make_gpt()
    gpt.compile(sampler="beam")
    from zoo.models.generation import BeamSampler

    assert isinstance(gpt.sampler, BeamSampler)
    gpt.compile(sampler="top_k")
    assert gpt.sampler.k == 10 and hasattr(gpt.sampler, "get_next_token")
    assert type(gpt.sampler).__module__ == "zoo.models.generation"


def test_beam_generate_of_a_prompt_does_not_depend_on_the_batch():
    gpt = make_gpt()
    prompts = ["to be or not", "o"]
    together = gpt.generate(prompts, max_length=20, sampler="beam", num_beams=3)
    alone = [
        gpt.generate([p], max_length=20, sampler="beam", num_beams=3)[0]
        for p in prompts
    ]
    assert together == alone


def test_a_preprocessor_longer_than_the_context_is_refused_at_once():
    tokenizer = CharacterTokenizer.from_text(TEXT)
    with pytest.raises(
        ValueError,
        match=r"GPTCausalLM: the preprocessor packs 64 "
        r"tokens but the backbone has 32 positions.*"
        r"backbone_sequence_length=64",
    ):
        GPT.from_preset("smoke", preprocessor=GPTPreprocessor(tokenizer, 64))
    gpt = GPT.from_preset(
        "smoke",
        preprocessor=GPTPreprocessor(tokenizer, 64),
        backbone_sequence_length=64,
    )
    assert gpt.backbone.sequence_length == 64


def test_a_prompt_outside_the_vocabulary_is_a_warning_naming_it():
    gpt = make_gpt()
    with pytest.warns(
        UserWarning,
        match=r"prompt 1 has 2 token\(s\) outside "
        r"the vocabulary \('ü', '€'\)",
    ):
        gpt.generate(["to be", "to ü€"], max_length=12)
