"""GPT: a decoder-only Transformer language model with cached generation.

Reads top to bottom like nanoGPT's `model.py`:

    token ids -> token embedding + learned positions -> dropout
              -> N pre-LN causal `TransformerDecoder` blocks (no cross-attention)
              -> final LayerNorm -> logits (tied to the token embedding, or not)

`GPTBackbone` is the network (ids -> hidden states); `GPT` is the keras-hub
`CausalLM` task around it: `fit` on next-token targets, and
`generate(prompts, ...)` from raw strings with a key/value cache, compiled
once per shape on JAX and TensorFlow. The tokenizer lives in `GPTPreprocessor`
and is saved in the `.keras` file with the weights.
"""

import keras
import keras_hub
import numpy as np
from keras import ops

from zoo.layers import LearnedPositionEmbedding
from zoo.layers import TokenEmbedding
from zoo.layers import TransformerDecoder
from zoo.layers.positions import check_token_ids
from zoo.models.portable import PortableCompileConfig

SAMPLERS = ("greedy", "top_k", "top_p", "beam", "random")


def _gpt_initializer():
    # GPT-2's N(0, 0.02) for every weight matrix.
    return keras.initializers.RandomNormal(stddev=0.02)


@keras.saving.register_keras_serializable(package="zoo")
class GPTBackbone(keras_hub.models.Backbone):
    """Decoder-only Transformer: token ids -> hidden states.

    Args:
        vocabulary_size: number of token ids.
        num_layers: number of `TransformerDecoder` blocks.
        num_heads: attention heads per block.
        hidden_dim: model width (embedding size); divisible by `num_heads`.
        intermediate_dim: MLP width; default `4 * hidden_dim`.
        sequence_length: context length (number of learned positions).
        dropout: dropout on the embeddings, attention and residual branches.
        tie_weights: share the token embedding with the output projection.
        layer_norm_epsilon: LayerNorm epsilon.
        dtype: dtype policy, e.g. "mixed_bfloat16".

    Inputs:
        `{"token_ids": (batch, seq) int, "padding_mask": (batch, seq)}`.

    Returns:
        `(batch, seq, hidden_dim)` hidden states after the final LayerNorm.

    Example:

    >>> backbone = GPTBackbone(vocabulary_size=65, num_layers=2, num_heads=2,
    ...                        hidden_dim=32, sequence_length=64)
    >>> ids = np.ones((1, 10), "int32")
    >>> backbone({"token_ids": ids, "padding_mask": ids}).shape
    (1, 10, 32)
    """

    def __init__(
        self,
        vocabulary_size,
        num_layers=4,
        num_heads=4,
        hidden_dim=128,
        intermediate_dim=None,
        sequence_length=256,
        dropout=0.0,
        tie_weights=True,
        layer_norm_epsilon=1e-5,
        dtype=None,
        **kwargs,
    ):
        if hidden_dim % num_heads:
            raise ValueError(
                f"hidden_dim={hidden_dim} must be divisible by "
                f"num_heads={num_heads}."
            )
        intermediate_dim = intermediate_dim or 4 * hidden_dim

        # === Layers ===
        self.token_embedding = TokenEmbedding(
            vocabulary_size,
            hidden_dim,
            tie_weights=tie_weights,
            embeddings_initializer=_gpt_initializer(),
            dtype=dtype,
            name="token_embedding",
        )
        self.position_embedding = LearnedPositionEmbedding(
            sequence_length,
            initializer=_gpt_initializer(),
            dtype=dtype,
            name="position_embedding",
        )
        self.embeddings_add = keras.layers.Add(
            dtype=dtype, name="embeddings_add"
        )
        self.embeddings_dropout = keras.layers.Dropout(
            dropout, dtype=dtype, name="embeddings_dropout"
        )
        self.transformer_layers = [
            TransformerDecoder(
                num_heads=num_heads,
                intermediate_dim=intermediate_dim,
                dropout=dropout,
                activation="gelu",
                norm_first=True,
                layer_norm_epsilon=layer_norm_epsilon,
                kernel_initializer=_gpt_initializer(),
                dtype=dtype,
                name=f"transformer_layer_{i}",
            )
            for i in range(num_layers)
        ]
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, dtype=dtype, name="layer_norm"
        )

        # === Functional model ===
        token_ids = keras.Input((None,), dtype="int32", name="token_ids")
        padding_mask = keras.Input((None,), dtype="int32", name="padding_mask")
        tokens = self.token_embedding(token_ids)
        x = self.embeddings_add((tokens, self.position_embedding(tokens)))
        x = self.embeddings_dropout(x)
        for block in self.transformer_layers:
            x = block(x, decoder_padding_mask=padding_mask)
        sequence_output = self.layer_norm(x)
        super().__init__(
            inputs={"token_ids": token_ids, "padding_mask": padding_mask},
            outputs=sequence_output,
            dtype=dtype,
            **kwargs,
        )

        # === Config ===
        self.vocabulary_size = vocabulary_size
        self.num_layers = num_layers
        self.num_heads = num_heads
        self.hidden_dim = hidden_dim
        self.intermediate_dim = intermediate_dim
        self.sequence_length = sequence_length
        self.dropout = dropout
        self.tie_weights = tie_weights
        self.layer_norm_epsilon = layer_norm_epsilon

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "vocabulary_size": self.vocabulary_size,
                "num_layers": self.num_layers,
                "num_heads": self.num_heads,
                "hidden_dim": self.hidden_dim,
                "intermediate_dim": self.intermediate_dim,
                "sequence_length": self.sequence_length,
                "dropout": self.dropout,
                "tie_weights": self.tie_weights,
                "layer_norm_epsilon": self.layer_norm_epsilon,
            }
        )
        return config


