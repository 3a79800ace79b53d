"""A hand-written JAX greedy decoder for a `zoo.models.GPT`, the peer that
`gpt_generation.py` measures zoo's cached generation against.

It reads the model's own weights and does the same arithmetic as
`GPT.generate(sampler="greedy")` with the key/value cache — one pass over the
whole window fills the cache, then one position per step inside one
`jax.lax.fori_loop` — with nothing but `jax.numpy`: no Keras layers, no
sampler, no masks beyond the causal one. Its time is what a cached decoder of
this shape costs on the machine, so it bounds the speed-up any cache can show
against recomputing the prefix there. Only for JAX (benchmarks may import a
backend; `zoo/` may not).
"""

import math
import time

import jax
import jax.numpy as jnp
import numpy as np


def gpt_weights(gpt):
    """The backbone's weights as a pytree of jax arrays."""
    backbone = gpt.backbone
    if not backbone.tie_weights:
        raise ValueError("The reference decoder handles tied embeddings only.")

    def value(variable):
        return jnp.asarray(variable.value)

    def norm(layer):
        return {"gamma": value(layer.gamma), "beta": value(layer.beta)}

    def dense(layer):
        return {"kernel": value(layer.kernel), "bias": value(layer.bias)}

    blocks = []
    for block in backbone.transformer_layers:
        attention = block._self_attention_layer
        blocks.append(
            {
                "attention_norm": norm(block._self_attention_layer_norm),
                "query": dense(attention._query_dense),
                "key": dense(attention._key_dense),
                "value": dense(attention._value_dense),
                "output": dense(attention._output_dense),
                "mlp_norm": norm(block._feedforward_layer_norm),
                "intermediate": dense(block._feedforward_intermediate_dense),
                "mlp_output": dense(block._feedforward_output_dense),
            }
        )
    return {
        "tokens": value(backbone.token_embedding.embeddings),
        "positions": value(
            backbone.embeddings.position_embedding.position_embeddings
        ),
        "blocks": blocks,
        "final_norm": norm(backbone.layer_norm),
    }


def _layer_norm(x, weights, epsilon):
    mean = jnp.mean(x, axis=-1, keepdims=True)
    variance = jnp.mean(jnp.square(x - mean), axis=-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(variance + epsilon) * weights[
        "gamma"
    ] + weights["beta"]


def _forward(weights, token_ids, caches, start, epsilon):
    """Logits for `token_ids` (batch, n) at positions start.., and the
    caches with their keys and values written in."""
    n = token_ids.shape[1]
    max_length = caches[0].shape[2]
    x = (
        weights["tokens"][token_ids]
        + jax.lax.dynamic_slice_in_dim(weights["positions"], start, n)[None]
    )
    # Query t (absolute position start + t) sees cache slots <= start + t.
    visible = jnp.arange(max_length)[None, :] <= start + jnp.arange(n)[:, None]
    new_caches = []
    for block, cache in zip(weights["blocks"], caches):
        h = _layer_norm(x, block["attention_norm"], epsilon)

        def project(name, h=h, block=block):
            return (
                jnp.einsum("bsd,dhk->bshk", h, block[name]["kernel"])
                + block[name]["bias"]
            )

        query, key, value = project("query"), project("key"), project("value")
        cache = jax.lax.dynamic_update_slice(
            cache, jnp.stack([key, value], axis=1), (0, 0, start, 0, 0)
        )
        scores = jnp.einsum("bqhk,bthk->bhqt", query, cache[:, 0])
        scores = scores / math.sqrt(query.shape[-1])
        scores = jnp.where(visible[None, None], scores, -jnp.inf)
        attended = jnp.einsum(
            "bhqt,bthk->bqhk", jax.nn.softmax(scores), cache[:, 1]
        )
        x = (
            x
            + jnp.einsum("bqhk,hkd->bqd", attended, block["output"]["kernel"])
            + block["output"]["bias"]
        )
        h = _layer_norm(x, block["mlp_norm"], epsilon)
        h = jax.nn.gelu(
            h @ block["intermediate"]["kernel"] + block["intermediate"]["bias"],
            approximate=False,
        )
        x = x + h @ block["mlp_output"]["kernel"] + block["mlp_output"]["bias"]
        new_caches.append(cache)
    x = _layer_norm(x, weights["final_norm"], epsilon)
    return x @ weights["tokens"].T, tuple(new_caches)


def _empty_caches(backbone, batch_size, max_length, dtype):
    head_dim = backbone.hidden_dim // backbone.num_heads
    shape = (batch_size, 2, max_length, backbone.num_heads, head_dim)
    return tuple(jnp.zeros(shape, dtype) for _ in range(backbone.num_layers))


def window_logits(gpt, token_ids):
    """Next-token logits `(batch, seq, vocab)` for every position of
    `token_ids`, computed by the hand-written forward pass (for tests)."""
    backbone = gpt.backbone
    token_ids = jnp.asarray(token_ids)
    weights = gpt_weights(gpt)
    caches = _empty_caches(backbone, *token_ids.shape, weights["tokens"].dtype)
    logits, _ = _forward(
        weights, token_ids, caches, 0, backbone.layer_norm_epsilon
    )
    return np.asarray(logits)


def make_greedy_decoder(gpt, prompt_length):
    """`decode(weights, token_ids) -> token_ids`, compiled: fills
    `token_ids[:, prompt_length:]` greedily, as `gpt.generate` does for a
    batch whose prompts all have `prompt_length` tokens."""
    backbone = gpt.backbone
    epsilon = backbone.layer_norm_epsilon

    @jax.jit
    def decode(weights, token_ids):
        max_length = token_ids.shape[1]
        caches = _empty_caches(
            backbone, *token_ids.shape, weights["tokens"].dtype
        )
        # One pass over the whole window fills the cache (the positions after
        # the prompt are rewritten as they are generated).
        _, caches = _forward(weights, token_ids, caches, 0, epsilon)

        def step(index, state):
            token_ids, caches = state
            last = jax.lax.dynamic_slice_in_dim(token_ids, index - 1, 1, 1)
            logits, caches = _forward(weights, last, caches, index - 1, epsilon)
            next_token = jnp.argmax(logits[:, 0], axis=-1).astype(
                token_ids.dtype
            )
            token_ids = jax.lax.dynamic_update_slice_in_dim(
                token_ids, next_token[:, None], index, 1
            )
            return token_ids, caches

        token_ids, _ = jax.lax.fori_loop(
            prompt_length, max_length, step, (token_ids, caches)
        )
        return token_ids

    return decode


def time_greedy_decoder(gpt, token_ids, prompt_length, repeats=3):
    """(median seconds of `repeats` warm calls, generated token ids)."""
    weights = gpt_weights(gpt)
    decode = make_greedy_decoder(gpt, prompt_length)
    token_ids = jnp.asarray(token_ids)
    output = np.asarray(decode(weights, token_ids))  # compile + warm up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        output = np.asarray(decode(weights, token_ids))
        times.append(time.perf_counter() - start)
    return float(np.median(times)), output
