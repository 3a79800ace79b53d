"""The masked language model: BERT's pretraining task, and `fill_mask`."""

import keras
import keras_hub
import numpy as np

from zoo.data.text import excerpt, text_batch
from zoo.export import ServingExportMixin
from zoo.models.arguments import (
    check_integer,
    check_model_kwargs,
    check_preprocessor_fits,
    check_vocabulary_fits,
)
from zoo.models.bert.bert_backbone import BertBackbone, bert_kernel_initializer
from zoo.models.bert.bert_masked_lm_head import MaskedLMHead
from zoo.models.bert.bert_preprocessor import (
    BertMaskedLMPreprocessor,
    strip_markup,
)
from zoo.models.bert.bert_presets import PRESETS
from zoo.models.jax_state import KeepsWeightsOnError
from zoo.models.portable import PortableCompileConfig
from zoo.models.presets import TaskFromPreset
from zoo.models.raw_text import RawTextMixin


@keras.saving.register_keras_serializable(package="zoo")
class BertMaskedLM(
    TaskFromPreset,
    ServingExportMixin,
    KeepsWeightsOnError,
    RawTextMixin,
    PortableCompileConfig,
    keras_hub.models.MaskedLM,
):
    """Predicts masked tokens from both sides: BERT's pretraining task.

    The head is keras-hub's `MaskedLMHead` (`bert_masked_lm_head`): the hidden state at each masked
    position goes through a dense layer, GELU and LayerNorm, then the
    transposed token embedding of the backbone (one shared variable) plus a
    bias gives vocabulary logits. Logits are computed at the masked
    positions only. `fit` takes raw strings; the preprocessor masks them
    inside `tf.data`, anew each epoch.

    Args:
        backbone: a `BertBackbone`.
        preprocessor: a `BertMaskedLMPreprocessor`, or None to feed its
            outputs directly.

    Call arguments:
        inputs: `{"token_ids", "segment_ids", "padding_mask"}` each `(batch,
            seq)` and `"mask_positions"` `(batch, n_masks)`.

    Returns:
        Logits `(batch, n_masks, vocabulary_size)`, float32.

    Example:

    >>> from zoo.data.tokenizers import train_bert_tokenizer
    >>> texts = ["this movie was really good", "a waste of two hours"]
    >>> tokenizer = train_bert_tokenizer(texts, vocabulary_size=100)
    >>> preprocessor = BertMaskedLMPreprocessor(tokenizer, sequence_length=16)
    >>> mlm = BertMaskedLM.from_preset("smoke", preprocessor=preprocessor)
    >>> mlm.compile()
    >>> history = mlm.fit(texts, epochs=1, verbose=0)
    >>> guesses = mlm.fill_mask("this movie was [MASK] good", top_k=3)
    >>> len(guesses), len(guesses[0])  # untrained: the words are random
    (1, 3)

    Pre-trained on a real corpus (the "cpu_mini" preset, a vocabulary of
    8000), the guesses read:

    >>> mlm.fill_mask("this movie was [MASK] good", top_k=3)  # doctest: +SKIP
    [[('really', 0.41), ('very', 0.22), ('so', 0.09)]]
    """

    # `zoo.export`: `fill_mask` is the export's signature (and default).
    exports_predict = False
    exports_generate = "masked_lm"
    text_segments = True  # a tuple of batches is segments (RawTextMixin)

    backbone_cls = BertBackbone
    preprocessor_cls = BertMaskedLMPreprocessor
    # `from_preset(preset, preprocessor=..., **overrides)`: fresh weights
    # (`zoo.models.bert.PRESETS`); `backbone_` overrides go to
    # `BertBackbone.from_preset`, the others, over the preset's task
    # section's "masked_lm", to the task.
    _presets = PRESETS
    preset_subsection = "masked_lm"

    def __init__(self, backbone, preprocessor=None, **kwargs):
        # === Layers ===
        self.backbone = backbone
        self.preprocessor = preprocessor
        check_preprocessor_fits(
            self, backbone.max_sequence_length, "max_sequence_length"
        )
        check_vocabulary_fits(self, backbone.vocabulary_size)
        self.masked_lm_head = MaskedLMHead(
            vocabulary_size=backbone.vocabulary_size,
            token_embedding=backbone.token_embedding,
            intermediate_activation="gelu",
            kernel_initializer=bert_kernel_initializer(),
            dtype=backbone.dtype_policy,
            name="mlm_head",
        )
        self.logits_dtype = keras.layers.Activation(
            "linear", dtype="float32", name="logits"
        )

        # === Functional model ===
        inputs = {
            **backbone.input,
            "mask_positions": keras.Input(
                (None,), dtype="int32", name="mask_positions"
            ),
        }
        sequence_output = backbone(backbone.input)["sequence_output"]
        logits = self.masked_lm_head(sequence_output, inputs["mask_positions"])
        check_model_kwargs(self, kwargs)
        super().__init__(
            inputs=inputs, outputs=self.logits_dtype(logits), **kwargs
        )

    def compile(
        self,
        optimizer="auto",
        loss="auto",
        *,
        weighted_metrics="auto",
        **kwargs,
    ):
        """keras-hub's `MaskedLM.compile`: cross-entropy on the logits and
        accuracy, both weighted to the real masked positions; AdamW (5e-4,
        weight decay 0.01) by default.

        The default loss is the mean cross-entropy per masked token
        (`reduction="mean_with_sample_weight"`). keras-hub's divides the
        weighted sum by every one of the `mask_selection_length` slots,
        the empty ones too, which reports a loss smaller by the share of
        empty slots (about a third at BERT's 15% of 256 tokens in 48
        slots); the gradients differ by that factor only."""
        if optimizer == "auto":
            optimizer = keras.optimizers.AdamW(5e-4, weight_decay=0.01)
        if loss == "auto":
            loss = keras.losses.SparseCategoricalCrossentropy(
                from_logits=True, reduction="mean_with_sample_weight"
            )
        super().compile(
            optimizer=optimizer,
            loss=loss,
            weighted_metrics=weighted_metrics,
            **kwargs,
        )

    def fill_mask(self, texts, top_k=5):
        """The most likely tokens for each `[MASK]` in each text.

        Args:
            texts: a string or a list of strings, each with at least one
                `[MASK]` within the first `sequence_length - 2` tokens.
            top_k: how many candidates per mask.

        Returns:
            For each text, a list with one entry per `[MASK]` (left to
            right): `top_k` `(token, probability)` pairs, most likely first.
            A lone string gives that text's list.

        Raises:
            ValueError: no texts, a text without `[MASK]` (or with its masks
                cut off by the length; the message quotes its first 60
                characters), or `top_k` out of range.
            TypeError: None, a number, or a list holding something other
                than strings.

        Warns:
            UserWarning: texts with no token in the vocabulary besides
                their masks (only emoji, say), once per call.
        """
        if self.preprocessor is None:
            raise ValueError(
                "This BertMaskedLM has no preprocessor, so it "
                "cannot read strings."
            )
        scalar = isinstance(texts, (str, bytes))
        texts = [strip_markup(t) for t in text_batch(texts, "fill_mask")]
        tokenizer = self.preprocessor.tokenizer
        top_k = check_integer(
            "top_k",
            top_k,
            1,
            int(tokenizer.vocabulary_size()),
            "the vocabulary's size",
        )
        length = int(self.preprocessor.sequence_length)
        mask_id = int(tokenizer.mask_token_id)
        rows, positions = [], []
        for text in texts:
            ids = [int(i) for i in np.asarray(tokenizer(text)).reshape(-1)]
            ids = ids[: length - 2]
            row = [
                int(tokenizer.cls_token_id),
                *ids,
                int(tokenizer.sep_token_id),
            ]
            where = [i for i, token in enumerate(row) if token == mask_id]
            if not where:
                raise ValueError(
                    f"fill_mask: {excerpt(text)} has no [MASK] token "
                    f"within its first {length - 2} tokens."
                )
            rows.append(
                row + [int(tokenizer.pad_token_id)] * (length - len(row))
            )
            positions.append(where)
        self._warn_unknown_texts(texts, "fill_mask", stacklevel=3)
        most = max(len(p) for p in positions)
        token_ids = np.array(rows, "int32")
        mask_positions = np.array(
            [p + [0] * (most - len(p)) for p in positions], "int32"
        )
        # The inputs are ids already: Keras' predict_on_batch, not the
        # Task's (which would run the masking preprocessor on them).
        logits = keras.Model.predict_on_batch(
            self,
            {
                "token_ids": token_ids,
                "segment_ids": np.zeros_like(token_ids),
                "padding_mask": token_ids != int(tokenizer.pad_token_id),
                "mask_positions": mask_positions,
            },
        )
        logits = np.asarray(logits, "float64")
        probabilities = np.exp(logits - logits.max(-1, keepdims=True))
        probabilities /= probabilities.sum(-1, keepdims=True)
        out = []
        for row, where in zip(probabilities, positions):
            per_mask = []
            for p in row[: len(where)]:
                best = np.argsort(-p)[: int(top_k)]
                per_mask.append(
                    [
                        (str(tokenizer.id_to_token(int(i))), float(p[i]))
                        for i in best
                    ]
                )
            out.append(per_mask)
        return out[0] if scalar else out
