"""Soft visual attention: the decoder of Show, Attend and Tell (Xu et al.,
2015).

A CNN turns an image into L annotation vectors a_1..a_L (one per region of
its last grid). While an LSTM writes the caption, before each word t it
scores every region against its previous state and reads their weighted
mean:

    e_ti    = f_att(a_i, h_{t-1}) = v^T tanh(W_a a_i + U_a h_{t-1} + b)
    alpha_t = softmax_i(e_ti)                     (sums to 1 over regions)
    beta_t  = sigmoid(w_beta . h_{t-1} + b_beta)  (the gating scalar)
    z_t     = beta_t * sum_i alpha_ti a_i
    h_t, c_t = LSTM([E y_{t-1}; z_t], (h_{t-1}, c_{t-1}))
             (gates i, f, g, o = W_x E y_{t-1} + W_z z_t + U h_{t-1} + b;
              c_t = sig(f) c_{t-1} + sig(i) tanh(g), h_t = sig(o) tanh(c_t))

with the state started from the mean annotation, h_0 = tanh(W_h mean_i a_i
+ b), c_0 = tanh(W_c mean_i a_i + b). f_att is Bahdanau's additive score
(`zoo.layers.BahdanauAttention`); `W_a a_i` depends on the image alone, so
it is computed once per image (`compute_keys`).

The paper's "doubly stochastic" regularisation asks every region to be
looked at about once over the whole caption, `lambda * sum_i (1 - sum_t
alpha_ti)^2`: `DoublyStochasticPenalty` adds it to the training loss,
divided by the number of regions L.
"""

import keras
import numpy as np
from keras import ops

from zoo.layers.alignment import BahdanauAttention
from zoo.layers.attention import clone_initializer
from zoo.layers.sublayers import call_sublayer


