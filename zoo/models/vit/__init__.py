"""Vision Transformer: patches, a class token and learned positions through
pre-LN encoder blocks (`ViTBackbone`), attention rollout, and presets."""

from zoo.models.vit.vit_backbone import ViTBackbone
from zoo.models.vit.vit_backbone import attention_rollout
from zoo.models.vit.vit_presets import PRESETS
