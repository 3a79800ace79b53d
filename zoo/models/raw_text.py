"""`fit`, `evaluate` and `predict` on raw strings, for keras-hub tasks."""

import keras

from zoo.data.text import fit_dataset, split_validation_arrays, text_batch


class RawTextMixin:
    """Mixin for keras-hub `Task`s whose preprocessor reads strings.

    Put it first: `class TextClassifier(RawTextMixin, PortableCompileConfig,
    keras_hub.models.Task)`. A lone string is a batch of one and an empty
    batch is an error naming the call, before keras-hub's pipeline sees
    either; so is None, a number, a nested list or a list holding
    something other than strings (`zoo.data.text.text_batch`); `fit`
    reshuffles arrays every epoch, as `keras.Model.fit` does (keras-hub's
    tasks turn them into a dataset in order). Datasets pass through
    unchanged. `text_segments` (a class attribute): whether a tuple is
    segments of a pair (BERT's tasks), not a batch.

    A `keras.utils.PyDataset` is taken as model input already preprocessed
    (e.g. `zoo.data.masked_lm.MaskedLMBatches`, `zoo.data.corpus.
    TokenWindows`): `fit` and `evaluate` hand it to `keras.Model`'s, in its
    own order, with no TensorFlow pipeline; `validation_data` must then be
    one too.
    """

    text_segments = False

    def fit(
        self,
        x=None,
        y=None,
        batch_size=None,
        sample_weight=None,
        shuffle=True,
        validation_split=None,
        validation_data=None,
        **kwargs,
    ):
        if isinstance(x, keras.utils.PyDataset):
            # Keras refuses y, batch_size or sample_weight beside it.
            return keras.Model.fit(
                self,
                x,
                y,
                batch_size=batch_size,
                sample_weight=sample_weight,
                shuffle=False,
                validation_split=validation_split,
                validation_data=validation_data,
                **kwargs,
            )
        x = text_batch(x, "fit", self.text_segments)
        if validation_data is None:  # held out before x becomes a dataset
            (x, y, sample_weight), validation_data = split_validation_arrays(
                x, y, sample_weight, validation_split
            )
        x, y, sample_weight, batch_size = fit_dataset(
            x, y, sample_weight, batch_size, shuffle
        )
        return super().fit(
            x,
            y,
            batch_size=batch_size,
            sample_weight=sample_weight,
            shuffle=False,
            validation_data=validation_data,
            **kwargs,
        )

    def evaluate(self, x=None, y=None, *args, **kwargs):
        if isinstance(x, keras.utils.PyDataset):
            return keras.Model.evaluate(self, x, *args, **kwargs)
        return super().evaluate(
            text_batch(x, "evaluate", self.text_segments), y, *args, **kwargs
        )

    def predict(self, x, *args, **kwargs):
        return super().predict(
            text_batch(x, "predict", self.text_segments), *args, **kwargs
        )
