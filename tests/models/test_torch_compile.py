"""Under `torch.compile` nothing in the zoo splits a model's graph: the
input checks read no values while TorchDynamo traces, and attention asks
nothing of PyTorch per call. Before, each embedding and attention call split
it (with two blocks: 15 graphs for the GPT's forward pass, 11 for a decode
step, 14 for the ViT's).

Each kind of decoding step (the GPT's, the Transformer and RNN
translators', the LSTM captioner's) compiles with inductor once here, and
its tokens must equal eager decoding's; the tests of TorchDynamo's own
behaviour (graph counts under mixed precision, which model's graph and
weights a step uses) compile with `aot_eager` (the
`torch_compile_without_inductor` fixture), which traces the same graphs
without generating C++."""

import keras
import numpy as np
import pytest

from zoo.accelerator import compiling
from zoo.models.bert import BertBackbone
from zoo.models.gpt import GPT, GPTBackbone
from zoo.models.seq2seq import TransformerSeq2SeqBackbone
from zoo.models.vit import ViTBackbone

pytestmark = pytest.mark.skipif(
    keras.backend.backend() != "torch", reason="torch.compile: PyTorch only"
)
SMALL = dict(num_layers=1, num_heads=2, hidden_dim=16, intermediate_dim=32)


def _graphs(function, *args):
    """(graphs, break reasons) of `function(*args)` under TorchDynamo."""
    import torch

    function(*args)
    explained = torch._dynamo.explain(function)(*args)
    return explained.graph_count, [
        b.reason.splitlines()[0] for b in explained.break_reasons
    ]


def _ids_and_mask():
    import torch

    ids = torch.randint(1, 40, (2, 8))
    mask = torch.ones((2, 8), dtype=torch.int32)
    mask[1, 5:] = 0  # one padded row
    return ids, mask


def _forward(family):
    import torch

    ids, mask = _ids_and_mask()
    if family == "gpt":
        model = GPTBackbone(
            40, sequence_length=8, dropout=0.1, attention_dropout=0.0, **SMALL
        )
        inputs = {"token_ids": ids, "padding_mask": mask}
    elif family == "bert":
        model = BertBackbone(
            40, max_sequence_length=8, attention_dropout=0.0, **SMALL
        )
        inputs = {
            "token_ids": ids,
            "segment_ids": torch.zeros_like(ids),
            "padding_mask": mask,
        }
    elif family == "vit":  # no mask: the unmasked attention path
        model = ViTBackbone(image_size=(8, 8), patch_size=4, **SMALL)
        inputs = torch.rand(2, 8, 8, 1)
    else:
        model = TransformerSeq2SeqBackbone(
            40,
            encoder_sequence_length=8,
            decoder_sequence_length=8,
            attention_dropout=0.0,
            **SMALL,
        )
        inputs = {
            "encoder_token_ids": ids,
            "encoder_padding_mask": mask,
            "decoder_token_ids": ids,
            "decoder_padding_mask": mask,
        }
    return lambda: model(inputs, training=True)


@pytest.mark.parametrize("family", ["gpt", "bert", "vit", "seq2seq"])
def test_a_training_forward_pass_is_one_graph(family):
    assert _graphs(_forward(family)) == (1, [])


def test_one_graph_even_when_compiling_comes_first(monkeypatch):
    # The one-off probe of PyTorch's kernel (does it zero key-less rows?)
    # reads a value back; under torch.compile it must not run, or it splits
    # the graph (Keras' compiled training step went from 4 graphs to 20 and
    # hit the recompile limit when the probe came first).
    import torch

    from zoo.layers import attention_kernels as kernels

    monkeypatch.setattr(kernels, "_ZEROES_EMPTY_ROWS", {})
    forward = _forward("gpt")
    explained = torch._dynamo.explain(forward)()
    assert (explained.graph_count, len(explained.break_reasons)) == (1, 0)
    assert kernels._ZEROES_EMPTY_ROWS == {}  # not probed while tracing


