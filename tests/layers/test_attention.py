"""scaled_dot_product_attention and MultiHeadAttention, under the current backend."""

import keras
import numpy as np
import pytest
from keras import ops

from tests.helpers import (
    config_round_trip,
    gradient,
    keras_round_trip,
    np_attention,
    np_multi_head_attention,
    random_array,
    to_numpy,
)
from zoo.layers import (
    MultiHeadAttention,
    causal_mask,
    scaled_dot_product_attention,
)

ATOL = 1e-5


def _random_mask(shape, seed, empty_row=True):
    mask = np.random.default_rng(seed).random(shape) > 0.4
    if empty_row:
        mask[(0,) * (len(shape) - 2) + (1,)] = False  # one query sees nothing
    return mask


# ---- scaled_dot_product_attention -------------------------------------------


@pytest.mark.parametrize(
    "return_weights", [False, True], ids=["fused", "explicit"]
)
@pytest.mark.parametrize("rank", [3, 4])
def test_sdpa_matches_numpy_formula(rank, return_weights):
    shape_q = (2, 5, 3, 8) if rank == 4 else (2, 5, 8)
    shape_k = (2, 7, 3, 8) if rank == 4 else (2, 7, 8)
    q, k, v = (
        random_array(shape_q, 0),
        random_array(shape_k, 1),
        random_array(shape_k, 2),
    )
    out = scaled_dot_product_attention(q, k, v, return_weights=return_weights)
    # NumPy reference works on (..., seq, dim): put heads before seq.
    to_heads = (
        (lambda a: a.transpose(0, 2, 1, 3)) if rank == 4 else (lambda a: a)
    )
    expected, expected_w = np_attention(to_heads(q), to_heads(k), to_heads(v))
    if return_weights:
        out, weights = out
        np.testing.assert_allclose(to_numpy(weights), expected_w, atol=ATOL)
        assert to_numpy(weights).sum(-1) == pytest.approx(1.0, abs=1e-5)
    np.testing.assert_allclose(to_numpy(out), to_heads(expected), atol=ATOL)


@pytest.mark.parametrize(
    "mask_shape", [(2, 7), (2, 5, 7), (2, 1, 5, 7), (2, 3, 5, 7)]
)
def test_sdpa_masks_match_numpy_and_paths_agree(mask_shape):
    q = random_array((2, 5, 3, 8), 0)
    k, v = random_array((2, 7, 3, 8), 1), random_array((2, 7, 3, 8), 2)
    mask = _random_mask(mask_shape, 3, empty_row=len(mask_shape) > 2)
    fused = scaled_dot_product_attention(q, k, v, mask=mask)
    explicit, weights = scaled_dot_product_attention(
        q, k, v, mask=mask, return_weights=True
    )
    np_mask = {2: lambda m: m[:, None, None, :], 3: lambda m: m[:, None]}.get(
        len(mask_shape), lambda m: m
    )(mask)
    expected, expected_w = np_attention(
        q.transpose(0, 2, 1, 3),
        k.transpose(0, 2, 1, 3),
        v.transpose(0, 2, 1, 3),
        np_mask,
    )
    np.testing.assert_allclose(
        to_numpy(explicit), expected.transpose(0, 2, 1, 3), atol=ATOL
    )
    np.testing.assert_allclose(to_numpy(fused), to_numpy(explicit), atol=ATOL)
    np.testing.assert_allclose(to_numpy(weights), expected_w, atol=ATOL)


@pytest.mark.parametrize(
    "return_weights", [False, True], ids=["fused", "explicit"]
)
def test_query_with_nothing_to_attend_gives_zeros_not_nan(return_weights):
    q, k, v = (
        random_array((2, 4, 2, 8), 0),
        random_array((2, 6, 2, 8), 1),
        random_array((2, 6, 2, 8), 2),
    )
    mask = np.ones((2, 4, 6), bool)
    mask[0, 2] = False  # query 2 of sample 0 may see no key
    mask[1] = False  # sample 1 sees nothing at all
    out = scaled_dot_product_attention(
        q, k, v, mask=mask, return_weights=return_weights
    )
    if return_weights:
        out, weights = out
        weights = to_numpy(weights)
        assert not np.isnan(weights).any()
        assert np.all(weights[0, :, 2] == 0) and np.all(weights[1] == 0)
    out = to_numpy(out)
    assert not np.isnan(out).any()
    assert np.all(out[0, 2] == 0) and np.all(out[1] == 0)
    assert np.abs(out[0, 0]).sum() > 0


