"""Keras callbacks used by the recipes."""

import time

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


class ReproducibleEpochs(keras.callbacks.Callback):
    """Makes each epoch's randomness a function of `(seed, epoch)`, so a run
    resumed at epoch `e` (with `keras.callbacks.BackupAndRestore`) continues
    exactly as the uninterrupted run would have.

    At the start of every epoch it sets `.epoch` on each of `datasets` (e.g.
    `zoo.data.masked_lm.MaskedLMBatches`, whose order and masks follow it)
    and reseeds every `keras.random.SeedGenerator` of the model (dropout's),
    whose state `BackupAndRestore` does not save, and the global generators
    (`keras.utils.set_random_seed`: PyTorch's unseeded dropout draws from
    torch's own).

    Args:
        seed: the run's seed.
        datasets: objects with an `epoch` attribute to keep in step.

    Example:

    >>> batches = MaskedLMBatches(ids, 64, tokenizer, seed=1)
    >>> mlm.fit(batches, epochs=10, callbacks=[
    ...     ReproducibleEpochs(1, [batches]),
    ...     keras.callbacks.BackupAndRestore("runs/backup")])
    """

    def __init__(self, seed, datasets=()):
        super().__init__()
        self.seed = int(seed)
        self.datasets = list(datasets)

    def on_epoch_begin(self, epoch, logs=None):
        for dataset in self.datasets:
            dataset.epoch = int(epoch)
        keras.utils.set_random_seed(int(np.random.default_rng(
            [self.seed, int(epoch)]).integers(0, 2**31 - 1)))
        states = [v for v in self.model.variables
                  if v.name == "seed_generator_state"]
        for index, state in enumerate(states):
            value = np.random.default_rng(
                [self.seed, int(epoch), index]).integers(0, 2**31 - 1)
            state.assign(keras.ops.convert_to_tensor([value, 0],
                                                     dtype=state.dtype))


class StopAfterMinutes(keras.callbacks.Callback):
    """Ends training when another epoch would overrun a wall-clock budget.

    After each epoch, the mean epoch time so far predicts the end of the
    next one; if that is past `minutes` from the start of `fit`, training
    stops (a checkpoint written by `BackupAndRestore` stays usable, so a
    resumed run continues from it). Epochs skipped by a resumed run do not
    count.

    Args:
        minutes: the budget, in minutes, from the start of `fit`.
        note: appended to the message printed when it stops (e.g. how to
            resume).

    Attributes:
        stopped: whether it ended the training.

    Example:

    >>> model.fit(x, y, epochs=100, callbacks=[StopAfterMinutes(30)])
    """

    def __init__(self, minutes, note=""):
        super().__init__()
        self.seconds = float(minutes) * 60
        self.note = note
        self.start = None
        self.first_epoch = None
        self.stopped = False

    def on_train_begin(self, logs=None):
        self.start = time.perf_counter()
        self.first_epoch = None

    def on_epoch_begin(self, epoch, logs=None):
        if self.first_epoch is None:  # later than 0 in a resumed run
            self.first_epoch = epoch

    def on_epoch_end(self, epoch, logs=None):
        elapsed = time.perf_counter() - self.start
        epochs_here = epoch + 1 - (self.first_epoch or 0)
        if elapsed * (epochs_here + 1) / max(epochs_here, 1) > self.seconds:
            print(f"\nstopping: the {self.seconds / 60:g}-minute budget is "
                  f"spent{self.note}")
            self.model.stop_training = True
            self.stopped = True
