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
  (`finish_rows`).
"""

import keras
import keras_hub
import numpy as np
from keras import ops

SAMPLERS = ("greedy", "top_k", "top_p", "beam", "random")


def get_sampler(name, temperature=1.0, seed=None, **options):
    """A `keras_hub.samplers.Sampler` from a short name.

    Args:
        name: "greedy", "top_k" (option `k`, default 10), "top_p" (options
            `p`, default 0.9, and `k`), "beam" (option `num_beams`, default
            5) or "random" (sample the whole distribution).
        temperature: logits are divided by it before the softmax.
        seed: seed of the random samplers.
        **options: passed to the sampler's constructor.

    Returns:
        A sampler, called as keras-hub's tasks call it.

    Example:

    >>> sampler = get_sampler("top_k", k=5, seed=1)
    """
    # Not `temperature <= 0`: NaN must fail too. A zero temperature would
    # divide the logits by zero and sample garbage (or nothing) silently.
    if not float(temperature) > 0:
        raise ValueError(
            f"temperature must be > 0; got {temperature}. For the most "
            'likely token at every step use sampler="greedy".'
        )
    samplers = keras_hub.samplers
    if name == "greedy":
        return samplers.GreedySampler(temperature=temperature, **options)
    if name == "top_k":
        options.setdefault("k", 10)
        return samplers.TopKSampler(
            seed=seed, temperature=temperature, **options
        )
    if name == "top_p":
        options.setdefault("p", 0.9)
        return samplers.TopPSampler(
            seed=seed, temperature=temperature, **options
        )
    if name == "beam":
        options.setdefault("num_beams", 5)
        return samplers.BeamSampler(temperature=temperature, **options)
    if name == "random":
        return samplers.RandomSampler(
            seed=seed, temperature=temperature, **options
        )
    raise ValueError(f"sampler must be one of {SAMPLERS}; got {name!r}.")


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


class GenerationMixin:
    """One compiled generation function per setting, for keras-hub tasks.

    Mix in before the keras-hub class (`class GPT(GenerationMixin,
    keras_hub.models.CausalLM)`), call `_init_generation()` in `__init__` and
    `_compiled_sampler_changed(jit_compile)` at the end of `compile`. A
    generation call picks its sampler with `select_sampler` (which rewinds a
    seed), then runs `run_generate_step` once per phase; the task's
    `generate_step` reads `self.generation_mode` (e.g. "cache" or
    "window"), fixed per compiled function.
    """

    def _init_generation(self):
        self._samplers = {}  # setting -> sampler
        self._generate_functions = {}  # (setting, mode) -> compiled fn
        self._compiled_sampler = None
        self._setting = None
        self._generate_with_xla = True
        self.generation_mode = None

    def _compiled_sampler_changed(self, jit_compile="auto"):
        # generate() swaps self.sampler per call; this is its default.
        self._compiled_sampler = self.sampler
        self._samplers = {}
        self._generate_functions = {}
        self._generate_with_xla = jit_compile is not False

    def make_generate_function(self):
        if (
            self.generate_function is None
            and keras.config.backend() == "tensorflow"
            and not self.run_eagerly
            and self._generate_with_xla
            and not self.jit_compile
        ):
            # Keras' "auto" leaves XLA off for TensorFlow on CPU, a choice
            # made for training; the generation loop runs about 2.3x faster
            # on CPU with it. jit_compile=False in compile() opts out.
            self.jit_compile = True
            try:
                return super().make_generate_function()
            finally:
                self.jit_compile = False
        return super().make_generate_function()

    def resolve_stop_token_ids(self, stop_token_ids):
        """"auto" -> the tokenizer's end token (None when there is none)."""
        if stop_token_ids != "auto":
            return None if stop_token_ids is None else tuple(
                int(i) for i in stop_token_ids
            )
        tokenizer = getattr(self.preprocessor, "tokenizer", None)
        end = getattr(tokenizer, "end_token_id", None)
        return None if end is None else (int(end),)

    def select_sampler(self, sampler=None, temperature=1.0, seed=None,
                       **options):
        """Makes the sampler of this setting current (one per setting, kept
        between calls) and rewinds its random state when `seed` is given.

        Args:
            sampler, temperature, seed, **options: see `get_sampler`;
                `sampler=None` with no options and temperature 1 is the
                sampler given to `compile`.
        """
        setting = (sampler, float(temperature), tuple(sorted(options.items())))
        if setting not in self._samplers:
            if sampler is None and not options and float(temperature) == 1.0:
                chosen = self._compiled_sampler
            else:
                chosen = get_sampler(
                    sampler or "greedy", temperature, seed, **options
                )
            self._samplers[setting] = chosen
        chosen = self._samplers[setting]
        if seed is not None:
            reset_seed(chosen, seed)
        self.sampler = chosen
        self._setting = setting
        return chosen

    def run_generate_step(self, inputs, stop_token_ids, mode=None):
        """Runs the compiled `generate_step` of the current setting and
        `mode` on `inputs` (a dict of NumPy arrays); returns NumPy arrays."""
        key = (self._setting, mode)
        # keras-hub's make_generate_function compiles `generate_step` with
        # whatever `self.sampler` and mode are current; each key keeps its
        # own compiled function.
        self.generate_function = self._generate_functions.get(key)
        self.generation_mode = mode
        function = self.make_generate_function()
        self._generate_functions[key] = function
        outputs = function(inputs, stop_token_ids=stop_token_ids)
        return keras.tree.map_structure(ops.convert_to_numpy, outputs)