def test_empty_rows_have_finite_gradients():
    q, k, v = (
        ops.convert_to_tensor(random_array((1, 3, 4), s)) for s in range(3)
    )
    mask = np.array(
        [[[True, False, True], [False, False, False], [True, True, True]]]
    )

    def loss_fn(q):
        return ops.sum(scaled_dot_product_attention(q, k, v, mask=mask) ** 2)

    grads = gradient(loss_fn, q)
    assert np.isfinite(grads).all()
    assert np.all(grads[0, 1] == 0)  # the empty row does not depend on q


def test_the_check_is_dropped_only_where_the_kernel_zeroes_empty_rows(
    monkeypatch,
):
    """Under PyTorch on the CPU the fused path trusts the kernel with a -inf
    bias only if a probe saw it give zeros; elsewhere the check stays."""
    from zoo.layers import attention_kernels as kernels

    query = ops.convert_to_tensor(random_array((1, 2, 1, 4), 0))
    monkeypatch.setattr(kernels, "_ZEROES_EMPTY_ROWS", {})
    on_cpu_torch = keras.backend.backend() == "torch" and (
        query.device.type == "cpu"
    )
    assert kernels._sdpa_zeroes_empty_rows(query) == on_cpu_torch
    if on_cpu_torch:  # a kernel that gave the mean of the values instead
        monkeypatch.setattr(kernels, "_ZEROES_EMPTY_ROWS", {})
        monkeypatch.setattr(
            kernels.ops,
            "dot_product_attention",
            lambda q, k, v, **kw: ops.ones_like(q),
        )
        assert not kernels._sdpa_zeroes_empty_rows(query)


@pytest.mark.parametrize(
    "return_weights", [False, True], ids=["fused", "explicit"]
)
def test_causal_output_at_t_ignores_later_steps(return_weights):
    x = random_array((2, 6, 8), 0)
    changed = x.copy()
    changed[:, 4:] = random_array((2, 2, 8), 9)  # rewrite the future of t=3
    run = lambda a: to_numpy(
        _first(
            scaled_dot_product_attention(
                a, a, a, is_causal=True, return_weights=return_weights
            )
        )
    )
    before, after = run(x), run(changed)
    np.testing.assert_allclose(before[:, :4], after[:, :4], atol=ATOL)
    assert np.abs(before[:, 4:] - after[:, 4:]).max() > 1e-3


def _first(result):
    return result[0] if isinstance(result, tuple) else result


def test_causal_is_aligned_to_the_end_of_the_keys():
    # Two new queries over five keys (three cached): query i sees keys <= 3 + i.
    expected = np.array([[1, 1, 1, 1, 0], [1, 1, 1, 1, 1]], bool)
    np.testing.assert_array_equal(
        ops.convert_to_numpy(causal_mask(2, 5)), expected
    )
    q, k, v = (
        random_array((1, 2, 4), 0),
        random_array((1, 5, 4), 1),
        random_array((1, 5, 4), 2),
    )
    out = scaled_dot_product_attention(q, k, v, is_causal=True)
    reference, _ = np_attention(q, k, v, expected[None])
    np.testing.assert_allclose(to_numpy(out), reference, atol=ATOL)