@keras.saving.register_keras_serializable(package="zoo")
class SoftAttentionLSTM(keras.layers.Layer):
    """An LSTM that attends over image regions before every step (Show,
    Attend and Tell's decoder, soft attention).

    Args:
        units: LSTM units (the size of `h_t` and `c_t`).
        attention_units: hidden size of the additive score `f_att`.
        use_gate: scale the context by `beta_t = sigmoid(w_beta . h_{t-1} +
            b)` (the paper's gating scalar); False reads the plain
            weighted mean.
        kernel_initializer: for the attention, the gate and the initial
            state's layers.

    Call arguments:
        inputs: `(batch, steps, input_dim)`: the embedded previous words
            (`E y_{t-1}`, teacher forcing).
        annotations: `(batch, regions, feature_dim)`: the image's
            annotation vectors `a_i`.
        mask: optional `(batch, steps)`, True at real steps (the Keras mask
            of `inputs` when not given). At a padded step the state is
            carried unchanged and its attention weights are 0.
        initial_state: optional `[h_0, c_0]`, each `(batch, units)`;
            default `self.initial_state(annotations)`.
        training: unused (the layer has no dropout of its own).

    Returns:
        `(hidden, context, alphas)`: `h_t` `(batch, steps, units)`, `z_t`
        `(batch, steps, feature_dim)` and the attention weights `alpha_t`
        `(batch, steps, regions)` (each real row sums to 1), float32.

    Example:

    >>> layer = SoftAttentionLSTM(units=32, attention_units=16)
    >>> words = keras.random.normal((2, 5, 8))
    >>> regions = keras.random.normal((2, 49, 24))
    >>> h, z, alphas = layer(words, regions)
    >>> h.shape, z.shape, alphas.shape
    ((2, 5, 32), (2, 5, 24), (2, 5, 49))
    """

    _same_when_called_directly = True  # see zoo.layers.sublayers

    def __init__(
        self,
        units,
        attention_units,
        use_gate=True,
        kernel_initializer="glorot_uniform",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.units = int(units)
        self.attention_units = int(attention_units)
        self.use_gate = bool(use_gate)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.supports_masking = True

    def _dense(self, units, name, activation=None):
        return keras.layers.Dense(
            units,
            activation=activation,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            dtype=self.dtype_policy,
            name=name,
        )

    def build(self, inputs_shape, annotations_shape):
        feature_dim = annotations_shape[-1]
        state_shape = (annotations_shape[0], self.units)
        self.attention = BahdanauAttention(
            self.attention_units,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            dtype=self.dtype_policy,
            name="attention",
        )
        self.attention.build(state_shape, annotations_shape)
        self.gate = None
        if self.use_gate:
            self.gate = self._dense(1, "gate", activation="sigmoid")
            self.gate.build(state_shape)
        self.init_h = self._dense(self.units, "init_h", activation="tanh")
        self.init_c = self._dense(self.units, "init_c", activation="tanh")
        pooled_shape = (annotations_shape[0], feature_dim)
        self.init_h.build(pooled_shape)
        self.init_c.build(pooled_shape)
        # The LSTM's gates (i, f, g, o), from the word, the context and the
        # previous state: three Dense layers (quantisable like any other;
        # the word's part is computed for all steps at once).
        gates = 4 * self.units
        self.word_gates = self._dense(gates, "word_gates")
        self.word_gates.build(inputs_shape)
        self.context_gates = keras.layers.Dense(
            gates,
            use_bias=False,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            dtype=self.dtype_policy,
            name="context_gates",
        )
        self.context_gates.build((annotations_shape[0], feature_dim))
        self.recurrent_gates = keras.layers.Dense(
            gates,
            use_bias=False,
            kernel_initializer="orthogonal",
            dtype=self.dtype_policy,
            name="recurrent_gates",
        )
        self.recurrent_gates.build(state_shape)
        # The forget gate's bias starts at 1 (Jozefowicz et al., 2015; Keras'
        # LSTM does the same).
        bias = np.zeros((gates,), "float32")
        bias[self.units : 2 * self.units] = 1.0
        self.word_gates.bias.assign(bias)
        self.built = True

    def initial_state(self, annotations):
        """`[h_0, c_0]` from the mean annotation, each `(batch, units)`."""
        mean = ops.mean(annotations, axis=1)
        return [
            call_sublayer(self, self.init_h, mean),
            call_sublayer(self, self.init_c, mean),
        ]

    def compute_keys(self, annotations):
        """`W_a a_i + b` `(batch, regions, attention_units)`: the image's
        part of the score, once per image."""
        return self.attention.compute_keys(annotations)

    def step(self, inputs, state, annotations, keys, training=None):
        """One word: `inputs` `(batch, input_dim)`, `state` `[h, c]` ->
        `(h_t, z_t, alpha_t (batch, regions) float32, [h_t, c_t])`."""
        return self._step(
            call_sublayer(self, self.word_gates, inputs),
            state,
            annotations,
            keys,
        )

    def _step(self, word_gates, state, annotations, keys):
        """`step` from the word's part of the gates, `W_x E y_{t-1} + b`."""
        h, c = state
        context, alpha = call_sublayer(
            self,
            self.attention,
            h,
            annotations,
            keys=keys,
            return_attention_scores=True,
        )
        if self.gate is not None:
            context = context * call_sublayer(self, self.gate, h)
        context = ops.cast(context, h.dtype)
        gates = (
            word_gates
            + call_sublayer(self, self.context_gates, context)
            + call_sublayer(self, self.recurrent_gates, h)
        )
        i, f, g, o = ops.split(gates, 4, axis=-1)
        c = ops.sigmoid(f) * c + ops.sigmoid(i) * ops.tanh(g)
        h = ops.sigmoid(o) * ops.tanh(c)
        return h, context, ops.cast(alpha, "float32"), [h, c]

    def call(
        self, inputs, annotations, mask=None, initial_state=None, training=None
    ):
        if len(inputs.shape) != 3 or len(annotations.shape) != 3:
            raise ValueError(
                "SoftAttentionLSTM expects inputs (batch, steps, dim) and "
                "annotations (batch, regions, feature_dim); got "
                f"{tuple(inputs.shape)} and {tuple(annotations.shape)}."
            )
        state = (
            list(initial_state)
            if initial_state is not None
            else self.initial_state(annotations)
        )
        keys = self.compute_keys(annotations)
        if mask is None:
            mask = ops.ones(ops.shape(inputs)[:2], dtype="bool")
        # Time first: `ops.scan` (jax.lax.scan, a TensorFlow while loop, a
        # Python loop under PyTorch) runs one compiled step per word; the
        # words' part of the gates is one product for all steps.
        word_gates = call_sublayer(self, self.word_gates, inputs)
        # One tensor to scan over: each step's gates and, last, its mask
        # (1 or 0). Keras' TensorFlow scan cannot trace two sequences of
        # unknown length (a SavedModel or ONNX export of `call`).
        real = ops.cast(ops.cast(mask, "bool"), word_gates.dtype)
        steps = ops.transpose(
            ops.concatenate([word_gates, real[..., None]], axis=-1),
            (1, 0, 2),
        )

        def step(carry, x):
            words = x[:, :-1]
            keep = x[:, -1:] > 0
            state = list(carry[:2])
            _, z, alpha, new_state = self._step(words, state, annotations, keys)
            h, c = (ops.where(keep, n, s) for n, s in zip(new_state, state))
            alpha = alpha * ops.cast(keep, alpha.dtype)
            # What each step gives is its carry (the TensorFlow scan keeps
            # one structure for both).
            carry = (h, c, ops.cast(z, carry[2].dtype), alpha)
            return carry, carry

        batch = ops.shape(annotations)[0]
        carry = (
            *state,
            ops.zeros((batch, ops.shape(annotations)[2]), self.compute_dtype),
            ops.zeros((batch, ops.shape(annotations)[1]), "float32"),
        )
        _, (hidden, _, contexts, alphas) = ops.scan(step, carry, steps)
        return (
            ops.transpose(hidden, (1, 0, 2)),
            ops.transpose(contexts, (1, 0, 2)),
            ops.transpose(alphas, (1, 0, 2)),
        )

    def compute_mask(self, inputs, annotations=None, mask=None):
        return None

    def compute_output_spec(
        self, inputs, annotations, mask=None, initial_state=None, training=None
    ):
        batch, steps = inputs.shape[0], inputs.shape[1]
        regions, feature_dim = annotations.shape[1], annotations.shape[2]
        return (
            keras.KerasTensor(
                (batch, steps, self.units), dtype=self.compute_dtype
            ),
            keras.KerasTensor(
                (batch, steps, feature_dim), dtype=self.compute_dtype
            ),
            keras.KerasTensor((batch, steps, regions), dtype="float32"),
        )

    def get_config(self):
        return {
            **super().get_config(),
            "units": self.units,
            "attention_units": self.attention_units,
            "use_gate": self.use_gate,
            "kernel_initializer": keras.initializers.serialize(
                self.kernel_initializer
            ),
        }


def doubly_stochastic_penalty(alphas, mask=None):
    """`sum_i (1 - sum_t alpha_ti)^2` per caption, `(batch,)` float32.

    Args:
        alphas: `(batch, steps, regions)` attention weights.
        mask: optional `(batch, steps)`, True at real steps; padded steps
            add nothing to `sum_t alpha_ti`.

    Example:

    >>> penalty = doubly_stochastic_penalty(np.full((1, 4, 4), 0.25, "float32"))
    >>> float(penalty[0])  # each region's weights sum to 1 over 4 steps
    0.0
    """
    alphas = ops.cast(alphas, "float32")
    if mask is not None:
        alphas = alphas * ops.cast(mask, "float32")[:, :, None]
    return ops.sum(ops.square(1.0 - ops.sum(alphas, axis=1)), axis=-1)


@keras.saving.register_keras_serializable(package="zoo")
class DoublyStochasticPenalty(keras.layers.Layer):
    """Adds Show, Attend and Tell's doubly stochastic regularisation to the
    training loss, `weight / L * mean_b sum_i (1 - sum_t alpha_bti)^2`,
    which asks the decoder to look at every one of the L regions about
    once over a caption.

    The paper's sum over regions is divided by L (the scale of the
    authors' code and of common reimplementations): a caption of T words
    can give at most T of the L regions their full share, so the sum is at
    least `(L - T)^2 / L` and, with `weight` 1 on a 7x7 grid, would
    outweigh the cross-entropy and flatten every map; per region it does
    not grow with the grid.

    Passes the attention weights through unchanged. The loss is added in
    training steps only (as `add_loss`, like
    `keras.layers.ActivityRegularization`), so `evaluate` reports the
    cross-entropy alone, comparable between decoders.

    Args:
        weight: lambda, the penalty's weight (0 adds nothing).

    Call arguments:
        alphas: `(batch, steps, regions)` attention weights.
        mask: optional `(batch, steps)`, True at real steps.
        training: add the loss only when True.

    Returns:
        `alphas`, unchanged.

    Example:

    >>> penalty = DoublyStochasticPenalty(weight=1.0)
    >>> alphas = penalty(np.full((2, 3, 4), 0.25, "float32"), training=True)
    >>> [float(loss) for loss in penalty.losses]   # (1 - 0.75)^2
    [0.0625]
    """

    def __init__(self, weight=1.0, **kwargs):
        super().__init__(**kwargs)
        weight = float(weight)
        if not weight >= 0:
            raise ValueError(f"weight must be >= 0; got {weight}.")
        self.weight = weight

    def call(self, alphas, mask=None, training=None):
        if training and self.weight:
            regions = ops.cast(ops.shape(alphas)[-1], "float32")
            self.add_loss(
                self.weight
                / regions
                * ops.mean(doubly_stochastic_penalty(alphas, mask))
            )
        return alphas

    def compute_mask(self, alphas, mask=None):
        return None

    def compute_output_shape(self, alphas_shape, mask_shape=None):
        return alphas_shape

    def get_config(self):
        return {**super().get_config(), "weight": self.weight}
