"""ImageGPT: a GPT over quantised pixels (backbone, causal-LM task,
preprocessor, presets, linear probe)."""

from zoo.models.imagegpt.imagegpt_causal_lm import (
    ImageGPTBackbone,
    ImageGPTCausalLM,
)
from zoo.models.imagegpt.imagegpt_preprocessor import (
    ImageGPTPreprocessor,
    kmeans_palette,
    raster,
    uniform_palette,
    unraster,
)
from zoo.models.imagegpt.imagegpt_presets import PRESETS
from zoo.models.imagegpt.linear_probe import linear_probe