@pytest.mark.parametrize(
    "return_weights", [False, True], ids=["fused", "explicit"]
)
def test_causal_with_more_queries_than_keys_zeroes_the_early_queries(
    return_weights,
):
    # Aligned to the end of the keys, queries 0 and 1 of 5 over 3 keys see
    # none: zeros, as for any key-less query (the causal-only shortcut that
    # skips the row check must not apply here).
    q, k, v = (
        random_array((1, 5, 4), 0),
        random_array((1, 3, 4), 1),
        random_array((1, 3, 4), 2),
    )
    out = to_numpy(
        _first(
            scaled_dot_product_attention(
                q, k, v, is_causal=True, return_weights=return_weights
            )
        )
    )
    expected, _ = np_attention(
        q[:, 2:], k, v, ops.convert_to_numpy(causal_mask(3, 3))[None]
    )
    assert np.all(out[:, :2] == 0)
    np.testing.assert_allclose(out[:, 2:], expected, atol=ATOL)


@pytest.mark.parametrize(
    "return_scores", [False, True], ids=["fused", "explicit"]
)
def test_a_causal_decoding_step_skips_the_row_check(monkeypatch, return_scores):
    # A causal mask alone lets every query see key 0: no row can be empty,
    # so the step does not look for one (a pass over the mask per call).
    from zoo.layers import attention_kernels as kernels

    layer = MultiHeadAttention(num_heads=2, key_dim=4)
    x = random_array((2, 7, 8), 0)
    full = to_numpy(layer(x, x, use_causal_mask=True))

    def no_check(*args):
        raise AssertionError("the row check ran")

    monkeypatch.setattr(kernels, "_rows_with_a_key", no_check)
    monkeypatch.setattr(kernels, "_zero_rows_without_a_key", no_check)
    cache = ops.zeros((2, 2, 7, 2, 4))
    token = x[:, 3:4]
    prefix = layer(
        x[:, :3],
        x[:, :3],
        use_causal_mask=True,
        cache=cache,
        cache_update_index=0,
    )
    out = layer(
        token,
        token,
        use_causal_mask=True,
        cache=prefix[-1],
        cache_update_index=3,
        return_attention_scores=return_scores,
    )
    np.testing.assert_allclose(to_numpy(out[0]), full[:, 3:4], atol=ATOL)
    if return_scores:  # with a padding mask too, the explicit path checks
        with pytest.raises(AssertionError, match="row check"):
            layer(
                token,
                token,
                use_causal_mask=True,
                cache=prefix[-1],
                cache_update_index=3,
                attention_mask=np.ones((2, 1, 7), bool),
                return_attention_scores=True,
            )


def test_custom_scale():
    q, k, v = (
        random_array((1, 3, 4), 0),
        random_array((1, 3, 4), 1),
        random_array((1, 3, 4), 2),
    )
    out = scaled_dot_product_attention(q, k, v, scale=1.0)
    reference, _ = np_attention(
        q * 2.0, k, v
    )  # np_attention divides by sqrt(4) = 2
    np.testing.assert_allclose(to_numpy(out), reference, atol=ATOL)


@pytest.mark.parametrize(
    "shapes, message",
    [
        (((2, 8), (2, 8), (2, 8)), "rank 3"),
        (((2, 3, 8), (2, 3, 4, 8), (2, 3, 4, 8)), "same rank"),
        (((2, 3, 8), (2, 3, 6), (2, 3, 8)), "last dimension"),
        (((2, 3, 8), (2, 4, 8), (2, 5, 8)), "sequence length"),
    ],
)
def test_sdpa_rejects_bad_shapes(shapes, message):
    q, k, v = (random_array(s, i) for i, s in enumerate(shapes))
    with pytest.raises(ValueError, match=message):
        scaled_dot_product_attention(q, k, v)


def test_sdpa_rejects_bad_mask_rank():
    q = random_array((2, 3, 8))
    with pytest.raises(ValueError, match="mask must have shape"):
        scaled_dot_product_attention(q, q, q, mask=np.ones((2, 1, 3, 3), bool))


# ---- MultiHeadAttention --------------------------------------------------------


