"""Generation shared by every generating task: samplers, compiled functions,
seeds, stop tokens, prompt stripping.

A generating task (a keras-hub `CausalLM` or, next, a `Seq2SeqLM`) supplies
`generate_step(inputs, stop_token_ids)`, which fills the unmasked positions
of a `(batch, length)` buffer of token ids with a keras-hub sampler, and
mixes in `GenerationMixin`, which

* turns a short name and options into a `keras_hub.samplers.Sampler`
  (`get_sampler`);
* keeps one compiled function per setting (sampler, temperature, options,
  mode), so repeated calls reuse it (JAX and TensorFlow retrace only for new
  shapes; PyTorch runs eagerly under `no_grad`);
* rewinds a random sampler's seed for every seeded call, so
  `seed=1` gives the same text on every call (on one backend: the three
  backends draw different random numbers from the same seed);
* resolves `stop_token_ids="auto"` to the tokenizer's end token;
* cuts each row after its first stop token and strips prompts
  (`finish_rows`);
* saves the sampler given to `compile` with its settings in the task's
  compile config, so a `.keras` file generates as the task it was saved
  from (`compile(sampler=...)`; a file without one generates greedily).

Every sampler argument is checked here, before any work and the same way
on every backend (`check_sampler_options`, `check_sampler`), and so is a
generation's `max_length` (`check_max_length`): a bad value is one
ValueError line naming the argument, the value and what is accepted
(keras-hub's samplers take `k=0` or `p=2` without a word, and the backends
then fail, or return the prompt unchanged, each in its own way).
"""

import contextlib
import math
import warnings

import keras
import keras_hub
import numpy as np
from keras import ops
from keras_hub.src.utils.tensor_utils import any_equal

from zoo.accelerator import (
    compile_function,
    compiling,
    in_place_updates,
    xla_calls,
)
from zoo.layers.sublayers import reused_casts
from zoo.models.arguments import check_integer, check_number, shown

SAMPLERS = ("greedy", "top_k", "top_p", "beam", "random")

# The options each sampler takes besides `temperature` and `seed`.
SAMPLER_OPTIONS = {
    "greedy": (),
    "top_k": ("k",),
    "top_p": ("p", "k"),
    "beam": ("num_beams", "length_penalty", "return_all_beams"),
    "random": (),
}

# The most tokens a generation writes, prompt included. Past a model's
# context every new token recomputes the whole window, so even this many
# takes hours on a CPU; an absurd `max_length` (1e12) is refused in one line
# rather than allocating its buffers (terabytes) or running for ever.
MAX_GENERATION_LENGTH = 1_000_000


class _PositionAsInt:
    """A keras-hub sampler whose loop, under eager PyTorch, carries its
    position as a Python int.

    keras-hub's samplers carry the position as a scalar tensor (the third
    loop variable, in every one of them). Run eagerly, each op given it
    pays for that: `ops.slice_update` of the prompt and `ops.slice` of the
    last token build index tensors and scatter or narrow instead of taking
    a slice. Here the loop runs in Python, as Keras' own PyTorch
    `while_loop` does, with the position as an int, so every such op takes
    its slice path. A step compiled with `zoo.accelerator.compile_function`
    is handed the position as a tensor again. Under JAX and TensorFlow, and
    while `torch.compile` traces the loop, keras-hub's `run_loop` runs as
    it is.
    """

    def run_loop(
        self, cond, body, model=None, loop_vars=None, maximum_iterations=None
    ):
        if keras.backend.backend() != "torch" or compiling():
            return super().run_loop(
                cond,
                body,
                model=model,
                loop_vars=loop_vars,
                maximum_iterations=maximum_iterations,
            )
        loop_vars = list(
            keras.tree.map_structure(ops.convert_to_tensor, tuple(loop_vars))
        )
        loop_vars[2] = int(loop_vars[2])
        limit = (
            math.inf if maximum_iterations is None else int(maximum_iterations)
        )
        steps = 0
        while steps < limit and cond(*loop_vars):
            loop_vars = body(*loop_vars)
            steps += 1
        return tuple(loop_vars)


