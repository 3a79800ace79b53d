"""Test helpers: NumPy references of the course formulas and round trips."""

import os

import keras
import numpy as np
from keras import ops

BACKEND = keras.backend.backend()


def to_numpy(x):
    return np.asarray(ops.convert_to_numpy(ops.cast(x, "float32")))


def random_array(shape, seed=0, dtype="float32"):
    return np.random.default_rng(seed).normal(size=shape).astype(dtype)


def gradient(fn, x):
    """d fn(x) / dx as a NumPy array, `fn` returning a scalar tensor."""
    if BACKEND == "jax":
        import jax

        return np.asarray(jax.grad(fn)(x))
    if BACKEND == "tensorflow":
        import tensorflow as tf

        x = tf.Variable(x)
        with tf.GradientTape() as tape:
            y = fn(x)
        return tape.gradient(y, x).numpy()

    x = x.detach().clone().requires_grad_(True)
    fn(x).backward()
    return to_numpy(x.grad)  # on the CPU or a GPU


# ---- NumPy references -------------------------------------------------------


def np_softmax(x, axis=-1):
    x = x - x.max(axis=axis, keepdims=True)
    e = np.exp(x)
    return e / e.sum(axis=axis, keepdims=True)


def np_attention(q, k, v, mask=None):
    """softmax(QK^T / sqrt(d_k)) V on (..., seq, dim) arrays; mask True =
    attend; a query row with no allowed key gives zeros."""
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if mask is None:
        return np_softmax(scores) @ v, np_softmax(scores)
    mask = np.broadcast_to(mask, scores.shape)
    scores = np.where(mask, scores, -np.inf)
    row_ok = mask.any(-1, keepdims=True)
    scores = np.where(row_ok, scores, 0.0)
    weights = np.where(row_ok, np_softmax(scores), 0.0)
    return weights @ v, weights


def np_multi_head_attention(query, value, weights, num_heads, mask=None):
    """Concat(head_1..head_h) W^O with head_i = Attention(QW_i^Q, KW_i^K,
    VW_i^V); `weights` is [Wq, bq, Wk, bk, Wv, bv, Wo, bo] in Keras layout:
    W* (dim, heads, head_dim), b* (heads, head_dim), Wo (heads, head_dim, out).
    """
    wq, bq, wk, bk, wv, bv, wo, bo = weights
    heads = []
    for h in range(num_heads):
        q = query @ wq[:, h] + bq[h]
        k = value @ wk[:, h] + bk[h]
        v = value @ wv[:, h] + bv[h]
        heads.append(np_attention(q, k, v, mask)[0])
    concat = np.concatenate(heads, axis=-1)  # (batch, seq, heads * head_dim)
    w_o = wo.reshape(-1, wo.shape[-1])
    return concat @ w_o + bo


def np_sinusoidal(length, dim, max_wavelength=10000.0):
    """PE(p, 2i) = sin(p / w^(2i/d)), PE(p, 2i+1) = cos(p / w^(2i/d))."""
    pe = np.zeros((length, dim))
    for p in range(length):
        for j in range(dim):
            i = j // 2
            angle = p / max_wavelength ** (2 * i / dim)
            pe[p, j] = np.sin(angle) if j % 2 == 0 else np.cos(angle)
    return pe


def np_layer_norm(x, gamma, beta, eps):
    mean = x.mean(-1, keepdims=True)
    var = x.var(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


# ---- Round trips ------------------------------------------------------------


def counted(function, calls):
    """`function`, appending to `calls` at each call (each trace, for a
    traced train step)."""

    def wrapper(*args):
        calls.append(1)
        return function(*args)

    return wrapper


def keras_round_trip(model, tmp_path, name="model.keras"):
    """Saves to .keras and loads it back (with zoo's registered objects)."""
    path = os.path.join(str(tmp_path), name)
    model.save(path)
    return keras.saving.load_model(path)


def config_round_trip(layer):
    """Recreates a layer from its serialized config."""
    config = keras.saving.serialize_keras_object(layer)
    return keras.saving.deserialize_keras_object(config)


def run_interrupted_after_first_epoch(monkeypatch, run):
    """Calls `run()` (a recipe's `main`) with `zoo.callbacks.
    BackupUntilDone` writing its backup after the first epoch and then
    stopping the run, as an interruption would; the backup stays."""
    import pytest

    class Interrupted(Exception):
        pass

    from zoo.callbacks import BackupUntilDone

    save = BackupUntilDone.on_epoch_end

    def stop_after_first_epoch(self, epoch, logs=None):
        save(self, epoch, logs)  # the backup is written
        raise Interrupted

    with monkeypatch.context() as patch:
        patch.setattr(BackupUntilDone, "on_epoch_end", stop_after_first_epoch)
        with pytest.raises(Interrupted):
            run()


def tiny_text_gpt(text, sequence_length=8):
    """A one-block character GPT with its preprocessor (vocabulary from
    `text`), unbuilt."""
    from zoo.data.tokenizers import CharacterTokenizer
    from zoo.models import GPT, GPTBackbone, GPTPreprocessor

    tokenizer = CharacterTokenizer.from_text(text)
    return GPT(
        GPTBackbone(
            tokenizer.vocabulary_size(),
            num_layers=1,
            num_heads=2,
            hidden_dim=8,
            sequence_length=sequence_length,
        ),
        preprocessor=GPTPreprocessor(tokenizer, sequence_length),
    )
