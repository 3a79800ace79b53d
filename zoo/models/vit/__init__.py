"""Vision Transformer: patches, a class token and learned positions through
pre-LN encoder blocks (`ViTBackbone`), the image classifier task and its
preprocessor (raw uint8 images in), attention rollout, and presets."""

from zoo.models.vit.vit_backbone import ViTBackbone, attention_rollout
from zoo.models.vit.vit_image_classifier import ViTImageClassifier
from zoo.models.vit.vit_preprocessor import ViTImageClassifierPreprocessor
from zoo.models.vit.vit_presets import PRESETS