@keras.saving.register_keras_serializable(package="zoo")
class BeamSampler(_PositionAsInt, keras_hub.samplers.BeamSampler):
    """Beam search that ends hypotheses at a stop token and ranks them with
    a length penalty.

    keras-hub's `BeamSampler` keeps extending a beam after its stop token,
    so the words it samples past the end count towards its score, and
    compares raw log-probabilities, which favour short outputs. Here a
    beam that has produced a stop token only repeats it at no cost (its
    score is final), and the best beam maximises
    `log P(y) / ((5 + |y|) / 6) ** length_penalty` (GNMT, Wu et al. 2016;
    `|y|` counts the generated tokens up to and including the stop token;
    any of the stop ids ends a beam). Without stop tokens every beam of a
    row has the same length and the ranking is keras-hub's. Rows whose
    prompts are longer than the batch's shortest keep their prompt tokens
    at no cost until it ends, so a row's result does not depend on the
    rest of the batch (keras-hub's beam search ranks the other beams'
    tokens there and overwrites them). `return_all_beams=True` is
    keras-hub's beam search, unchanged.

    Args:
        num_beams: beams kept per row.
        length_penalty: alpha above; 0 ranks by log-probability alone.
        **kwargs: `temperature` and the rest of keras-hub's sampler
            arguments.
    """

    def __init__(self, num_beams=5, length_penalty=0.6, **kwargs):
        num_beams = check_sampler_option("num_beams", num_beams)
        length_penalty = check_sampler_option("length_penalty", length_penalty)
        super().__init__(num_beams=num_beams, **kwargs)
        self.length_penalty = length_penalty

    def __call__(
        self,
        next,
        prompt,
        cache=None,
        index=0,
        mask=None,
        stop_token_ids=None,
        hidden_states=None,
        model=None,
    ):
        if self.return_all_beams:
            return super().__call__(
                next,
                prompt,
                cache=cache,
                index=index,
                mask=mask,
                hidden_states=hidden_states,
                model=model,
            )
        beams = self.num_beams
        stop_token_ids = tuple(int(t) for t in stop_token_ids or ())
        batch_size = ops.shape(prompt)[0]
        start = ops.cast(index, "int32")
        mask = (
            ops.zeros_like(prompt, dtype="bool")
            if mask is None
            else ops.cast(mask, "bool")
        )

        def create_beams(x):
            return ops.repeat(x, beams, axis=0)

        def flatten_beams(x):
            return ops.reshape(x, (-1,) + tuple(ops.shape(x)[2:]))

        def unflatten_beams(x):
            return ops.reshape(x, (-1, beams) + tuple(ops.shape(x)[1:]))

        has_cache = cache is not None
        cache = cache if has_cache else ()
        prompt, mask = create_beams(prompt), create_beams(mask)
        cache = keras.tree.map_structure(create_beams, cache)
        log_probs = ops.array([[0.0] + [-1e9] * (beams - 1)], dtype="float32")
        log_probs = flatten_beams(
            ops.broadcast_to(log_probs, (batch_size, beams))
        )
        # Flat index of each row's first beam, for gather_beams below.
        row_starts = ops.arange(batch_size)[:, None] * beams

        def finished(prompt):
            if not stop_token_ids:
                return ops.zeros(ops.shape(prompt)[:1], dtype="bool")
            ended = any_equal(prompt, stop_token_ids, ops.logical_not(mask))
            return ops.any(ended, axis=-1)

        # Which beams have written a stop token, carried from step to step
        # (`finished` of the whole prompt once, then of each new token).
        done = finished(prompt)

        def cond(prompt, cache, index, log_probs, done):
            return ops.logical_not(ops.all(done))

        def body(prompt, cache, index, log_probs, done):
            # `index`: a Python int under eager PyTorch (`_PositionAsInt`).
            logits, _, cache = next(prompt, cache, index)
            vocab_size = ops.shape(logits)[-1]
            step = ops.log(self.compute_probabilities(logits) + 1e-30)
            tokens = ops.arange(vocab_size)[None, :]
            if stop_token_ids:
                # A finished beam repeats its first stop token at no cost.
                only_stop = ops.where(tokens == stop_token_ids[0], 0.0, -1e9)
                step = ops.where(done[:, None], only_stop, step)
            # Where this row's prompt goes on (prompts of different
            # lengths), its next prompt token, at no cost: the beams stay
            # those of its first free position, as if it were alone.
            in_prompt = mask[:, index][:, None]
            given = ops.cast(prompt[:, index], "int32")[:, None]
            step = ops.where(
                in_prompt, ops.where(tokens == given, 0.0, -1e9), step
            )
            candidates = ops.reshape(
                step + log_probs[:, None], (-1, beams * vocab_size)
            )
            new_log_probs, indices = ops.top_k(
                candidates, k=beams, sorted=False
            )
            beam_indices = indices // vocab_size
            next_token = flatten_beams(indices % vocab_size)
            # Rows of the flat (batch * beams, ...) tensors to keep: one
            # gather along the first axis (a take_along_axis over the beam
            # axis broadcast its indices to the whole cache every step).
            rows = ops.reshape(beam_indices + row_starts, (-1,))

            def gather_beams(x):
                return ops.take(x, rows, axis=0)

            prompt = gather_beams(prompt)
            if has_cache:
                cache = keras.tree.map_structure(gather_beams, cache)
            next_token = ops.cast(next_token, prompt.dtype)
            in_prompt = in_prompt[:, 0]
            next_token = ops.where(in_prompt, prompt[:, index], next_token)
            prompt = ops.slice_update(prompt, [0, index], next_token[:, None])
            if stop_token_ids:
                done = ops.logical_or(
                    gather_beams(done),
                    any_equal(
                        next_token[:, None],
                        stop_token_ids,
                        ops.logical_not(in_prompt)[:, None],
                    )[:, 0],
                )
            log_probs = ops.reshape(
                flatten_beams(new_log_probs), ops.shape(log_probs)
            )
            return prompt, cache, index + 1, log_probs, done

        prompt, _, _, log_probs, _ = self.run_loop(
            cond=cond,
            body=body,
            loop_vars=(prompt, cache, start, log_probs, done),
            maximum_iterations=(ops.shape(prompt)[1] - start),
            model=model,
        )

        # Generated length up to and including the first stop token.
        generated = ops.logical_not(mask)
        if stop_token_ids:
            is_stop = any_equal(prompt, stop_token_ids, generated)
        else:
            is_stop = ops.zeros_like(generated)
        after_stop = ops.cumsum(ops.cast(is_stop, "int32"), axis=-1) - ops.cast(
            is_stop, "int32"
        )
        lengths = ops.sum(
            ops.cast(ops.logical_and(generated, after_stop == 0), "float32"),
            axis=-1,
        )
        penalty = ops.power((5.0 + lengths) / 6.0, self.length_penalty)
        scores = unflatten_beams(log_probs / penalty)
        best = ops.argmax(scores, axis=-1)[:, None, None]
        return ops.squeeze(
            ops.take_along_axis(unflatten_beams(prompt), best, axis=1), axis=1
        )

    def get_config(self):
        return {**super().get_config(), "length_penalty": self.length_penalty}


