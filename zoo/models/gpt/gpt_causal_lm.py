"""GPT causal language model: next-token logits, training on raw strings,
and generation with a key/value cache and a sliding context window.

`GPTCausalLM` (also importable as `GPT`) is a keras-hub `CausalLM`: `fit`,
`evaluate` and `predict` run its `GPTPreprocessor` (the tokenizer
included) inside `tf.data`, so they take raw strings under every backend,
and the `.keras` file carries the tokenizer.
Generation (`zoo.models.generation`) starts from raw strings too:

* up to the context length (`backbone.sequence_length`), each new token
  costs one position: keys and values of earlier positions are kept in a
  cache, filled by one pass over the prompt;
* past the context, each new token is predicted from the last
  `sequence_length` tokens, as nanoGPT does. Positions are absolute, so
  every slide of the window changes every cached key: the window is
  recomputed in full for each token (what rebuilding the cache costs).
"""

import keras
import keras_hub
import numpy as np
from keras import ops

from zoo.data.text import texts_of
from zoo.export import ServingExportMixin
from zoo.layers.checks import check_token_ids
from zoo.layers.sublayers import call_sublayer, concrete_index
from zoo.models.arguments import (
    check_model_kwargs,
    check_preprocessor_fits,
    check_vocabulary_fits,
)
from zoo.models.generation import (
    GenerationMixin,
    check_max_length,
    finish_rows,
    pad_rows,
    resolve_sampler,
)
from zoo.models.gpt.gpt_backbone import GPTBackbone
from zoo.models.gpt.gpt_preprocessor import GPTPreprocessor
from zoo.models.gpt.gpt_presets import PRESETS
from zoo.models.jax_state import KeepsWeightsOnError
from zoo.models.portable import PortableCompileConfig
from zoo.models.presets import TaskFromPreset
from zoo.models.raw_text import RawTextMixin, warn_unknown_pieces
from zoo.saving import register_alias


