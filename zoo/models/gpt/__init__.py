"""GPT: a decoder-only Transformer language model (backbone, causal-LM task,
preprocessor, presets)."""

from zoo.models.gpt.gpt_backbone import GPTBackbone
from zoo.models.gpt.gpt_causal_lm import GPT, GPTCausalLM
from zoo.models.gpt.gpt_preprocessor import GPTPreprocessor
from zoo.models.gpt.gpt_presets import PRESETS