class _KWithinVocabulary:
    """Samples from at most the vocabulary's size of tokens: a `k` above
    it keeps them all (keras-hub's samplers ask `top_k` for more entries
    than there are, an error on every backend)."""

    def get_next_token(self, probabilities):
        k, vocabulary_size = self.k, probabilities.shape[-1]
        if k is None or vocabulary_size is None or k <= vocabulary_size:
            return super().get_next_token(probabilities)
        self.k = vocabulary_size
        try:
            return super().get_next_token(probabilities)
        finally:
            self.k = k


@keras.saving.register_keras_serializable(package="zoo")
class GreedySampler(_PositionAsInt, keras_hub.samplers.GreedySampler):
    """keras-hub's `GreedySampler`: the most likely token at each step."""


@keras.saving.register_keras_serializable(package="zoo")
class RandomSampler(_PositionAsInt, keras_hub.samplers.RandomSampler):
    """keras-hub's `RandomSampler`: a draw from the whole distribution."""


@keras.saving.register_keras_serializable(package="zoo")
class TopKSampler(
    _PositionAsInt, _KWithinVocabulary, keras_hub.samplers.TopKSampler
):
    """keras-hub's `TopKSampler`; `k` larger than the vocabulary samples
    from all of it."""


@keras.saving.register_keras_serializable(package="zoo")
class TopPSampler(
    _PositionAsInt, _KWithinVocabulary, keras_hub.samplers.TopPSampler
):
    """keras-hub's `TopPSampler`; `k` larger than the vocabulary is no
    limit."""


