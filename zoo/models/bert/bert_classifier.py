"""The BERT classifier: a (pretrained) `BertBackbone`'s pooled [CLS] vector
-> class probabilities, fine-tuned end to end on raw strings."""

import keras
import keras_hub

from zoo.export import ServingExportMixin
from zoo.models.arguments import (
    check_model_kwargs,
    check_preprocessor_fits,
    check_vocabulary_fits,
)
from zoo.models.bert.bert_backbone import BertBackbone, bert_kernel_initializer
from zoo.models.bert.bert_preprocessor import BertClassifierPreprocessor
from zoo.models.bert.bert_presets import PRESETS
from zoo.models.jax_state import KeepsWeightsOnError
from zoo.models.labels import ClassLabelsMixin
from zoo.models.portable import PortableCompileConfig
from zoo.models.presets import TaskFromPreset
from zoo.models.raw_text import RawTextMixin
from zoo.saving import load_model, register_alias


@keras.saving.register_keras_serializable(package="zoo")
class BertTextClassifier(
    ClassLabelsMixin,
    TaskFromPreset,
    ServingExportMixin,
    KeepsWeightsOnError,
    RawTextMixin,
    PortableCompileConfig,
    keras_hub.models.TextClassifier,
):
    """Raw text in, class probabilities out: BERT preprocessor, backbone,
    dropout and a dense head on the pooled [CLS] vector.

    `fit` and `evaluate` check the labels before anything runs
    (`zoo.models.labels.ClassLabelsMixin`): 0 or 1 (or a probability between
    them) for one class, class ids 0..num_classes - 1 for more; labels
    outside the classes, NaN, strings, or not one label per example are one
    error line. A `tf.data` dataset is checked by its `element_spec` only
    (labels present, not strings); its values are not read.

    Args:
        backbone: a `BertBackbone`, fresh or pretrained (see
            `from_pretrained`).
        preprocessor: a `BertClassifierPreprocessor`, or None to feed token
            ids directly.
        num_classes: 1 (default) for a binary task, whose output is the
            probability of the positive class; more for a softmax.
        dropout: dropout on the pooled vector.

    Call arguments:
        inputs: `{"token_ids", "segment_ids", "padding_mask"}`, each
            `(batch, seq)`.

    Returns:
        `(batch, 1)` probabilities of the positive class, or `(batch,
        num_classes)` class probabilities; float32.

    Example:

    >>> from zoo.data.tokenizers import train_bert_tokenizer
    >>> from zoo.models.bert.bert_masked_lm import BertMaskedLM
    >>> from zoo.models.bert.bert_preprocessor import BertMaskedLMPreprocessor
    >>> texts = ["an utterly wonderful film", "a waste of two hours"]
    >>> tokenizer = train_bert_tokenizer(texts, vocabulary_size=100)
    >>> mlm = BertMaskedLM.from_preset(
    ...     "smoke", preprocessor=BertMaskedLMPreprocessor(tokenizer, 16))
    >>> classifier = BertTextClassifier.from_pretrained(mlm)
    >>> classifier.compile()
    >>> history = classifier.fit(texts, [1, 0], epochs=1, verbose=0)
    >>> classifier.predict(texts, verbose=0).shape
    (2, 1)

    `predict` warns, once per call, when texts have no WordPiece token in
    the vocabulary (only emoji, say), and `unknown_token_share(texts)`
    gives each text's share of `[UNK]` tokens.

    Fine-tuned from the shipped `saved_models/bert_imdb_mlm.keras` on IMDB
    (not run here: it needs the data set), the probabilities read:

    >>> classifier.predict(texts)  # doctest: +SKIP
    array([[0.98], [0.02]], dtype=float32)
    """

    text_segments = True  # a tuple of batches is a pair (RawTextMixin)
    backbone_cls = BertBackbone
    preprocessor_cls = BertClassifierPreprocessor
    # `from_preset(preset, preprocessor=..., **overrides)`: fresh weights
    # (`zoo.models.bert.PRESETS`); `backbone_` overrides go to
    # `BertBackbone.from_preset`, the others, over the preset's task
    # section's "classifier", to the task.
    _presets = PRESETS
    preset_subsection = "classifier"

    def __init__(
        self, backbone, preprocessor=None, num_classes=1, dropout=0.1, **kwargs
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
        check_preprocessor_fits(
            self, backbone.max_sequence_length, "max_sequence_length"
        )
        check_vocabulary_fits(self, backbone.vocabulary_size)
        self.output_dropout = keras.layers.Dropout(
            dropout, dtype=backbone.dtype_policy, name="pooled_dropout"
        )
        # The head stays float32 under mixed precision.
        self.output_dense = keras.layers.Dense(
            num_classes,
            activation="sigmoid" if num_classes == 1 else "softmax",
            kernel_initializer=bert_kernel_initializer(),
            dtype="float32",
            name="classifier",
        )

        # === Functional model ===
        inputs = backbone.input
        pooled = backbone(inputs)["pooled_output"]
        outputs = self.output_dense(self.output_dropout(pooled))
        # keras_hub.models.TextClassifier.__init__ builds nothing itself.
        check_model_kwargs(self, kwargs)
        keras_hub.models.Task.__init__(
            self, inputs=inputs, outputs=outputs, **kwargs
        )

    @classmethod
    def from_pretrained(
        cls,
        masked_lm,
        sequence_length=None,
        dtype=None,
        truncate="round_robin",
        head_length=None,
        **kwargs,
    ):
        """A classifier on a pretrained masked LM's backbone, with a new
        head.

        Args:
            masked_lm: a `BertMaskedLM`, or the path of its `.keras` file.
            sequence_length: the classifier's packed length (default: the
                backbone's `max_sequence_length`).
            dtype: the dtype policy to fine-tune in (e.g. "mixed_bfloat16");
                default: the masked LM's. A loaded model keeps the policy
                it was saved with, whatever the global one.
            truncate, head_length: how the preprocessor cuts a long text
                (see `BertClassifierPreprocessor`).
            **kwargs: `num_classes`, `dropout`, ...

        The backbone is the masked LM's own object (its weights, shared, not
        copied again), or, where `dtype` asks for another policy, a copy of
        it in that policy; the tokenizer is the masked LM's.

        Example:

        >>> from zoo.data.tokenizers import train_bert_tokenizer
        >>> from zoo.models.bert.bert_masked_lm import BertMaskedLM
        >>> from zoo.models.bert.bert_preprocessor import (
        ...     BertMaskedLMPreprocessor)
        >>> tokenizer = train_bert_tokenizer(["a waste of two hours"], 100)
        >>> mlm = BertMaskedLM.from_preset(
        ...     "smoke", preprocessor=BertMaskedLMPreprocessor(tokenizer, 16))
        >>> mlm.save("bert_mlm.keras")
        >>> classifier = BertTextClassifier.from_pretrained(
        ...     "bert_mlm.keras", num_classes=1, dtype="mixed_bfloat16")
        >>> classifier.dtype_policy.name
        'mixed_bfloat16'
        """
        if isinstance(masked_lm, str):
            masked_lm = load_model(masked_lm)
        backbone = getattr(masked_lm, "backbone", None)
        if not isinstance(backbone, BertBackbone):
            raise ValueError(
                f"from_pretrained needs a BertMaskedLM (or its file); got "
                f"{type(masked_lm).__name__}."
            )
        if masked_lm.preprocessor is None:
            raise ValueError(
                "The masked LM has no preprocessor, so there is "
                "no tokenizer to classify text with."
            )
        if dtype is not None and (
            keras.dtype_policies.get(dtype).name != backbone.dtype_policy.name
        ):
            pretrained = backbone
            backbone = BertBackbone.from_config(
                {**pretrained.get_config(), "dtype": dtype}
            )
            backbone.set_weights(pretrained.get_weights())
        preprocessor = BertClassifierPreprocessor(
            masked_lm.preprocessor.tokenizer,
            sequence_length=sequence_length or backbone.max_sequence_length,
            truncate=truncate,
            head_length=head_length,
        )
        return cls(backbone, preprocessor, **kwargs)

    def compile(
        self, optimizer="auto", loss="auto", *, metrics="auto", **kwargs
    ):
        """Binary (one class) or sparse categorical cross-entropy on the
        probabilities, accuracy, and AdamW (5e-5, weight decay 0.01) by
        default."""
        if optimizer == "auto":
            optimizer = keras.optimizers.AdamW(5e-5, weight_decay=0.01)
        if loss == "auto":
            loss = (
                "binary_crossentropy"
                if self.num_classes == 1
                else "sparse_categorical_crossentropy"
            )
        if metrics == "auto":
            metrics = ["accuracy"]
        keras_hub.models.Task.compile(
            self, optimizer=optimizer, loss=loss, metrics=metrics, **kwargs
        )

    def get_config(self):
        config = super().get_config()
        config.update(
            {"num_classes": self.num_classes, "dropout": self.dropout}
        )
        return config


# The zoo's earlier name: code that imports it and files saved with it.
BertClassifier = register_alias(BertTextClassifier, "BertClassifier")
