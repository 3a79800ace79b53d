"""zoo.models.generation under the current backend: what the random
samplers draw from a known distribution (the nucleus of top-p, the k
likeliest of top-k), and every sampler argument refused the same way,
in one line naming it, before anything runs. The tasks' use of these
checks is tested with each task (tests/models/gpt, seq2seq, captioning)."""

import keras
import keras_hub
import numpy as np
import pytest
from keras import ops

from zoo.models.generation import (
    MAX_GENERATION_LENGTH,
    check_max_length,
    check_sampler,
    get_sampler,
)

# Token 0 then 1 hold 90% of the mass: top-p with p=0.8 keeps exactly the
# two of them (0.6 < 0.8 <= 0.9), p=0.5 token 0 alone, top-k with k=2 the
# same two.
PEAKED = np.log(np.array([0.6, 0.3, 0.05, 0.05], "float32"))


def draws(sampler, rows=8, length=64):
    """The tokens `sampler` draws after a one-token prompt, each step from
    the distribution `PEAKED` whatever came before: `rows * (length - 1)`
    draws."""

    def next(prompt, cache, index):
        logits = ops.broadcast_to(
            ops.convert_to_tensor(PEAKED), (ops.shape(prompt)[0], 4)
        )
        return logits, None, cache

    prompt = np.zeros((rows, length), "int32")
    mask = np.zeros((rows, length), bool)
    mask[:, 0] = True
    out = sampler(
        next, prompt, cache=np.zeros((rows, 1), "float32"), index=1, mask=mask
    )
    return ops.convert_to_numpy(out)[:, 1:]


@pytest.mark.parametrize(
    "name, options, drawn",
    [
        ("top_p", {"p": 0.8}, {0, 1}),
        ("top_p", {"p": 0.5}, {0}),
        ("top_p", {"p": 1.0}, {0, 1, 2, 3}),
        ("top_k", {"k": 2}, {0, 1}),
    ],
)
def test_random_samplers_draw_from_their_nucleus_only(name, options, drawn):
    """Each token of the nucleus occurs (504 draws: the chance that token 1,
    at 1/3 of the kept mass, never does is below 1e-88) and nothing else
    does. A top-p that ignored `p` would draw all four tokens at p=0.5."""
    tokens = draws(get_sampler(name, seed=3, **options))
    assert set(np.unique(tokens).tolist()) == drawn
    if drawn == {0, 1}:  # in about their 2:1 proportion
        assert 0.5 < np.mean(tokens == 0) < 0.8


BAD_OPTIONS = [
    # (sampler, options, what the message names)
    ("top_k", {"k": 0}, "k must be an integer >= 1.*got 0"),
    ("top_k", {"k": -3}, "k must be an integer >= 1.*got -3"),
    ("top_k", {"k": 2.5}, "k must be an integer >= 1.*got 2.5"),
    ("top_k", {"k": float("nan")}, "k must be an integer >= 1.*got nan"),
    ("top_k", {"k": "5"}, "k must be an integer >= 1.*got '5'"),
    ("top_k", {"k": None}, "k must be an integer >= 1.*got None"),
    ("top_p", {"p": 0}, r"p must be a number in \(0, 1\].*got 0"),
    ("top_p", {"p": 1.5}, r"p must be a number in \(0, 1\].*got 1.5"),
    ("top_p", {"p": float("nan")}, r"p must be a number in \(0, 1\].*nan"),
    ("top_p", {"p": 0.9, "k": 0}, "k must be an integer >= 1.*got 0"),
    ("beam", {"num_beams": 0}, "num_beams must be an integer >= 1.*got 0"),
    ("beam", {"num_beams": 1.5}, "num_beams must be an integer >= 1.*1.5"),
    ("beam", {"length_penalty": -1}, "length_penalty must be a finite .*-1"),
    ("greedy", {"temperature": 0.0}, "temperature must be a finite .*> 0"),
    ("top_k", {"temperature": -1}, "temperature must be .*got -1"),
    ("top_p", {"temperature": float("nan")}, "temperature must .*got nan"),
    ("random", {"temperature": float("inf")}, "temperature must .*got inf"),
    ("random", {"temperature": "hot"}, "temperature must .*got 'hot'"),
    ("nucleus", {}, "sampler must be one of .*got 'nucleus'"),
]


@pytest.mark.parametrize("name, options, message", BAD_OPTIONS)
def test_every_bad_sampler_argument_is_one_line_naming_it(
    name, options, message
):
    with pytest.raises(ValueError, match=message) as error:
        get_sampler(name, **options)
    assert "\n" not in str(error.value)


def test_sampler_arguments_are_held_as_numbers_and_options_are_checked():
    sampler = get_sampler("top_k", k=np.int64(3), temperature=np.float32(2))
    assert type(sampler.k) is int and sampler.k == 3
    assert type(sampler.temperature) is float
    assert get_sampler("top_p", p=1).p == 1.0 and get_sampler("top_p").k is None
    with pytest.raises(TypeError, match="sampler='top_k' takes the options k"):
        get_sampler("top_k", p=0.5)
    with pytest.raises(TypeError, match="'greedy' takes no options.*k=3"):
        get_sampler("greedy", k=3)