def resolve_sampler(sampler):
    """What a task's `compile(sampler=...)` takes: zoo's sampler for one of
    `SAMPLERS` given by name (keras-hub's would be used otherwise: its beam
    search does not end beams at stop tokens), a sampler object checked
    (`check_sampler`), anything else unchanged."""
    if isinstance(sampler, str) and sampler in SAMPLERS:
        return get_sampler(sampler)
    if isinstance(sampler, keras_hub.samplers.Sampler):
        return one_sequence_a_row(check_sampler(sampler))
    return sampler


def one_sequence_a_row(sampler):
    """`sampler`, or one ValueError line if it returns more than one
    sequence a row (a beam search with `return_all_beams=True`: every
    beam and its score), which a task's `generate` cannot turn into one
    text a prompt.

    Example:

    >>> one_sequence_a_row(get_sampler("beam", return_all_beams=True))
    Traceback (most recent call last):
      ...
    ValueError: return_all_beams=True returns every beam with its score, ...
    """
    if getattr(sampler, "return_all_beams", False):
        raise ValueError(
            "return_all_beams=True returns every beam with its score, and "
            "generate() returns one text a prompt, its best beam; call the "
            "sampler itself for every beam."
        )
    return sampler


def saved_sampler(config):
    """The sampler a task's compile config records (`GenerationMixin`):
    the sampler object its config describes. A sampler that cannot be
    rebuilt (a class neither registered with
    `keras.saving.register_keras_serializable` nor given in
    `custom_objects`) is "greedy", with a warning.

    Example:

    >>> sampler = saved_sampler(keras.saving.serialize_keras_object(
    ...     get_sampler("beam", num_beams=4, length_penalty=1.0)))
    >>> type(sampler).__name__, sampler.num_beams, sampler.length_penalty
    ('BeamSampler', 4, 1.0)
    """
    if isinstance(config, str):
        return config
    try:
        return keras.saving.deserialize_keras_object(config)
    except Exception as error:
        name = config.get("class_name") if isinstance(config, dict) else None
        warnings.warn(
            f"The saved sampler {name or shown(config)} cannot be rebuilt "
            f"({type(error).__name__}: {str(error).splitlines()[0][:200]}); "
            "this model generates greedily unless compiled with a sampler "
            "(register the sampler's class with "
            "keras.saving.register_keras_serializable to load it).",
            stacklevel=2,
        )
        return "greedy"


def check_sampler_option(name, value, k_optional=False):
    """`value` of the sampler argument `name` ("temperature", "k", "p",
    "num_beams" or "length_penalty"), as the sampler should hold it (an
    int or a float), or one ValueError line naming the argument, the value
    and what is accepted. `k_optional`: `k` may be None (top-p's cut
    before the nucleus). Other arguments come back unchanged.

    Example:

    >>> check_sampler_option("p", 0)
    Traceback (most recent call last):
      ...
    ValueError: p must be a number in (0, 1] (the probability mass ...); got 0.
    """
    if name == "temperature":
        return check_number(
            "temperature",
            value,
            0,
            low_open=True,
            hint='For the most likely token at every step use sampler="greedy".',
        )
    if name == "k":
        if value is None and k_optional:
            return None
        return check_integer(
            "k", value, 1, meaning="how many of the likeliest tokens to keep"
        )
    if name == "p":
        return check_number(
            "p",
            value,
            0,
            1,
            low_open=True,
            meaning="the probability mass top-p draws from",
        )
    if name == "num_beams":
        return check_integer(
            "num_beams", value, 1, meaning="beams kept per row"
        )
    if name == "length_penalty":
        return check_number("length_penalty", value, 0)
    return value


