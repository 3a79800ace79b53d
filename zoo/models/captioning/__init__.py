"""Image captioning with visual attention (Show, Attend and Tell): image
encoders (EfficientNet-Lite0 trained on ImageNet, a convolutional stack
trained from scratch, `keras.applications` models, precomputed grids), the
attention-LSTM and Transformer backbones, the `ImageCaptioner` task and its
preprocessor (raw images in), and presets."""

from zoo.models.captioning.captioning_backbone import (
    CaptioningBackbone,
    ShowAttendTellBackbone,
    TransformerCaptionBackbone,
    image_encoder_from_config,
)
from zoo.models.captioning.captioning_presets import PRESETS
from zoo.models.captioning.image_captioner import ImageCaptioner
from zoo.models.captioning.image_captioner_preprocessor import (
    ImageCaptionerPreprocessor,
)
from zoo.models.captioning.image_encoders import (
    ConvStackEncoder,
    EfficientNetLiteEncoder,
    FeatureGridInput,
    KerasApplicationsEncoder,
)
