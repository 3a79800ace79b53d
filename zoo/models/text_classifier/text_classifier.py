"""The text classifier task: a backbone's pooled vector -> class
probabilities, trained and used on raw strings."""

import keras
import keras_hub

from zoo.data.text import text_batch
from zoo.export import ServingExportMixin
from zoo.models.arguments import check_model_kwargs, check_vocabulary_fits
from zoo.models.jax_state import KeepsWeightsOnError
from zoo.models.labels import ClassLabelsMixin
from zoo.models.portable import PortableCompileConfig
from zoo.models.presets import TaskFromPreset, constructor_arguments
from zoo.models.raw_text import RawTextMixin, warn_unknown_texts
from zoo.models.text_classifier.text_classifier_backbones import (
    TextClassifierBackbone,
    attention_model,
)
from zoo.models.text_classifier.text_classifier_preprocessor import (
    TextClassifierPreprocessor,
)
from zoo.models.text_classifier.text_classifier_presets import PRESETS


@keras.saving.register_keras_serializable(package="zoo")
class TextClassifier(
    ClassLabelsMixin,
    TaskFromPreset,
    ServingExportMixin,
    KeepsWeightsOnError,
    RawTextMixin,
    PortableCompileConfig,
    keras_hub.models.Task,
):
    """Raw text in, class probabilities out: preprocessor, backbone, head.

    A keras-hub `Task`: `fit`, `evaluate` and `predict` run the preprocessor
    (strings -> word ids) inside `tf.data`, so they take raw strings under
    JAX, TensorFlow and PyTorch alike, and the saved `.keras` file holds the
    vocabulary. The head is dropout then a dense layer on the backbone's
    `pooled_output`, in float32 under mixed precision. Any backbone with a
    `pooled_output` fits, a pretrained one included.

    `fit` and `evaluate` check the labels before anything runs
    (`zoo.models.labels.ClassLabelsMixin`): 0 or 1 (or a probability between
    them) for one class, class ids 0..num_classes - 1 for more; labels
    outside the classes, NaN, strings, or not one label per example are one
    error line. A `tf.data` dataset is checked by its `element_spec` only
    (labels present, not strings); its values are not read.

    Args:
        backbone: a `TextClassifierBackbone` (or any backbone from word ids
            to a dict with `"pooled_output"`).
        preprocessor: a `TextClassifierPreprocessor`, or None to feed word
            ids directly.
        num_classes: 1 (default) for a binary task, whose output is the
            probability of the positive class; more for a softmax over
            classes.
        dropout: dropout on the pooled vector.

    Call arguments:
        token_ids: `(batch, seq)` word ids (when called directly).

    Returns:
        `(batch, 1)` probabilities of the positive class, or `(batch,
        num_classes)` class probabilities.

    Example (one training step on four reviews):

    >>> texts = ["a wonderful film", "a dull, boring film",
    ...          "wonderful acting", "far too long"]
    >>> labels = np.array([1, 0, 1, 0])
    >>> preprocessor = TextClassifierPreprocessor.from_preset("imdb_attention")
    >>> preprocessor.adapt(texts)
    >>> classifier = TextClassifier.from_preset(
    ...     "imdb_attention", preprocessor=preprocessor)
    >>> history = classifier.fit(texts, labels, epochs=1, verbose=0)
    >>> reviews = ["an utterly wonderful film", "a waste of two hours"]
    >>> classifier.predict(reviews, verbose=0).shape
    (2, 1)

    Trained on IMDB's 25,000 reviews (`recipes/imdb_attention.py`), the
    probabilities of a positive review read:

    >>> classifier.predict(reviews, verbose=0)  # doctest: +SKIP
    array([[0.97], [0.03]], dtype=float32)

    A text with no word in the vocabulary ("zzzz qqqq", a German review of
    an English-trained model, only emoji) gets a probability that reflects
    none of its words: `predict` and `attention_weights` warn, once per
    call, naming how many such texts there are, and
    `unknown_token_share(texts)` gives each text's share of unknown
    tokens. None, a number, a nested list or a 2-D array is one error
    naming what is expected.
    """

    backbone_cls = TextClassifierBackbone
    preprocessor_cls = TextClassifierPreprocessor
    # `from_preset(preset, preprocessor=..., **overrides)`: a fresh
    # classifier of the preset (`zoo.models.text_classifier.PRESETS`) for an
    # adapted preprocessor: the backbone's vocabulary (and a Transformer's
    # positions) follow it. `backbone_` overrides go to
    # `TextClassifierBackbone.from_preset`, the others, over the preset's
    # task section, to the task.
    _presets = PRESETS
    preset_requires = {
        "preprocessor": "the task takes its vocabulary from an adapted "
        "preprocessor, e.g. TextClassifierPreprocessor.from_preset("
        "{preset!r}) adapted on the training texts",
    }

    def __init__(
        self, backbone, preprocessor=None, num_classes=1, dropout=0.3, **kwargs
    ):
        num_classes = int(num_classes)
        if num_classes < 1:
            raise ValueError(f"num_classes must be >= 1; got {num_classes}.")
        # === Config (compile, called by the Task, reads num_classes) ===
        self.num_classes = num_classes
        self.dropout = dropout

        # === Layers ===
        self.backbone = backbone
        self.preprocessor = preprocessor
        check_vocabulary_fits(self, getattr(backbone, "vocabulary_size", None))
        self.output_dropout = keras.layers.Dropout(
            dropout, dtype=backbone.dtype_policy, name="pooled_dropout"
        )
        # The head stays float32 under mixed precision.
        self.output_dense = keras.layers.Dense(
            num_classes,
            activation="sigmoid" if num_classes == 1 else "softmax",
            dtype="float32",
            name="classifier",
        )

        # === Functional model ===
        token_ids = keras.Input((None,), dtype="int32", name="token_ids")
        pooled = backbone(token_ids)["pooled_output"]
        outputs = self.output_dense(self.output_dropout(pooled))
        check_model_kwargs(self, kwargs)
        super().__init__(inputs=token_ids, outputs=outputs, **kwargs)

    @classmethod
    def _backbone_defaults(cls, preset, preprocessor):
        defaults = {"vocabulary_size": preprocessor.vocabulary_size}
        backbone = cls.backbone_cls.preset_class(preset)
        if "sequence_length" in constructor_arguments(backbone):
            defaults["sequence_length"] = preprocessor.output_length
        return defaults

    def compile(
        self, optimizer="adam", loss="auto", metrics=("accuracy",), **kwargs
    ):
        """Keras' `compile`; `loss="auto"` is binary cross-entropy for one
        class and sparse categorical cross-entropy for more."""
        if loss == "auto":
            loss = (
                "binary_crossentropy"
                if self.num_classes == 1
                else "sparse_categorical_crossentropy"
            )
        metrics = None if metrics is None else list(metrics)
        super().compile(
            optimizer=optimizer, loss=loss, metrics=metrics, **kwargs
        )

    def attention_weights(self, texts, batch_size=64):
        """Attention weights `(n, seq)` and word ids `(n, seq)` for `texts`
        (a string or a list or 1-D array of strings); `(None, ids)` for a
        backbone without attention pooling. Warns, as `predict` does, when
        texts have no word in the vocabulary."""
        texts = list(text_batch(texts, "attention_weights"))
        token_ids = self.preprocessor.token_ids(texts)
        warn_unknown_texts(
            texts,
            self.preprocessor.unknown_share_of(token_ids),
            "attention_weights",
        )
        model = attention_model(self.backbone)
        if model is None:
            return None, token_ids
        weights = model.predict(token_ids, batch_size=batch_size, verbose=0)
        return weights, token_ids

    def get_config(self):
        config = super().get_config()
        config.update(
            {"num_classes": self.num_classes, "dropout": self.dropout}
        )
        return config