@keras.saving.register_keras_serializable(package="zoo")
class GPTCausalLM(
    TaskFromPreset,
    ServingExportMixin,
    KeepsWeightsOnError,
    RawTextMixin,
    GenerationMixin,
    PortableCompileConfig,
    keras_hub.models.CausalLM,
):
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

    >>> from zoo.data.tokenizers import CharacterTokenizer
    >>> text = "to be or not to be, that is the question"
    >>> tokenizer = CharacterTokenizer.from_text(text)
    >>> gpt = GPTCausalLM.from_preset(
    ...     "smoke", preprocessor=GPTPreprocessor(tokenizer, 16))
    >>> history = gpt.fit([text], epochs=1, verbose=0)
    >>> texts = gpt.generate(["to be"], max_length=24, sampler="top_k", seed=1)
    >>> len(texts), texts[0].startswith("to be")  # the sampled rest: random
    (1, True)
    """

    # `zoo.export`: a `generate` signature besides `serving_default`.
    exports_generate = "causal_lm"

    backbone_cls = GPTBackbone
    preprocessor_cls = GPTPreprocessor
    # `from_preset(preset, preprocessor=..., **overrides)`: a fresh GPT of
    # the preset's size for the preprocessor's tokenizer; `backbone_`
    # overrides go to `GPTBackbone.from_preset`.
    _presets = PRESETS

    def __init__(self, backbone, preprocessor=None, **kwargs):
        # === Layers ===
        self.backbone = backbone
        self.preprocessor = preprocessor
        check_preprocessor_fits(
            self, backbone.sequence_length, "sequence_length"
        )
        check_vocabulary_fits(self, backbone.vocabulary_size)
        self._init_generation()
        self.logits_dtype = keras.layers.Activation(
            "linear", dtype="float32", name="logits"
        )

        # === Functional model ===
        inputs = backbone.input
        hidden_states = backbone(inputs)["sequence_output"]
        logits = backbone.embeddings(hidden_states, reverse=True)
        check_model_kwargs(self, kwargs)
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
        """keras-hub's `CausalLM.compile` with AdamW (1e-3, weight decay 0.1)
        as the default optimizer and greedy decoding as the default
        sampler."""
        if optimizer == "auto":
            optimizer = keras.optimizers.AdamW(1e-3, weight_decay=0.1)
        super().compile(
            optimizer=optimizer,
            loss=loss,
            weighted_metrics=weighted_metrics,
            sampler=resolve_sampler(sampler),
            **kwargs,
        )
        self._compiled_sampler_changed(kwargs.get("jit_compile", "auto"))

    # --- One forward pass with the cache ------------------------------------

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
        cache_update_index = concrete_index(cache_update_index)
        stacked = not isinstance(cache, (tuple, list))
        layer_caches = (
            [cache[:, i, ...] for i in range(backbone.num_layers)]
            if stacked
            else list(cache)
        )
        # Generation never trains: no dropout; it made the ids itself.
        # Under PyTorch `call_sublayer` skips Keras' per-call work where it
        # changes nothing (most of a small model's time per token).
        x = call_sublayer(
            None,
            backbone.embeddings,
            token_ids,
            start_index=cache_update_index,
            check_ids=False,
        )
        for i, block in enumerate(backbone.transformer_layers):
            x, layer_caches[i] = call_sublayer(
                None,
                block,
                x,
                self_attention_cache=layer_caches[i],
                self_attention_cache_update_index=cache_update_index,
            )
        cache = (
            ops.stack(layer_caches, axis=1) if stacked else tuple(layer_caches)
        )
        hidden_states = call_sublayer(None, backbone.layer_norm, x)
        logits = call_sublayer(
            None, backbone.embeddings, hidden_states, reverse=True
        )
        return ops.cast(logits, "float32"), hidden_states, cache

    def _build_cache(self, token_ids):
        """Empty per-block caches for `token_ids`, filled by one pass over
        the prompt."""
        backbone = self.backbone
        batch_size, max_length = (
            ops.shape(token_ids)[0],
            ops.shape(token_ids)[1],
        )
        head_dim = backbone.hidden_dim // backbone.num_heads
        shape = [batch_size, 2, max_length, backbone.num_heads, head_dim]
        cache = tuple(
            ops.zeros(shape, dtype=self.compute_dtype)
            for _ in range(backbone.num_layers)
        )
        _, hidden_states, cache = self.call_with_cache(token_ids, cache, 0)
        return hidden_states, cache

    # --- Compiled generation ------------------------------------------------

    def generate_step(self, inputs, stop_token_ids=None):
        """Compilable generation of one batch: fills the unmasked positions
        of `inputs["token_ids"]`.

        `self.generation_mode` "cache" (buffer no longer than the context):
        each step runs the model on one new position. "window": each step
        runs it on the `sequence_length` tokens before the new one (the
        whole buffer when that is shorter), for buffers past the context and
        as the cache-free reference (`generate(use_cache=False)`).
        """
        # Tensors from here on (PyTorch's eager generation is handed NumPy
        # arrays), so a compiled `call_with_cache` converts nothing.
        token_ids = ops.convert_to_tensor(inputs["token_ids"])
        padding_mask = inputs["padding_mask"]
        row_lengths = ops.sum(ops.cast(padding_mask, "int32"), axis=-1)
        index = ops.min(row_lengths)

        if self.generation_mode == "cache":
            hidden_states, cache = self._build_cache(token_ids)
            # The prompt pass above runs once; each token runs this step.
            step = self.decode_function(self.call_with_cache)

            def next(prompt, cache, index):
                batch_size = ops.shape(prompt)[0]
                prompt = ops.slice(prompt, [0, index - 1], [batch_size, 1])
                logits, hidden, cache = step(prompt, cache, index - 1)
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
            width = min(token_ids.shape[1], self.backbone.sequence_length)

            def next(prompt, cache, index):
                batch_size = ops.shape(prompt)[0]
                start = ops.maximum(index - width, 0)
                window = ops.slice(prompt, [0, start], [batch_size, width])
                hidden = self.backbone(
                    {"token_ids": window, "padding_mask": ops.ones_like(window)}
                )["sequence_output"]
                hidden = ops.take(hidden, index - 1 - start, axis=1)
                logits = self.backbone.embeddings(hidden, reverse=True)
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
        return {"token_ids": token_ids}

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

        Up to the context length the key/value cache makes each token cost
        one position; past it, each token is predicted from the last
        `sequence_length` tokens (a sliding window, recomputed per token),
        so `max_length` may be any length.

        Args:
            inputs: a string or a list of strings; or, ids in and ids out,
                `{"token_ids": (batch, n), "padding_mask": (batch, n)}` with
                each prompt left-aligned where the mask is True.
            max_length: total length, prompt included: an integer from 2
                to `zoo.models.generation.MAX_GENERATION_LENGTH`
                (1,000,000); default: the context length (for id inputs,
                their width `n`).
            sampler: "greedy", "top_k", "top_p", "beam" or "random" (see
                `zoo.models.generation.get_sampler`; options such as `k=`,
                `p=`, `num_beams=` go in `sampler_options`); default: the one
                given to `compile` (greedy unless compiled with another),
                which a saved model keeps. Past the context, beam search
                keeps its beams through the window.
            temperature: divides the logits before sampling.
            seed: makes a random sampler's output reproducible (on one
                backend: each backend draws its own random numbers).
            stop_token_ids: "auto" stops at the tokenizer's end token when
                it has one; None never stops early; or a tuple of ids.
            strip_prompt: return only the generated continuation.
            use_cache: False recomputes the window at every step (a slow
                reference; the same result).

        Returns:
            A string, or a list of strings; for id inputs a dict of
            `(batch, max_length)` `token_ids` and `padding_mask` (True at
            the prompt and the generated tokens, up to and including a stop
            token).

        Raises:
            ValueError: no prompt, an empty prompt, a prompt with no room
                left below `max_length`, an id outside the vocabulary, or
                `max_length` or a sampler argument out of range (`k` < 1,
                `p` outside (0, 1], `temperature` <= 0, `num_beams` < 1,
                NaN or a fraction where an integer belongs: see
                `zoo.models.generation.get_sampler`), or
                `return_all_beams=True` (one text a prompt is returned),
                before any work.
        """
        context = self.backbone.sequence_length
        if max_length is not None:  # before reading the prompts
            max_length = check_max_length(max_length)
        # The sampler's arguments too, before any work.
        self.select_sampler(sampler, temperature, seed, **sampler_options)
        prompts, scalar, as_ids, width = self._prompt_ids(inputs)
        if max_length is None:
            max_length = check_max_length(width or context)
        lengths = [len(p) for p in prompts]
        for length in lengths:
            if length == 0:
                raise ValueError(
                    "A prompt is empty; give at least one token to continue."
                )
            if length >= max_length:
                raise ValueError(
                    f"A prompt has {length} tokens, which leaves no room "
                    f"below max_length={max_length}. Shorten the prompt or "
                    "raise max_length."
                )
        stops = self.resolve_stop_token_ids(stop_token_ids)

        rows, done, filled = prompts, [False] * len(prompts), 0
        unfinished = rows
        if use_cache and max(lengths) < context:
            # Up to the context: the cached loop.
            filled = min(max_length, context)
            token_ids, mask = pad_rows(rows, filled)
            outputs = self.run_generate_step(
                {"token_ids": token_ids, "padding_mask": mask}, stops, "cache"
            )
            unfinished = list(outputs["token_ids"])  # stopped rows go on too
            rows, done = finish_rows(unfinished, lengths, stops, filled)
        if filled < max_length and not all(done):
            # Past the context (or without the cache): the sliding window.
            # Rows that stopped ride along whole, so every row starts at the
            # same index; their continuation is dropped.
            rows = [u if d else r for r, u, d in zip(rows, unfinished, done)]
            token_ids, mask = pad_rows(rows, max_length)
            outputs = self.run_generate_step(
                {"token_ids": token_ids, "padding_mask": mask}, stops, "window"
            )
            more, _ = finish_rows(
                outputs["token_ids"], [len(r) for r in rows], stops, max_length
            )
            earlier, _ = finish_rows(rows, lengths, stops, max_length)
            rows = [e if d else m for e, m, d in zip(earlier, more, done)]
        return self._generated_outputs(
            rows, lengths, max_length, strip_prompt, scalar, as_ids
        )

    def _prompt_ids(self, inputs):
        """`(prompts as 1-D id arrays, scalar input?, id input?, id width)`."""
        if isinstance(inputs, dict):
            if "token_ids" not in inputs:
                raise ValueError(
                    "Id prompts are a dict with 'token_ids' and "
                    f"'padding_mask'; got keys {sorted(inputs)}."
                )
            ids = np.asarray(ops.convert_to_numpy(inputs["token_ids"]))
            mask = inputs.get("padding_mask")
            mask = (
                np.ones_like(ids, bool)
                if mask is None
                else np.asarray(ops.convert_to_numpy(mask)).astype(bool)
            )
            if ids.ndim != 2 or mask.shape != ids.shape:
                raise ValueError(
                    "token_ids and padding_mask must both be (batch, n); got "
                    f"shapes {ids.shape} and {mask.shape}."
                )
            check_token_ids(ids[mask], self.backbone.vocabulary_size, self.name)
            if not len(ids):
                raise ValueError("generate() needs at least one prompt.")
            return (
                [row[m] for row, m in zip(ids, mask)],
                False,
                True,
                ids.shape[1],
            )
        if self.preprocessor is None:
            raise ValueError(
                "This GPT has no preprocessor, so it cannot read strings; "
                "pass {'token_ids': ..., 'padding_mask': ...}."
            )
        texts, scalar = texts_of(
            inputs,
            "generate",
            "prompt",
            ", or token ids as {'token_ids': ..., 'padding_mask': ...}",
        )
        tokenizer = self.preprocessor.tokenizer
        start = getattr(tokenizer, "start_token_id", None)
        prompts = []
        unknown = getattr(tokenizer, "unknown_token_id", None)
        for i, text in enumerate(texts):
            ids = np.asarray(tokenizer.tokenize(text), "int32").reshape(-1)
            unknowns = 0 if unknown is None else int(np.sum(ids == unknown))
            if unknowns:
                warn_unknown_pieces(
                    tokenizer,
                    text,
                    f"generate(): prompt {i}",
                    unknowns,
                    after=", and the returned text leaves them out",
                    stacklevel=4,
                )
            if (
                len(ids)
                and self.preprocessor.add_start_token
                and start is not None
            ):
                ids = np.concatenate([[start], ids]).astype("int32")
            prompts.append(ids)
        return prompts, scalar, False, None

    def _generated_outputs(
        self, rows, lengths, max_length, strip_prompt, scalar, as_ids
    ):
        if strip_prompt:
            rows = [r[n:] for r, n in zip(rows, lengths)]
        token_ids, mask = pad_rows(rows, max_length)
        if as_ids:
            return {"token_ids": token_ids, "padding_mask": mask}
        texts = self.preprocessor.generate_postprocess(
            {"token_ids": token_ids, "padding_mask": mask}
        )
        texts = [
            t.decode("utf-8") if isinstance(t, bytes) else str(t)
            for t in np.asarray(texts, dtype=object).reshape(-1)
        ]
        return texts[0] if scalar else texts


# The zoo's earlier name: code that imports it and files saved with it.
GPT = register_alias(GPTCausalLM, "GPT")