def _copied_pair(
    num_heads=3,
    key_dim=4,
    query_len=5,
    value_len=6,
    dim=12,
    value_dim_in=None,
    **kwargs,
):
    """A zoo and a Keras MultiHeadAttention with identical weights."""
    value_dim_in = value_dim_in or dim
    ours = MultiHeadAttention(num_heads, key_dim, **kwargs)
    theirs = keras.layers.MultiHeadAttention(num_heads, key_dim, **kwargs)
    query, value = (
        random_array((2, query_len, dim), 0),
        random_array((2, value_len, value_dim_in), 1),
    )
    ours(query, value)
    theirs(query, value, return_attention_scores=True)  # builds on every path
    ours.set_weights(theirs.get_weights())
    return ours, theirs, query, value


def test_mha_matches_numpy_concat_heads_times_w_o():
    layer = MultiHeadAttention(num_heads=3, key_dim=4)
    query, value = random_array((2, 5, 12), 0), random_array((2, 6, 12), 1)
    mask = _random_mask((2, 5, 6), 2, empty_row=False)
    out = layer(query, value, attention_mask=mask)
    weights = [to_numpy(w) for w in layer.weights]
    expected = np_multi_head_attention(
        query, value, weights, num_heads=3, mask=mask
    )
    np.testing.assert_allclose(to_numpy(out), expected, atol=ATOL)


@pytest.mark.parametrize(
    "layer_kwargs, call_kwargs",
    [
        ({}, {}),
        ({}, {"use_causal_mask": True}),
        # Keras's own fused path fails on JAX when value_dim != key_dim
        # (jax.nn.dot_product_attention needs equal widths), so compare the
        # explicit paths here; ours picks the explicit path by itself.
        (
            {"value_dim": 5, "output_shape": 7},
            {"return_attention_scores": True},
        ),
        ({"use_bias": False}, {"use_causal_mask": True}),
        ({}, {"attention_mask": "random"}),
        ({}, {"return_attention_scores": True}),
    ],
    ids=[
        "self",
        "causal",
        "value_dim_output_shape",
        "no_bias",
        "attention_mask",
        "scores",
    ],
)
def test_mha_equals_keras_mha_with_copied_weights(layer_kwargs, call_kwargs):
    ours, theirs, query, _ = _copied_pair(query_len=6, **layer_kwargs)
    if call_kwargs.get("attention_mask") == "random":
        call_kwargs = {
            "attention_mask": _random_mask((2, 6, 6), 5, empty_row=False)
        }
    ours_out = ours(query, query, **call_kwargs)
    theirs_out = theirs(query, query, **call_kwargs)
    for a, b in zip(
        keras.tree.flatten(ours_out), keras.tree.flatten(theirs_out)
    ):
        np.testing.assert_allclose(to_numpy(a), to_numpy(b), atol=ATOL)


def test_mha_cross_attention_equals_keras_mha():
    ours, theirs, query, value = _copied_pair(
        query_len=4, value_len=9, value_dim_in=10
    )
    key = random_array((2, 9, 10), 7)
    np.testing.assert_allclose(
        to_numpy(ours(query, value, key)),
        to_numpy(theirs(query, value, key)),
        atol=ATOL,
    )


def test_mha_keras_masks_match_keras_mha_at_real_positions():
    """Masks from an Embedding(mask_zero=True) reach the attention."""
    ids = np.array([[4, 2, 7, 0, 0], [3, 3, 1, 8, 0]])
    embed = keras.layers.Embedding(10, 12, mask_zero=True)
    ours, theirs = (
        MultiHeadAttention(3, 4),
        keras.layers.MultiHeadAttention(3, 4),
    )
    x = embed(ids)
    ours(x, x)
    theirs(x, x)
    ours.set_weights(theirs.get_weights())
    real = ids != 0
    ours_out, theirs_out = to_numpy(ours(x, x)), to_numpy(theirs(x, x))
    np.testing.assert_allclose(ours_out[real], theirs_out[real], atol=ATOL)


def test_mha_padding_does_not_change_real_positions():
    layer = MultiHeadAttention(2, 4)
    x = random_array((1, 4, 8), 0)
    padded = np.concatenate([x, random_array((1, 3, 8), 1)], axis=1)
    mask = np.array([[True] * 4 + [False] * 3])
    short = to_numpy(layer(x, x))
    long = to_numpy(
        layer(
            padded, padded, attention_mask=mask[:, None, :] & mask[:, :, None]
        )
    )
    np.testing.assert_allclose(long[:, :4], short, atol=ATOL)
    assert not np.isnan(long).any()