def check_sampler_options(name, temperature=1.0, **options):
    """`(temperature, options)` of the sampler `name` (one of `SAMPLERS`),
    checked and converted by `check_sampler_option`.

    Raises:
        ValueError: an unknown sampler name, or a value out of range.
        TypeError: an option the sampler does not take.
    """
    if not isinstance(name, str) or name not in SAMPLERS:
        raise ValueError(
            f"sampler must be one of {SAMPLERS}; got {shown(name)}."
        )
    taken = SAMPLER_OPTIONS[name]
    unknown = sorted(option for option in options if option not in taken)
    if unknown:
        takes = f"the options {', '.join(taken)}" if taken else "no options"
        raise TypeError(
            f"sampler={name!r} takes {takes} (and temperature, seed); got "
            + ", ".join(f"{o}={shown(options[o])}" for o in unknown)
            + "."
        )
    temperature = check_sampler_option("temperature", temperature)
    options = {
        option: check_sampler_option(option, value, k_optional=name == "top_p")
        for option, value in options.items()
    }
    return temperature, options


def check_sampler(sampler):
    """A keras-hub sampler object (e.g. given to `compile(sampler=...)`)
    with its `temperature`, `k`, `p`, `num_beams` and `length_penalty`
    checked as `get_sampler` checks them (and held as int or float);
    returns it.

    Example:

    >>> check_sampler(keras_hub.samplers.TopKSampler(k=0))
    Traceback (most recent call last):
      ...
    ValueError: k must be an integer >= 1 (how many ... tokens ...); got 0.
    """
    k_optional = isinstance(sampler, keras_hub.samplers.TopPSampler)
    for name in ("temperature", "k", "p", "num_beams", "length_penalty"):
        if name in vars(sampler):
            value = getattr(sampler, name)
            setattr(
                sampler, name, check_sampler_option(name, value, k_optional)
            )
    return sampler


def get_sampler(name, temperature=1.0, seed=None, **options):
    """A `keras_hub.samplers.Sampler` from a short name.

    Args:
        name: "greedy", "top_k" (option `k`, default 10), "top_p" (options
            `p`, default 0.9, and `k`), "beam" (`BeamSampler`: options
            `num_beams`, default 5, and `length_penalty`, default 0.6) or
            "random" (sample the whole distribution).
        temperature: logits are divided by it before the softmax.
        seed: seed of the random samplers.
        **options: passed to the sampler's constructor.

    Returns:
        A sampler, called as keras-hub's tasks call it.

    Raises:
        ValueError: an unknown name, or an argument out of range, before
            anything runs (`check_sampler_options`): `temperature` a
            finite number > 0 (a zero would divide the logits by zero),
            `k` an integer >= 1, `p` in (0, 1], `num_beams` an integer
            >= 1, `length_penalty` a finite number >= 0.
        TypeError: an option the sampler does not take.

    Example:

    >>> sampler = get_sampler("top_k", k=5, seed=1)
    >>> type(sampler).__name__, sampler.k
    ('TopKSampler', 5)
    """
    temperature, options = check_sampler_options(name, temperature, **options)
    if name == "greedy":
        return GreedySampler(temperature=temperature, **options)
    if name == "top_k":
        options.setdefault("k", 10)
        return TopKSampler(seed=seed, temperature=temperature, **options)
    if name == "top_p":
        options.setdefault("p", 0.9)
        return TopPSampler(seed=seed, temperature=temperature, **options)
    if name == "beam":
        options.setdefault("num_beams", 5)
        return BeamSampler(temperature=temperature, **options)
    if name == "random":
        return RandomSampler(seed=seed, temperature=temperature, **options)
    raise AssertionError(name)  # check_sampler_options knows every name


def check_max_length(max_length, high=MAX_GENERATION_LENGTH, meaning=None):
    """`max_length` of a generation as an int, or one ValueError line
    naming it, its value and the accepted range `[2, high]` (NaN, 2.5, a
    string and an absurd length alike); `meaning` says what sets `high`
    (default: the cap `MAX_GENERATION_LENGTH`).

    Example:

    >>> check_max_length(1e12)
    Traceback (most recent call last):
      ...
    ValueError: max_length must be an integer in [2, 1000000] (...); got 1e+12.
    """
    if meaning is None:
        meaning = (
            "the most tokens a generation writes, prompt included: "
            "zoo.models.generation.MAX_GENERATION_LENGTH"
        )
    return check_integer("max_length", max_length, 2, high, meaning)