@keras.saving.register_keras_serializable(package="zoo")
class GPTPreprocessor(keras_hub.models.CausalLMPreprocessor):
    """Strings -> `{"token_ids", "padding_mask"}` and next-token targets.

    keras-hub's `CausalLMPreprocessor` with a zoo or keras-hub tokenizer.
    Character corpora have no start or end tokens, so none are added by
    default.

    Args:
        tokenizer: a `zoo.data.tokenizers.CharacterTokenizer` or a keras-hub
            tokenizer.
        sequence_length: packed length for training calls.
        add_start_token, add_end_token: pack the tokenizer's start / end
            tokens around each string (when it has them).

    Call arguments:
        x: a string or a batch of strings.
        sequence_length: optional override of the packed length.

    Returns:
        `(x, y, sample_weight)`: `x = {"token_ids", "padding_mask"}`, each
        `(batch, sequence_length)`; `y` the next token at each position,
        `(batch, sequence_length)`; `sample_weight` 1 where `y` is a real
        token, `(batch, sequence_length)`.

    Example:

    >>> tokenizer = CharacterTokenizer.from_text("to be or not to be")
    >>> preprocessor = GPTPreprocessor(tokenizer, sequence_length=8)
    >>> x, y, weights = preprocessor(["to be"])
    >>> x["token_ids"].shape, y.shape
    ((1, 8), (1, 8))
    """

    def __init__(
        self,
        tokenizer,
        sequence_length=256,
        add_start_token=False,
        add_end_token=False,
        **kwargs,
    ):
        super().__init__(
            tokenizer,
            sequence_length=sequence_length,
            add_start_token=add_start_token,
            add_end_token=add_end_token,
            **kwargs,
        )

    def build(self, input_shape):
        # keras-hub's build reads start/end/pad ids that only its model
        # tokenizers define; a bare WordPieceTokenizer has none of them.
        tokenizer = self.tokenizer
        pad = getattr(tokenizer, "pad_token_id", None)
        self.packer = keras_hub.layers.StartEndPacker(
            start_value=getattr(tokenizer, "start_token_id", None),
            end_value=getattr(tokenizer, "end_token_id", None),
            pad_value=0 if pad is None else pad,
            sequence_length=self.sequence_length,
            return_padding_mask=True,
        )
        self.built = True