def test_a_cached_decode_step_is_one_graph():
    gpt = GPT(GPTBackbone(40, sequence_length=16, **SMALL), preprocessor=None)
    steps = []
    step = gpt.call_with_cache
    gpt.call_with_cache = lambda *a: steps.append(a) or step(*a)
    gpt.generate(
        {
            "token_ids": np.ones((1, 12), "int32"),
            "padding_mask": np.arange(12)[None] < 6,
        },
        stop_token_ids=None,
    )
    assert len(steps) > 2
    assert _graphs(step, *steps[2]) == (1, [])


def _compiled_generation(generate):
    """(outputs, graphs, graph breaks) of `generate()` under TorchDynamo's
    counters."""
    import torch

    torch._dynamo.reset()
    counters = torch._dynamo.utils.counters
    counters.clear()
    outputs = generate()
    return (
        outputs,
        int(counters["stats"]["unique_graphs"]),
        sum(counters["graph_break"].values()),
    )


@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16"])
def test_jit_compile_compiles_the_decode_step_as_one_graph(policy, request):
    # The position moves every step; it stays a tensor inside the graph
    # (before: an int, and the step split into many graphs once it became
    # symbolic). float32 compiles with inductor and checks its tokens;
    # mixed_bfloat16 checks the graphs only, so TorchDynamo's alone.
    if policy != "float32":
        request.getfixturevalue("torch_compile_without_inductor")
    gpt = GPT(
        GPTBackbone(40, sequence_length=16, dtype=policy, **SMALL),
        preprocessor=None,
    )
    rng = np.random.default_rng(0)
    prompts = [
        {
            "token_ids": rng.integers(1, 40, (2, 16)).astype("int32"),
            "padding_mask": np.arange(16)[None] < np.array([[3], [6]]),
        }
        for _ in range(2)
    ]
    eager = [gpt.generate(dict(p), stop_token_ids=None) for p in prompts]
    gpt.compile(jit_compile=True)
    compiled, graphs, breaks = _compiled_generation(
        lambda: [gpt.generate(dict(p), stop_token_ids=None) for p in prompts]
    )
    assert (graphs, breaks) == (1, 0)  # one shape: one graph for both calls
    if policy == "float32":
        for a, b in zip(compiled, eager):
            np.testing.assert_array_equal(a["token_ids"], b["token_ids"])
    _, graphs, _ = _compiled_generation(
        lambda: gpt.generate(
            dict(prompts[0]), stop_token_ids=None, sampler="beam", num_beams=2
        )
    )
    assert graphs == 1
    gpt.compile(jit_compile=False)  # compile again: eager decoding
    _, graphs, _ = _compiled_generation(
        lambda: gpt.generate(dict(prompts[0]), stop_token_ids=None)
    )
    assert graphs == 0


def test_compiled_steps_of_models_that_differ_in_a_setting_stay_apart(
    torch_compile_without_inductor,
):
    # The two GPTs differ only in a setting (a constant in each graph, not
    # a tensor), and compiled steps leave out the guards on the layers
    # (zoo.accelerator.compile_function): each step must still run its own
    # model's graph, not the first one compiled for GPT.call_with_cache.
    import torch

    torch._dynamo.reset()
    ids = keras.ops.convert_to_tensor(np.arange(1, 13)[None].astype("int32"))
    cache = (keras.ops.zeros((1, 2, 12, 2, 8)),)
    steps, expected = [], []
    for epsilon in (1e-5, 2.0):
        keras.utils.set_random_seed(0)
        backbone = GPTBackbone(
            40, sequence_length=12, layer_norm_epsilon=epsilon, **SMALL
        )
        gpt = GPT(backbone, preprocessor=None)
        expected.append(
            keras.ops.convert_to_numpy(gpt.call_with_cache(ids, cache, 0)[0])
        )
        gpt.compile(jit_compile=True)
        steps.append(gpt.decode_function(gpt.call_with_cache))
    assert not np.allclose(expected[0], expected[1], atol=1e-3)
    for step, logits in [*zip(steps, expected), *zip(steps, expected)]:
        out = keras.ops.convert_to_numpy(step(ids, cache, 0)[0])
        np.testing.assert_allclose(out, logits, rtol=1e-4, atol=1e-5)