def reset_seed(sampler, seed):
    """Rewinds a keras-hub sampler's random state to `seed`, so a seeded call
    is reproducible without recompiling anything."""
    for generator in getattr(sampler, "_seed_generators", []):
        state = generator.state
        state.assign(ops.convert_to_tensor([seed, 0], dtype=state.dtype))


def finish_rows(token_ids, prompt_lengths, stop_token_ids, max_length):
    """Each row's prompt and generated ids, cut after its first stop token.

    Args:
        token_ids: a `(batch, length)` array or a list of 1-D arrays: each
            row's prompt then its generated tokens.
        prompt_lengths: the length of each row's prompt.
        stop_token_ids: ids that end generation (None: none).
        max_length: total length of a row, prompt included.

    Returns:
        `(rows, stopped)`: a list of 1-D arrays, each the prompt and the
        generated tokens up to and including the first stop token (or up to
        `max_length`), and whether each row met a stop token.
    """
    rows, stopped = [], []
    stops = np.asarray(list(stop_token_ids or ()), dtype="int64")
    for ids, start in zip(token_ids, prompt_lengths):
        ids = np.asarray(ids)[:max_length]
        hits = np.flatnonzero(np.isin(ids[start:], stops)) if stops.size else []
        if len(hits):
            ids = ids[: start + hits[0] + 1]
        rows.append(ids)
        stopped.append(bool(len(hits)))
    return rows, stopped


def pad_rows(rows, length, pad_id=0):
    """`(token_ids, padding_mask)` `(batch, length)` NumPy arrays from a list
    of 1-D id arrays (each at most `length` long), left-aligned."""
    token_ids = np.full((len(rows), length), pad_id, dtype="int32")
    mask = np.zeros((len(rows), length), dtype=bool)
    for i, row in enumerate(rows):
        token_ids[i, : len(row)] = row
        mask[i, : len(row)] = True
    return token_ids, mask


def _eager_if_compiling_fails(compiled, eager, name, functions):
    """`compiled`, except that if it raises (torch.compile cannot build the
    step: no C++ compiler for inductor, say), one warning says so and
    `functions[name]` becomes `eager`, which reruns the call (a decoding
    step writes, at most, the new positions of its caches, and the rerun
    writes the same values there, so rerunning it is safe; an error in the
    inputs themselves is raised by the eager call as usual)."""

    failed = []

    def step(*args):
        if failed:  # the loop that was running keeps this function
            return eager(*args)
        try:
            return compiled(*args)
        except Exception as error:
            warnings.warn(
                f"torch.compile could not run the decoding step {name} "
                f"({type(error).__name__}: {str(error)[:200]}); decoding "
                "eagerly instead.",
                RuntimeWarning,
                stacklevel=2,
            )
            failed.append(error)
            functions[name] = eager
            return eager(*args)

    return step


