"""Cached decoding shared by the encoder-decoder families (translation,
image captioning).

* `TransformerDecoding` (backbone side): a Transformer decoder's cache
  over an encoder's output, one new position per step. The cross-attention
  keys and values of the encoder's output are computed once per input (a
  sentence, an image); the self-attention keys and values grow by one
  position per step.
* `EncoderDecoderGeneration` (task side): the sampler's loop over a
  backbone that gives `decoder_cache(encoder_output, mask, max_length)`,
  `decode_step(token_ids, cache, index)` and `token_logits(hidden)`, with
  the one-token step compiled under PyTorch when the task was compiled
  with `jit_compile=True` (`GenerationMixin.decode_function`).
"""

import numpy as np
from keras import ops

from zoo.layers.sublayers import call_sublayer, concrete_index


class TransformerDecoding:
    """Mixin for a backbone whose decoder is a stack of
    `zoo.layers.TransformerDecoder` blocks over an encoder's output.

    The backbone has `decoder_embedding` (a `PositionalEmbedding`),
    `decoder_layers`, `decoder_norm` (None for post-LN blocks),
    `hidden_dim`, `num_heads`, and either `tie_weights` true or an
    `output_projection`.
    """

    def token_logits(self, hidden):
        """Vocabulary logits of decoder states `(..., hidden_dim)`."""
        # Called per generated token: see GPT.call_with_cache.
        if self.tie_weights:
            return call_sublayer(
                None, self.decoder_embedding, hidden, reverse=True
            )
        return call_sublayer(None, self.output_projection, hidden)

    def decoder_cache(self, encoder_output, encoder_padding_mask, max_length):
        """`(self-attention caches, cross-attention caches, encoder mask)`:
        per layer `(batch, 2, length, heads, head_dim)`; the cross-attention
        keys and values of the encoder's output, computed once."""
        batch = ops.shape(encoder_output)[0]
        head_dim = self.hidden_dim // self.num_heads
        shape = (batch, 2, max_length, self.num_heads, head_dim)
        # One tensor per layer: aliases would change after the first step
        # (a compiled step would be traced again for that).
        self_caches = tuple(
            ops.zeros(shape, dtype=self.compute_dtype)
            for _ in self.decoder_layers
        )
        cross_caches = tuple(
            layer.compute_cross_attention_cache(encoder_output)
            for layer in self.decoder_layers
        )
        return self_caches, cross_caches, encoder_padding_mask

    def decode_step(
        self, token_ids, cache, index, return_attention_scores=False
    ):
        """Target positions `index ...` (`token_ids` `(batch, n)`): returns
        `(hidden (batch, n, dim), cache[, cross-attention (batch, layers,
        heads, n, encoder_len)])`."""
        self_caches, cross_caches, encoder_mask = cache
        index = concrete_index(index)
        x = call_sublayer(
            None,
            self.decoder_embedding,
            token_ids,
            start_index=index,
            check_ids=False,
        )
        new_caches, scores = [], []
        for layer, self_cache, cross_cache in zip(
            self.decoder_layers, self_caches, cross_caches
        ):
            outputs = call_sublayer(  # see GPT.call_with_cache
                None,
                layer,
                x,
                self_attention_cache=self_cache,
                self_attention_cache_update_index=index,
                cross_attention_cache=cross_cache,
                cross_attention_cache_update_index=None,
                encoder_padding_mask=encoder_mask,
                return_attention_scores=return_attention_scores,
            )
            x, self_cache = outputs[0], outputs[1]
            if return_attention_scores:
                scores.append(outputs[-1]["cross_attention"])
            new_caches.append(self_cache)
        if self.decoder_norm is not None:
            x = call_sublayer(None, self.decoder_norm, x)
        cache = (tuple(new_caches), cross_caches, encoder_mask)
        if return_attention_scores:
            return x, cache, ops.stack(scores, axis=1)
        return x, cache


class EncoderDecoderGeneration:
    """Mixin for a generating task over an encoder-decoder backbone (after
    `zoo.models.generation.GenerationMixin` in the bases): the cached
    decoding loop of its `generate_step`.

    `token_bias` (optional, set by the task): a `(vocabulary,)` float32
    vector added to every step's logits, e.g. -1e9 at tokens that must
    never be generated.
    """

    token_bias = None

    def decode_with_cache(
        self,
        encoder_output,
        encoder_mask,
        target_ids,
        target_mask,
        stop_token_ids=None,
    ):
        """Fills the unmasked positions of `target_ids` `(batch, length)`
        with the current sampler, one position per step, reading the
        backbone's cache over `encoder_output`; returns the filled ids."""
        cache = self.backbone.decoder_cache(
            encoder_output, encoder_mask, target_ids.shape[1]
        )
        step = self.decode_function(self.decode_token)
        # A tensor made here, outside the step: converting the NumPy vector
        # inside a torch.compile'd step would split its graph.
        bias = (
            None
            if self.token_bias is None
            else ops.convert_to_tensor(self.token_bias)
        )

        def next(prompt, cache, index):
            token = ops.slice(prompt, [0, index - 1], [ops.shape(prompt)[0], 1])
            return step(token, cache, index - 1, bias)

        return self.sampler(
            next=next,
            prompt=target_ids,
            cache=cache,
            index=1,
            mask=target_mask,
            stop_token_ids=stop_token_ids,
            model=self,
        )

    def decode_token(self, token, cache, index, bias):
        """One decoding step: `token` `(batch, 1)` at target position
        `index` -> `(logits (batch, vocab) float32, hidden (batch, dim),
        cache)`, the cache from the backbone's `decoder_cache`; `bias`
        (the task's `token_bias` as a tensor, or None) is added to the
        logits."""
        hidden, cache = self.backbone.decode_step(token, cache, index)
        logits = ops.cast(self.backbone.token_logits(hidden)[:, 0], "float32")
        if bias is not None:
            logits = logits + bias
        return logits, hidden[:, 0], cache


def suppressed_tokens_bias(vocabulary_size, token_ids):
    """A `(vocabulary_size,)` float32 NumPy vector: -1e9 at `token_ids`
    (None entries skipped), 0 elsewhere; a task's `token_bias`."""
    bias = np.zeros((int(vocabulary_size),), "float32")
    for token in token_ids:
        if token is not None and 0 <= int(token) < len(bias):
            bias[int(token)] = -1e9
    return bias