def get_sampler(name, temperature=1.0, seed=None, **options):
    """A `keras_hub.samplers.Sampler` from a short name.

    Args:
        name: "greedy", "top_k" (option `k`, default 10), "top_p" (options
            `p`, default 0.9, and `k`), "beam" (option `num_beams`, default
            5) or "random" (sample the whole distribution).
        temperature: logits are divided by it before the softmax.
        seed: seed of the random samplers.
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


def _reset_seed(sampler, seed):
    # keras-hub samplers advance a SeedGenerator; rewinding it to `seed`
    # makes a seeded call reproducible without recompiling anything.
    for generator in getattr(sampler, "_seed_generators", []):
        state = generator.state
        state.assign(ops.convert_to_tensor([seed, 0], dtype=state.dtype))


@keras.saving.register_keras_serializable(package="zoo")
class GPT(PortableCompileConfig, keras_hub.models.CausalLM):
    """GPT language model: next-token logits, and text generation.

    Args:
        backbone: a `GPTBackbone`.
        preprocessor: a `GPTPreprocessor` (tokenizer inside), or None to
            work on token ids only.

    Call arguments:
        `{"token_ids": (batch, seq), "padding_mask": (batch, seq)}`.

    Returns:
        float32 logits `(batch, seq, vocabulary_size)`; position t predicts
        token t + 1.

    Example:

    >>> tokenizer = CharacterTokenizer.from_text(text)
    >>> backbone = GPTBackbone(tokenizer.vocabulary_size(), num_layers=2,
    ...                        num_heads=2, hidden_dim=64, sequence_length=128)
    >>> gpt = GPT(backbone, GPTPreprocessor(tokenizer, 128))
    >>> gpt.generate(["ROMEO:"], max_length=64, sampler="top_k", seed=1)
    """

    backbone_cls = GPTBackbone
    preprocessor_cls = GPTPreprocessor

    def __init__(self, backbone, preprocessor=None, **kwargs):
        # === Layers ===
        self.backbone = backbone
        self.preprocessor = preprocessor
        self._generate_functions = {}  # (sampler setting) -> compiled fn
        self._use_cache = True
        self.logits_dtype = keras.layers.Activation(
            "linear", dtype="float32", name="logits"
        )

        # === Functional model ===
        inputs = backbone.input
        hidden_states = backbone(inputs)
        logits = backbone.token_embedding(hidden_states, reverse=True)
        super().__init__(
            inputs=inputs, outputs=self.logits_dtype(logits), **kwargs
        )

    # --- Training -------------------------------------------------------

    def compile(
        self,
        optimizer="auto",
        loss="auto",
        *,
        weighted_metrics="auto",
        sampler="greedy",
        **kwargs,
    ):
        if optimizer == "auto":
            optimizer = keras.optimizers.AdamW(1e-3, weight_decay=0.1)
        super().compile(
            optimizer=optimizer,
            loss=loss,
            weighted_metrics=weighted_metrics,
            sampler=sampler,
            **kwargs,
        )
        # generate() swaps self.sampler per call; this is its default.
        self._compiled_sampler = self.sampler
        self._generate_functions = {}
        self._generate_with_xla = kwargs.get("jit_compile", "auto") is not False

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

    # --- Cached decoding --------------------------------------------------

    def call_with_cache(self, token_ids, cache, cache_update_index):
        """One forward pass over `token_ids` starting at `cache_update_index`.

        Args:
            token_ids: `(batch, n)` ids of the new positions.
            cache: keys and values of every block, either a tuple with one
                `(batch, 2, max_length, heads, head_dim)` tensor per block
                (what `generate` carries: no per-step re-stacking) or one
                stacked `(batch, num_layers, 2, max_length, heads, head_dim)`
                tensor (keras-hub's layout).
            cache_update_index: position of `token_ids[:, 0]`.

        Returns:
            `(logits (batch, n, vocab), hidden_states (batch, n, dim), cache)`
            with the cache in the form it was given.
        """
        backbone = self.backbone
        stacked = not isinstance(cache, (tuple, list))
        layer_caches = (
            [cache[:, i, ...] for i in range(backbone.num_layers)]
            if stacked else list(cache)
        )
        tokens = backbone.token_embedding(token_ids, check_ids=False)
        positions = backbone.position_embedding(
            tokens, start_index=cache_update_index
        )
        x = tokens + positions  # generation never trains: no dropout
        for i, block in enumerate(backbone.transformer_layers):
            x, layer_caches[i] = block(
                x,
                self_attention_cache=layer_caches[i],
                self_attention_cache_update_index=cache_update_index,
            )
        cache = ops.stack(layer_caches, axis=1) if stacked else tuple(layer_caches)
        hidden_states = backbone.layer_norm(x)
        logits = backbone.token_embedding(hidden_states, reverse=True)
        return ops.cast(logits, "float32"), hidden_states, cache

    def _build_cache(self, token_ids):
        """Empty per-block caches for `token_ids`, filled by one pass over
        the prompt."""
        backbone = self.backbone
        batch_size, max_length = ops.shape(token_ids)[0], ops.shape(token_ids)[1]
        head_dim = backbone.hidden_dim // backbone.num_heads
        shape = [batch_size, 2, max_length, backbone.num_heads, head_dim]
        cache = tuple(
            ops.zeros(shape, dtype=self.compute_dtype)
            for _ in range(backbone.num_layers)
        )
        _, hidden_states, cache = self.call_with_cache(token_ids, cache, 0)
        return hidden_states, cache

    def generate_step(self, inputs, stop_token_ids=None):
        """Compilable generation of one batch: fills the unmasked positions.

        With the cache each step runs the model on one new position; with
        `use_cache=False` (a reference for tests and benchmarks) each step
        recomputes the whole window.
        """
        token_ids, padding_mask = inputs["token_ids"], inputs["padding_mask"]
        row_lengths = ops.sum(ops.cast(padding_mask, "int32"), axis=-1)
        index = ops.min(row_lengths)

        if self._use_cache:
            hidden_states, cache = self._build_cache(token_ids)

            def next(prompt, cache, index):
                batch_size = ops.shape(prompt)[0]
                prompt = ops.slice(prompt, [0, index - 1], [batch_size, 1])
                logits, hidden, cache = self.call_with_cache(
                    prompt, cache, index - 1
                )
                return (
                    ops.squeeze(logits, axis=1),
                    ops.squeeze(hidden, axis=1),
                    cache,
                )

        else:
            hidden_states = None
            # Samplers carry a cache through their loop; a dummy keeps the
            # shapes (and beam search's per-beam copies) consistent.
            cache = ops.zeros((ops.shape(token_ids)[0], 1), "float32")

            def next(prompt, cache, index):
                mask = ops.ones_like(prompt)
                hidden = self.backbone(
                    {"token_ids": prompt, "padding_mask": mask}
                )
                hidden = ops.take(hidden, index - 1, axis=1)
                logits = self.backbone.token_embedding(hidden, reverse=True)
                return ops.cast(logits, "float32"), hidden, cache

        token_ids = self.sampler(
            next=next,
            prompt=token_ids,
            cache=cache,
            index=index,
            mask=padding_mask,
            stop_token_ids=stop_token_ids,
            hidden_states=hidden_states,
            model=self,
        )
        if stop_token_ids is not None:
            # Everything after the first generated stop token is padding.
            generated = ops.logical_not(ops.cast(padding_mask, "bool"))
            is_stop = ops.zeros_like(token_ids, dtype="bool")
            for stop_id in stop_token_ids:
                is_stop = ops.logical_or(is_stop, ops.equal(token_ids, stop_id))
            ends = ops.cast(ops.logical_and(is_stop, generated), "int32")
            after_end = ops.cumsum(ends, axis=-1) - ends
            padding_mask = ops.equal(after_end, 0)
        else:
            padding_mask = ops.ones_like(token_ids, dtype="bool")
        return {"token_ids": token_ids, "padding_mask": padding_mask}

    # --- Generation from strings ------------------------------------------

    def generate(
        self,
        inputs,
        max_length=None,
        sampler=None,
        temperature=1.0,
        seed=None,
        stop_token_ids="auto",
        strip_prompt=False,
        use_cache=True,
        **sampler_options,
    ):
        """Continues each prompt up to `max_length` tokens in all.

        Args:
            inputs: a string or a list of strings (token-id dicts when the
                model has no preprocessor).
            max_length: total length, prompt included; default and maximum:
                the context length `backbone.sequence_length`.
            sampler: "greedy", "top_k", "top_p", "beam" or "random" (see
                `get_sampler`; options such as `k=`, `p=`, `num_beams=` go
                in `sampler_options`); default: the one given to `compile`
                (greedy).
            temperature: divides the logits before sampling.
            seed: makes a random sampler's output reproducible.
            stop_token_ids: "auto" stops at the tokenizer's end token when
                it has one; None never stops early; or a tuple of ids.
            strip_prompt: return only the generated continuation.
            use_cache: False recomputes the whole window at every step (a
                slow reference; same result).

        Returns:
            A string, or a list of strings (token-id dicts without a
            preprocessor).

        Raises:
            ValueError: `max_length` larger than the context, an empty
                prompt, a prompt with no room left to generate, or (token-id
                prompts) an id outside the vocabulary.
        """
        context = self.backbone.sequence_length
        if max_length is None:
            max_length = context
        if not 1 < max_length <= context:
            raise ValueError(
                f"max_length={max_length} must be in [2, {context}]: the "
                f"model has {context} learned positions (its context)."
            )
        if self.preprocessor is None:
            # Token-id prompts: the compiled loop cannot raise, and an id
            # outside the vocabulary would embed as NaN there.
            if isinstance(inputs, dict) and "token_ids" in inputs:
                check_token_ids(
                    inputs["token_ids"], self.backbone.vocabulary_size,
                    self.name,
                )
        else:
            self._check_prompts(inputs, max_length)
            # Tokenizers without an end token (WordPiece) have no attribute.
            end = getattr(self.preprocessor.tokenizer, "end_token_id", None)
            if end is None and stop_token_ids == "auto":
                stop_token_ids = None

        # One compiled function per sampler setting: repeated calls reuse it
        # (JAX and TensorFlow only retrace for new shapes).
        key = (sampler, float(temperature), bool(use_cache),
               tuple(sorted(sampler_options.items())))
        if key not in self._generate_functions:
            if sampler is None and not sampler_options and temperature == 1.0:
                chosen = self._compiled_sampler
            else:
                chosen = get_sampler(
                    sampler or "greedy", temperature, seed, **sampler_options
                )
            self._generate_functions[key] = (chosen, None)
        chosen, function = self._generate_functions[key]
        if seed is not None:
            _reset_seed(chosen, seed)
        self.sampler = chosen
        self.generate_function = function
        self._use_cache = use_cache
        try:
            return super().generate(
                inputs,
                max_length=max_length,
                stop_token_ids=stop_token_ids,
                strip_prompt=strip_prompt,
            )
        finally:
            self._generate_functions[key] = (chosen, self.generate_function)

    def _check_prompts(self, inputs, max_length):
        if isinstance(inputs, str):
            prompts = [inputs]
        elif isinstance(inputs, (list, tuple)):
            prompts = list(inputs)
        else:
            return  # tensors or datasets: the preprocessor checks shapes
        if not prompts:
            raise ValueError("generate() needs at least one prompt.")
        tokenizer = self.preprocessor.tokenizer
        for prompt in prompts:
            length = len(np.asarray(tokenizer.tokenize(prompt)).reshape(-1))
            if length == 0:
                raise ValueError(
                    "A prompt is empty; give at least one token to continue."
                )
            if length >= max_length:
                raise ValueError(
                    f"A prompt has {length} tokens, which leaves no room "
                    f"below max_length={max_length} (context "
                    f"{self.backbone.sequence_length}). Shorten the prompt "
                    "(keep its end) or raise max_length."
                )