def test_self_attention_without_positions_is_permutation_equivariant():
    layer = MultiHeadAttention(2, 4)
    x = random_array((2, 6, 8), 0)
    permutation = np.array([3, 0, 5, 1, 4, 2])
    out = to_numpy(layer(x, x))
    permuted_out = to_numpy(layer(x[:, permutation], x[:, permutation]))
    np.testing.assert_allclose(permuted_out, out[:, permutation], atol=ATOL)


def test_cached_decoding_token_by_token_equals_full_causal_pass():
    layer = MultiHeadAttention(num_heads=2, key_dim=4)
    x = random_array((2, 7, 8), 0)
    full = to_numpy(layer(x, x, use_causal_mask=True))
    cache = ops.zeros((2, 2, 7, 2, 4))
    steps = []
    for t in range(7):
        token = x[:, t : t + 1]
        out, cache = layer(
            token,
            token,
            use_causal_mask=True,
            cache=cache,
            cache_update_index=t,
        )
        steps.append(to_numpy(out))
    np.testing.assert_allclose(np.concatenate(steps, axis=1), full, atol=ATOL)


def test_cache_prefill_then_one_token():
    layer = MultiHeadAttention(num_heads=2, key_dim=4)
    x = random_array((1, 6, 8), 0)
    full = to_numpy(layer(x, x, use_causal_mask=True))
    cache = ops.zeros((1, 2, 6, 2, 4))
    prefix, cache = layer(
        x[:, :5],
        x[:, :5],
        use_causal_mask=True,
        cache=cache,
        cache_update_index=0,
    )
    last, cache = layer(
        x[:, 5:],
        x[:, 5:],
        use_causal_mask=True,
        cache=cache,
        cache_update_index=5,
    )
    np.testing.assert_allclose(to_numpy(prefix), full[:, :5], atol=ATOL)
    np.testing.assert_allclose(to_numpy(last), full[:, 5:], atol=ATOL)


def test_precomputed_cross_attention_cache_is_reused():
    layer = MultiHeadAttention(num_heads=2, key_dim=4)
    query, encoder = random_array((2, 3, 8), 0), random_array((2, 5, 8), 1)
    expected = to_numpy(layer(query, encoder))
    cache = layer.compute_cache(encoder)
    out, same_cache = layer(query, None, cache=cache)
    np.testing.assert_allclose(to_numpy(out), expected, atol=ATOL)
    np.testing.assert_allclose(to_numpy(same_cache), to_numpy(cache))


def test_dropout_only_in_training():
    layer = MultiHeadAttention(2, 4, dropout=0.5, seed=3)
    x = random_array((2, 5, 8), 0)
    inference = [to_numpy(layer(x, x)) for _ in range(2)]
    np.testing.assert_allclose(inference[0], inference[1])
    trained = to_numpy(layer(x, x, training=True))
    assert np.abs(trained - inference[0]).max() > 1e-4


def test_dropout_path_zeroes_a_query_with_no_key():
    # Training with attention dropout takes the explicit path, which zeroes
    # key-less rows on its outputs (the output projection's bias is zero).
    layer = MultiHeadAttention(2, 4, dropout=0.5, seed=3)
    x = random_array((2, 5, 8), 0)
    mask = np.ones((2, 5, 5), bool)
    mask[0, 1] = False  # query 1 of sample 0 may see no key
    out = to_numpy(layer(x, x, attention_mask=mask, training=True))
    assert np.isfinite(out).all()
    assert np.all(out[0, 1] == 0) and np.abs(out[0, 0]).sum() > 0