class GenerationMixin:
    """One compiled generation function per setting, for keras-hub tasks.

    Mix in before the keras-hub class (`class GPT(GenerationMixin,
    keras_hub.models.CausalLM)`), call `_init_generation()` in `__init__` and
    `_compiled_sampler_changed(jit_compile)` at the end of `compile`. A
    generation call picks its sampler with `select_sampler` (which rewinds a
    seed), then runs `run_generate_step` once per phase; the task's
    `generate_step` reads `self.generation_mode` (e.g. "cache" or
    "window"), fixed per compiled function, and calls its one-token
    decoding step through `decode_function` (compiled under PyTorch when
    the task was compiled with `jit_compile=True`). `self.sampler` is the
    call's sampler while a step runs and the compiled one otherwise, so
    `task.sampler` says what `generate()` uses when no sampler is named.

    The sampler given to `compile` (with its settings: `num_beams`,
    `length_penalty`, `k`, `p`, `temperature`, `seed`) is saved in the
    compile config (`get_compile_config()["sampler"]`, a serialised
    keras-hub sampler) and restored when the file is loaded, so
    `generate()` without a sampler generates as it did before saving. A
    file saved without one loads with `compile`'s default (greedy), and so
    does `load_model(..., compile=False)`.
    """

    def _init_generation(self):
        self._samplers = {}  # setting -> sampler
        self._generate_functions = {}  # (setting, mode) -> compiled fn
        self._xla_functions = {}  # (setting, mode) -> whether XLA compiles it
        self._built_with_xla = False
        self._compiled_sampler = None
        self._setting = None
        self._generate_with_xla = True
        self._decode_functions = {}  # name -> torch.compile'd step
        self.generation_mode = None

    def _compiled_sampler_changed(self, jit_compile="auto"):
        # generate() swaps self.sampler per call; this is its default.
        self._compiled_sampler = self.sampler
        self._samplers = {}
        self._generate_functions = {}
        self._decode_functions = {}
        self._generate_with_xla = jit_compile is not False

    def get_compile_config(self):
        config = super().get_compile_config()
        if config and self._compiled_sampler is not None:
            config = {
                **config,
                "sampler": keras.saving.serialize_keras_object(
                    self._compiled_sampler
                ),
            }
        return config

    def _compile_arguments(self, config):
        # `PortableCompileConfig.compile_from_config`: the saved sampler,
        # rebuilt apart from the rest so that one that cannot be rebuilt
        # leaves the model greedy (with a warning) instead of unloadable.
        config = dict(config)
        sampler = config.pop("sampler", None)
        arguments = super()._compile_arguments(config)
        if sampler is not None:
            arguments["sampler"] = saved_sampler(sampler)
        return arguments

    def decode_function(self, function):
        """The one-token decoding step `function` (a bound method of this
        task or its backbone) as the generation loop should call it.

        Under PyTorch, whose generation runs eagerly, a task compiled with
        `jit_compile=True` gets the step compiled with `torch.compile`
        (`zoo.accelerator.compile_function`: one graph per shape, compiled
        on the first call and kept until the next `compile`, without
        TorchDynamo's guards on the layers), which takes Keras' per-layer
        Python cost off every token. Otherwise, and
        always under JAX and TensorFlow (whose whole generation loop is
        compiled), `function` itself.

        Example (a task's `generate_step` calls
        `self.decode_function(self.call_with_cache)`):

        >>> from zoo.data.tokenizers import CharacterTokenizer
        >>> from zoo.models.gpt import GPTCausalLM, GPTPreprocessor
        >>> tokenizer = CharacterTokenizer.from_text("to be or not to be")
        >>> gpt = GPTCausalLM.from_preset(
        ...     "smoke", preprocessor=GPTPreprocessor(tokenizer, 16))
        >>> gpt.compile(jit_compile=True)
        >>> step = gpt.decode_function(gpt.call_with_cache)
        >>> compiled = keras.config.backend() == "torch"
        >>> (step != gpt.call_with_cache) == compiled  # a torch.compile'd step
        True
        """
        if keras.config.backend() != "torch" or self.jit_compile is not True:
            return function
        name = function.__name__
        if name not in self._decode_functions:
            self._decode_functions[name] = _eager_if_compiling_fails(
                compile_function(function),
                function,
                name,
                self._decode_functions,
            )
        return self._decode_functions[name]

    def _tensorflow_xla(self):
        """Whether a TensorFlow generate function built now would be
        compiled with XLA (keras-hub builds it with `self.jit_compile`,
        unless the task runs eagerly)."""
        return (
            keras.config.backend() == "tensorflow"
            and not self.run_eagerly
            and self.jit_compile is True
        )

    def make_generate_function(self):
        if self.generate_function is not None:
            return self.generate_function
        if (
            keras.config.backend() == "tensorflow"
            and not self.run_eagerly
            and self._generate_with_xla
            and not self.jit_compile
        ):
            # Keras' "auto" leaves XLA off for TensorFlow on CPU, a choice
            # made for training; the generation loop runs faster on CPU
            # with it (docs/log/gpt.md). jit_compile=False in compile()
            # opts out. The jit_compile setter keeps False for a model with
            # a layer XLA cannot compile.
            self.jit_compile = True
            try:
                self._built_with_xla = self._tensorflow_xla()
                return super().make_generate_function()
            finally:
                self.jit_compile = False
        self._built_with_xla = self._tensorflow_xla()
        return super().make_generate_function()

    def resolve_stop_token_ids(self, stop_token_ids):
        """ "auto" -> the tokenizer's end token (None when there is none);
        None; or ids (one, or several), each checked to be a token id of
        the vocabulary (one that is not could never stop anything): one
        ValueError line naming it otherwise."""
        if isinstance(stop_token_ids, str) and stop_token_ids == "auto":
            tokenizer = getattr(self.preprocessor, "tokenizer", None)
            end = getattr(tokenizer, "end_token_id", None)
            return None if end is None else (int(end),)
        if stop_token_ids is None:
            return None
        if np.ndim(stop_token_ids) == 0:
            stop_token_ids = [stop_token_ids]
        size = getattr(getattr(self, "backbone", None), "vocabulary_size", None)
        return tuple(
            check_integer(
                "stop_token_ids",
                i,
                0,
                None if size is None else int(size) - 1,
                meaning="ids of the vocabulary",
            )
            for i in np.asarray(stop_token_ids, dtype=object).reshape(-1)
        )

    def select_sampler(
        self, sampler=None, temperature=1.0, seed=None, **options
    ):
        """Makes the sampler of this setting the one `run_generate_step`
        runs (one per setting, kept between calls) and rewinds its random
        state when `seed` is given.

        Args:
            sampler, temperature, seed, **options: see `get_sampler`;
                `sampler=None` with no options and temperature 1 is the
                sampler given to `compile`.
        """
        if sampler is None and options:
            need = (
                "needs the sampler it belongs"
                if len(options) == 1
                else "need the sampler they belong"
            )
            raise ValueError(
                f"{', '.join(sorted(options))} {need} to: name it, e.g. "
                "generate(..., sampler='beam', num_beams=4) or "
                "sampler='top_k', k=10."
            )
        # Checked before anything else reads them (`get_sampler` checks
        # the rest), whether or not this setting was seen before.
        temperature = check_sampler_option("temperature", temperature)
        if sampler is not None:
            check_sampler_options(sampler, temperature, **options)
        setting = (sampler, temperature, tuple(sorted(options.items())))
        if setting not in self._samplers:
            if sampler is None and not options and temperature == 1.0:
                chosen = self._compiled_sampler
            else:
                chosen = one_sequence_a_row(
                    get_sampler(
                        sampler or "greedy", temperature, seed, **options
                    )
                )
            self._samplers[setting] = chosen
        chosen = self._samplers[setting]
        if seed is not None:
            reset_seed(chosen, seed)
        self._setting = setting
        return chosen

    def run_generate_step(self, inputs, stop_token_ids, mode=None):
        """Runs the compiled `generate_step` of the current setting and
        `mode` on `inputs` (a dict of NumPy arrays); returns NumPy arrays."""
        # Compiled functions hold the variables they were traced with: once
        # the model's variables change (e.g. the backbone was quantised
        # after a first generate call), compile afresh.
        variables = tuple(id(variable) for variable in self.variables)
        if variables != getattr(self, "_generated_with", variables):
            self._generate_functions = {}
            self._decode_functions = {}
        self._generated_with = variables
        key = (self._setting, mode)
        # keras-hub's make_generate_function compiles `generate_step` with
        # whatever `self.sampler` and mode are current; each key keeps its
        # own compiled function.
        self.generate_function = self._generate_functions.get(key)
        self.generation_mode = mode
        self.sampler = self._samplers[self._setting]
        try:
            if self.generate_function is None:
                function = self.make_generate_function()
                self._generate_functions[key] = function
                self._xla_functions[key] = self._built_with_xla
            function = self.generate_function
            # Layers traced for XLA are told so (zoo.accelerator); under
            # PyTorch each weight is cast once per call (reused_casts) and
            # the loop's caches, which nothing else holds, are written in
            # place (in_place_updates).
            xla = (
                xla_calls()
                if self._xla_functions.get(key)
                else contextlib.nullcontext()
            )
            with reused_casts(), in_place_updates(), xla:
                outputs = function(inputs, stop_token_ids=stop_token_ids)
        finally:
            self.sampler = self._compiled_sampler
        return keras.tree.map_structure(ops.convert_to_numpy, outputs)
