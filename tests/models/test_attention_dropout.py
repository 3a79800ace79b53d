"""`attention_dropout` in every Transformer backbone: it reaches each
block's attention (apart from the residual `dropout`), survives the config,
and a config saved before it existed means the same as `dropout`."""

import pytest

from zoo.models.bert import BertBackbone
from zoo.models.gpt import GPTBackbone
from zoo.models.seq2seq import TransformerSeq2SeqBackbone
from zoo.models.vit import ViTBackbone

SMALL = dict(num_layers=2, num_heads=2, hidden_dim=16, intermediate_dim=32)
BACKBONES = {
    "gpt": lambda **k: GPTBackbone(40, sequence_length=8, **SMALL, **k),
    "bert": lambda **k: BertBackbone(40, max_sequence_length=8, **SMALL, **k),
    "vit": lambda **k: ViTBackbone(
        image_size=(8, 8), patch_size=4, **SMALL, **k
    ),
    "seq2seq": lambda **k: TransformerSeq2SeqBackbone(
        40, encoder_sequence_length=8, decoder_sequence_length=8, **SMALL, **k
    ),
}


def _blocks(backbone):
    return getattr(backbone, "transformer_layers", None) or (
        backbone.encoder_layers + backbone.decoder_layers
    )


def _attention_rates(backbone):
    rates = []
    for block in _blocks(backbone):
        rates.append(block._self_attention_layer.dropout)
        cross = getattr(block, "_cross_attention_layer", None)
        if cross is not None:
            rates.append(cross.dropout)
    return rates


@pytest.mark.parametrize("family", sorted(BACKBONES))
def test_attention_dropout_reaches_every_block_and_the_config(family):
    backbone = BACKBONES[family](dropout=0.3, attention_dropout=0.0)
    assert backbone.attention_dropout == 0.0
    assert {block.dropout for block in _blocks(backbone)} == {0.3}
    assert set(_attention_rates(backbone)) == {0.0}
    config = backbone.get_config()
    assert config["attention_dropout"] == 0.0
    assert type(backbone).from_config(config).get_config() == config

    del config["attention_dropout"]  # as in a file saved before it existed
    older = type(backbone).from_config(config)
    assert older.attention_dropout == 0.3
    assert set(_attention_rates(older)) == {0.3}
