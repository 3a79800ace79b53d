"""Keras callbacks used by the recipes."""

import keras
import numpy as np

from zoo.layers import attention_entropy


class AttentionEntropyHistory(keras.callbacks.Callback):
    """Records the entropy of attention weights on fixed inputs every epoch.

    Args:
        weights_model: a model from token ids to attention weights
            `(batch, seq)` (see `zoo.models.attention_model`).
        token_ids: `(n, seq)` word ids, 0 = padding.

    After training, `entropies[epoch]` is an `(n,)` array of entropies in
    nats and `max_entropies` the entropy of uniform attention, log(length).
    """

    def __init__(self, weights_model, token_ids):
        super().__init__()
        self.weights_model = weights_model
        self.token_ids = np.asarray(token_ids)
        lengths = np.maximum((self.token_ids != 0).sum(axis=1), 1)
        self.max_entropies = np.log(lengths)
        self.entropies = {}

    def on_epoch_end(self, epoch, logs=None):
        weights = self.weights_model.predict(self.token_ids, verbose=0)
        entropy = attention_entropy(weights, self.token_ids != 0)
        self.entropies[epoch + 1] = keras.ops.convert_to_numpy(entropy)