@pytest.mark.parametrize(
    "sampler, message",
    [
        (keras_hub.samplers.TopKSampler(k=0), "k must be an integer >= 1"),
        (keras_hub.samplers.TopPSampler(p=2.0), "p must be a number in"),
        (keras_hub.samplers.BeamSampler(num_beams=0), "num_beams must be"),
        (keras_hub.samplers.GreedySampler(temperature=0), "temperature must"),
    ],
)
def test_sampler_objects_are_checked_as_names_are(sampler, message):
    with pytest.raises(ValueError, match=message):
        check_sampler(sampler)


def test_max_length_is_an_integer_up_to_a_named_cap():
    assert check_max_length(24.0) == 24
    assert check_max_length(np.int32(5), 8, "the decoder's length") == 5
    for bad in (1, 1e12, float("nan"), 2.5, "10", None):
        with pytest.raises(
            ValueError, match="max_length must be an integer"
        ) as e:
            check_max_length(bad)
        assert f"[2, {MAX_GENERATION_LENGTH}]" in str(e.value)
        assert "MAX_GENERATION_LENGTH" in str(e.value)
    with pytest.raises(ValueError, match=r"in \[2, 8\] \(the decoder's length"):
        check_max_length(9, 8, "the decoder's length")


# Logits that depend on the previous token: each row's text follows from
# its prompt, and beam search has beams worth telling apart.
TRANSITIONS = np.random.default_rng(7).normal(size=(6, 6)).astype("float32") * 3


@pytest.mark.parametrize(
    "name, options",
    [
        ("greedy", {}),
        ("top_k", {"k": 3, "seed": 2}),
        ("top_p", {"p": 0.9, "seed": 2}),
        ("random", {"seed": 2}),
        ("beam", {"num_beams": 3}),
        ("beam", {"num_beams": 3, "return_all_beams": True}),
    ],
)
def test_samplers_loop_as_keras_hub_does_with_the_position_an_int_eagerly(
    name, options
):
    """zoo's samplers run keras-hub's loop under JAX and TensorFlow; under
    PyTorch, eagerly, a Python loop that hands `next` the position as an
    int. The tokens (and the beams' scores) are keras-hub's loop's."""
    positions = []

    def next(prompt, cache, index):
        positions.append(index)
        previous = ops.take(prompt, index - 1, axis=1)
        logits = ops.take(ops.convert_to_tensor(TRANSITIONS), previous, axis=0)
        return logits, None, cache

    # Rows of different prompt lengths: the loop starts at the shortest and
    # keeps the longer row's prompt tokens.
    prompt = np.zeros((2, 10), "int32")
    prompt[0, :2], prompt[1, :4] = [1, 4], [2, 5, 0, 3]
    mask = prompt > 0
    mask[1, 2] = True

    def run(sampler):
        positions.clear()
        out = sampler(
            next, prompt, cache=np.zeros((2, 1), "float32"), index=2, mask=mask
        )
        return keras.tree.map_structure(ops.convert_to_numpy, out)

    zoo_sampler = get_sampler(name, **options)
    ours = run(zoo_sampler)
    if keras.backend.backend() == "torch":
        assert positions and all(type(p) is int for p in positions)
        assert positions[0] == 2 and positions == sorted(positions)
    keras_loop = type(
        "KerasLoop",
        (type(zoo_sampler),),
        {"run_loop": keras_hub.samplers.Sampler.run_loop},
    )
    reference = run(keras_loop.from_config(zoo_sampler.get_config()))
    keras.tree.assert_same_structure(ours, reference)
    for got, want in zip(
        keras.tree.flatten(ours), keras.tree.flatten(reference)
    ):
        np.testing.assert_array_equal(got, want)
    # The longer row's prompt is kept, and the shorter row is extended.
    tokens = keras.tree.flatten(ours)[0]
    tokens = tokens if tokens.ndim == 2 else tokens[:, 0]  # the best beam
    np.testing.assert_array_equal(tokens[:, :2], prompt[:, :2])
    np.testing.assert_array_equal(tokens[1, :4], prompt[1, :4])
    assert (tokens[0, 2:] > 0).any()


def test_tasks_refuse_a_sampler_that_returns_every_beam():
    """`return_all_beams=True` is for calling the sampler itself (above):
    a task's `generate` returns one text a prompt, so it refuses the
    option in one line, given by name or to `compile`, before any work."""
    from zoo.data.tokenizers import CharacterTokenizer
    from zoo.models.gpt import GPTCausalLM, GPTPreprocessor

    tokenizer = CharacterTokenizer.from_text("to be or not to be")
    gpt = GPTCausalLM.from_preset(
        "smoke", preprocessor=GPTPreprocessor(tokenizer, 16)
    )
    message = "return_all_beams=True returns every beam.*best beam"
    with pytest.raises(ValueError, match=message) as error:
        gpt.generate(
            "to be", max_length=8, sampler="beam", return_all_beams=True
        )
    assert "\n" not in str(error.value)
    with pytest.raises(ValueError, match=message):
        gpt.compile(
            sampler=keras_hub.samplers.BeamSampler(return_all_beams=True)
        )
    assert len(gpt.generate("to be", max_length=8, sampler="beam")) > 0
