"""Every backbone and task refuses a keyword argument it does not take
(Keras' functional `Model` would ignore it: a misspelt size would build the
preset's model without a word), and still takes what Keras and a saved
file pass (`name`, `trainable`, `dtype`; a task's `compile`)."""

import keras
import pytest

from zoo.models import bert, gpt, seq2seq, text_classifier, vit
from zoo.models.arguments import check_model_kwargs

VOCAB = 50


def backbones():
    return {
        # The constructors themselves (`from_preset` checks its overrides
        # before them: tests/models/test_presets.py).
        "gpt": lambda **kw: gpt.GPTBackbone(
            VOCAB, **gpt.PRESETS.part("smoke", "backbone"), **kw
        ),
        "bert": lambda **kw: bert.BertBackbone(
            VOCAB, **bert.PRESETS.part("smoke", "backbone"), **kw
        ),
        "vit": lambda **kw: vit.ViTBackbone(
            **vit.PRESETS.part("smoke", "backbone"), **kw
        ),
        "transformer_seq2seq": lambda **kw: seq2seq.TransformerSeq2SeqBackbone(
            VOCAB,
            num_layers=1,
            num_heads=2,
            hidden_dim=8,
            intermediate_dim=8,
            **kw,
        ),
        "rnn_seq2seq": lambda **kw: seq2seq.RNNSeq2SeqBackbone(
            VOCAB,
            embedding_dim=8,
            encoder_units=4,
            decoder_units=8,
            attention_units=4,
            **kw,
        ),
        "mean": lambda **kw: text_classifier.MeanPoolingBackbone(VOCAB, **kw),
        "attention": lambda **kw: text_classifier.AttentionPoolingBackbone(
            VOCAB, **kw
        ),
        "rnn": lambda **kw: text_classifier.RecurrentAttentionBackbone(
            VOCAB, **kw
        ),
        "transformer": lambda **kw: text_classifier.TransformerEncoderBackbone(
            VOCAB, sequence_length=8, **kw
        ),
    }


TASKS = {
    "gpt": (gpt.GPT, "gpt"),
    "bert_masked_lm": (bert.BertMaskedLM, "bert"),
    "bert_classifier": (bert.BertClassifier, "bert"),
    "vit": (vit.ViTImageClassifier, "vit"),
    "translator": (seq2seq.Translator, "transformer_seq2seq"),
    "text_classifier": (text_classifier.TextClassifier, "mean"),
}


@pytest.mark.parametrize("name", sorted(backbones()))
def test_backbones_refuse_unknown_arguments(name):
    build = backbones()[name]
    with pytest.raises(
        TypeError,
        match=r"got an unexpected keyword argument "
        r"'hiden_dim'; it takes .*dtype, name, "
        r"trainable\.",
    ):
        build(hiden_dim=8)
    backbone = build(name="mine", trainable=False, dtype="float32")
    assert (backbone.name, backbone.trainable) == ("mine", False)
    # What its config holds goes back in.
    again = type(backbone).from_config(backbone.get_config())
    assert again.count_params() == backbone.count_params()


@pytest.mark.parametrize("name", sorted(TASKS))
def test_tasks_refuse_unknown_arguments(name):
    cls, backbone_name = TASKS[name]
    backbone = backbones()[backbone_name]()
    with pytest.raises(
        TypeError,
        match=f"{cls.__name__} got unexpected "
        r"keyword arguments 'numclasses', "
        r"'drop'; it takes backbone, "
        r"preprocessor.*compile\.",
    ):
        cls(backbone, numclasses=3, drop=0.1)
    task = cls(backbone, name="task", compile=False)
    assert task.name == "task" and not task.compiled


def test_the_message_lists_what_a_subclass_takes():
    class Plain(keras.Model):
        def __init__(self, width=3, **kwargs):
            check_model_kwargs(self, kwargs)
            super().__init__(**kwargs)

    with pytest.raises(
        TypeError,
        match=r"Plain got an unexpected keyword "
        r"argument 'widht'; it takes width, "
        r"name, trainable, dtype\.",
    ):
        Plain(widht=4)
    Plain(width=4, name="plain")