def test_mha_functional_model_scores_and_round_trip(tmp_path):
    inputs = keras.Input((None, 8))
    out, scores = MultiHeadAttention(2, 4, value_dim=3, output_shape=6)(
        inputs, inputs, use_causal_mask=True, return_attention_scores=True
    )
    assert tuple(out.shape) == (None, None, 6) and tuple(scores.shape) == (
        None,
        2,
        None,
        None,
    )
    model = keras.Model(inputs, [out, scores])
    x = random_array((2, 5, 8), 0)
    expected = model.predict(x, verbose=0)
    loaded = keras_round_trip(model, tmp_path)
    for a, b in zip(expected, loaded.predict(x, verbose=0)):
        np.testing.assert_allclose(a, b, atol=1e-6)
    assert isinstance(loaded.layers[1], MultiHeadAttention)


def test_mha_config_round_trip():
    layer = MultiHeadAttention(
        4,
        8,
        value_dim=6,
        dropout=0.1,
        use_bias=False,
        output_shape=10,
        kernel_initializer="he_normal",
        kernel_regularizer="l2",
        seed=7,
        name="mha",
    )
    assert config_round_trip(layer).get_config() == layer.get_config()


def test_mha_one_training_step_changes_weights():
    inputs = keras.Input((5, 8))
    attention = MultiHeadAttention(2, 4)
    pooled = keras.layers.GlobalAveragePooling1D()(attention(inputs, inputs))
    model = keras.Model(inputs, keras.layers.Dense(1)(pooled))
    model.compile("adam", "mse")
    before = [to_numpy(w) for w in attention.weights]
    history = model.fit(
        random_array((4, 5, 8), 0), np.ones((4, 1)), epochs=1, verbose=0
    )
    assert np.isfinite(history.history["loss"][0])
    after = [to_numpy(w) for w in attention.weights]
    assert any(np.abs(a - b).max() > 0 for a, b in zip(before, after))


@pytest.mark.parametrize("policy", ["mixed_bfloat16", "mixed_float16"])
@pytest.mark.parametrize(
    "return_scores", [False, True], ids=["fused", "explicit"]
)
def test_mha_mixed_precision_runs_without_nan(policy, return_scores):
    keras.config.set_dtype_policy(policy)
    layer = MultiHeadAttention(2, 4)
    x = random_array((2, 5, 8), 0)
    mask = np.ones((2, 5, 5), bool)
    mask[1, 0] = False  # an empty row too
    out = layer(
        x,
        x,
        attention_mask=mask,
        use_causal_mask=True,
        return_attention_scores=return_scores,
    )
    out = _first(out)
    assert keras.backend.standardize_dtype(out.dtype) == policy.split("_")[1]
    assert layer.query_dense.kernel.dtype == "float32"
    assert np.isfinite(to_numpy(out)).all()


def test_mha_rejects_bad_arguments():
    with pytest.raises(ValueError, match="positive"):
        MultiHeadAttention(0, 4)
    with pytest.raises(ValueError, match="dropout"):
        MultiHeadAttention(2, 4, dropout=1.5)
    with pytest.raises(ValueError, match="rank 3 .* or more"):
        MultiHeadAttention(2, 4)(random_array((2, 8)), random_array((2, 8)))
    layer = MultiHeadAttention(2, 4, value_dim=3)
    x = random_array((1, 2, 8))
    with pytest.raises(ValueError, match="value_dim == key_dim"):
        layer(x, x, cache=ops.zeros((1, 2, 4, 2, 4)), cache_update_index=0)


def test_masks_of_the_wrong_length_are_clear_errors():
    x = random_array((2, 5, 8), 0)
    with pytest.raises(ValueError, match="4 entries on its k_len axis"):
        scaled_dot_product_attention(x, x, x, mask=np.ones((2, 5, 4), bool))
    mha = MultiHeadAttention(2, 4)
    with pytest.raises(ValueError, match="4 entries on its k_len axis"):
        mha(x, x, attention_mask=np.ones((2, 5, 4), bool))
    with pytest.raises(ValueError, match="4 entries on its q_len axis"):
        mha(x, x, query_mask=np.ones((2, 4), bool))
    # Broadcasting axes of length 1 stay allowed.
    assert mha(x, x, attention_mask=np.ones((2, 1, 5), bool)).shape == (2, 5, 8)