def test_compiled_gpts_decode_with_their_own_weights_call_after_call(
    torch_compile_without_inductor,
):
    # Same shapes, and no guards on the layers (compile_function): each
    # must still read its own model's weights (a graph that had them as
    # constants would not). Beam search from one prompt starts from a
    # broadcast cache (stride 0 across the beams), then a contiguous one.
    import torch

    torch._dynamo.reset()
    rng = np.random.default_rng(0)
    prompt = {
        "token_ids": rng.integers(1, 40, (1, 12)).astype("int32"),
        "padding_mask": np.arange(12)[None] < 4,
    }
    options = [{}, {"sampler": "beam", "num_beams": 2}]
    models, eager = [], []
    for seed in (0, 1):
        keras.utils.set_random_seed(seed)
        gpt = GPT(GPTBackbone(40, sequence_length=12, **SMALL), None)
        eager.append(
            [
                gpt.generate(dict(prompt), stop_token_ids=None, **o)
                for o in options
            ]
        )
        gpt.compile(jit_compile=True)
        models.append(gpt)
    assert not np.array_equal(
        eager[0][0]["token_ids"], eager[1][0]["token_ids"]
    )
    for _ in range(2):
        for gpt, expected in zip(models, eager):
            for o, e in zip(options, expected):
                out = gpt.generate(dict(prompt), stop_token_ids=None, **o)
                np.testing.assert_array_equal(out["token_ids"], e["token_ids"])


def test_a_step_torch_compile_cannot_build_decodes_eagerly(monkeypatch):
    # No C++ compiler for inductor, say: one warning, then the eager step.
    import warnings

    from zoo.models import generation

    def broken_compile(function):
        def compiled(*args):
            raise RuntimeError("InductorError: no working C++ compiler")

        return compiled

    monkeypatch.setattr(generation, "compile_function", broken_compile)
    gpt = GPT(GPTBackbone(40, sequence_length=16, **SMALL), preprocessor=None)
    prompt = {
        "token_ids": np.ones((1, 16), "int32"),
        "padding_mask": np.arange(16)[None] < 4,
    }
    eager = gpt.generate(dict(prompt), stop_token_ids=None)
    gpt.compile(jit_compile=True)
    with pytest.warns(RuntimeWarning, match="decoding eagerly") as caught:
        out = gpt.generate(dict(prompt), stop_token_ids=None)
    assert len([w for w in caught if "decoding eagerly" in str(w.message)]) == 1
    np.testing.assert_array_equal(out["token_ids"], eager["token_ids"])
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # no second warning
        again = gpt.generate(dict(prompt), stop_token_ids=None)
    np.testing.assert_array_equal(again["token_ids"], eager["token_ids"])


@pytest.mark.parametrize("kind", ["transformer", "rnn"])
def test_jit_compile_compiles_the_translators_decode_step(kind):
    from tests.models.seq2seq.test_translator import GERMAN, translator

    model = translator(kind)
    sources = GERMAN[:3]
    options = [{}, {"sampler": "beam", "num_beams": 3}]
    eager = [model.generate(sources, max_length=12, **o) for o in options]
    model.compile(jit_compile=True)
    compiled, graphs, breaks = _compiled_generation(
        lambda: [model.generate(sources, max_length=12, **o) for o in options]
    )
    assert compiled == eager
    assert (graphs, breaks) == (2, 0)  # greedy's batch and beam's


def test_jit_compile_compiles_the_captioners_decode_step():
    from tests.models.captioning.test_captioning import IMAGES, captioner

    model = captioner("lstm")  # the Transformer's step is the translator's
    options = [{}, {"sampler": "beam", "num_beams": 3}]
    eager = [model.generate(IMAGES[:3], **o) for o in options]
    model.compile(jit_compile=True)
    compiled, graphs, breaks = _compiled_generation(
        lambda: [model.generate(IMAGES[:3], **o) for o in options]
    )
    assert compiled == eager
    assert (graphs, breaks) == (2, 0)  # greedy's batch and beam's


def test_compiling_is_true_only_while_tracing():
    import torch

    assert torch.compile(lambda: compiling(), backend="eager")()
    assert not compiling()
