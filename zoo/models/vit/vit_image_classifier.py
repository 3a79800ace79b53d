"""The ViT image classifier: raw images -> class probabilities."""

import keras
import keras_hub

from zoo.export import ServingExportMixin
from zoo.models.arguments import check_model_kwargs
from zoo.models.jax_state import KeepsWeightsOnError
from zoo.models.labels import ClassLabelsMixin
from zoo.models.losses import SparseCategoricalCrossentropyWithSmoothing
from zoo.models.portable import PortableCompileConfig
from zoo.models.presets import TaskFromPreset, split_backbone_overrides
from zoo.models.raw_text import RawInputMixin
from zoo.models.vit.vit_backbone import ViTBackbone
from zoo.models.vit.vit_preprocessor import ViTImageClassifierPreprocessor
from zoo.models.vit.vit_presets import PRESETS


class RawImagesMixin(RawInputMixin):
    """`fit`, `evaluate` and `predict` on raw images for a task with an
    image preprocessor (`check_images`): a bad batch, None included, is one
    clear error before `tf.data` sees it; `fit` checks `validation_data`'s
    images the same way, reshuffles arrays every epoch and holds out
    `validation_split` as `keras.Model.fit` does (`RawInputMixin`)."""

    def _checked(self, x):
        if self.preprocessor is not None:
            self.preprocessor.check_images(x)
        return x

    def _raw_input(self, x, y, method):
        return self._checked(x), y

    def predict(self, x, *args, **kwargs):
        return super().predict(self._checked(x), *args, **kwargs)


@keras.saving.register_keras_serializable(package="zoo")
class ViTImageClassifier(
    ClassLabelsMixin,
    TaskFromPreset,
    ServingExportMixin,
    KeepsWeightsOnError,
    RawImagesMixin,
    PortableCompileConfig,
    keras_hub.models.Task,
):
    """Raw images in, class probabilities out: preprocessor, `ViTBackbone`,
    dropout and a dense softmax head on the pooled vector.

    `fit` and `evaluate` check the labels before anything runs
    (`zoo.models.labels.ClassLabelsMixin`): class ids 0..num_classes - 1
    (rows of class probabilities only with a categorical loss); labels
    outside the classes, NaN, strings, or not one label per example are one
    error line. A `tf.data` dataset is checked by its `element_spec` only
    (labels present, not strings); its values are not read.

    Args:
        backbone: a `ViTBackbone`.
        preprocessor: a `ViTImageClassifierPreprocessor` (in the `.keras`
            file), or None to feed float images directly.
        num_classes: number of classes.
        dropout: dropout on the pooled vector.

    Call arguments:
        images: `(batch, height, width, channels)` float images in [0, 1]
            (what the preprocessor gives).

    Returns:
        `(batch, num_classes)` class probabilities, float32.

    Example (the "smoke" preset reads 8 x 8 grey images; "mnist" is the
    same at 28 x 28):

    >>> classifier = ViTImageClassifier.from_preset("smoke", num_classes=10)
    >>> uint8_images = np.zeros((4, 8, 8, 1), "uint8")
    >>> labels = np.array([0, 1, 2, 3])
    >>> history = classifier.fit(uint8_images, labels, epochs=1, verbose=0)
    >>> classifier.predict(uint8_images[:2], verbose=0).shape
    (2, 10)
    """

    backbone_cls = ViTBackbone
    preprocessor_cls = ViTImageClassifierPreprocessor
    # `from_preset(preset, **overrides)`: a fresh classifier of the preset
    # (`zoo.models.vit.PRESETS`); `backbone_` overrides go to the backbone.
    # Without a `preprocessor`, one for the backbone's image size and
    # channels (`preprocessor=None`: none, float images in).
    _presets = PRESETS
    preset_requires = {}

    def __init__(
        self, backbone, preprocessor=None, num_classes=10, dropout=0.0, **kwargs
    ):
        num_classes = int(num_classes)
        if num_classes < 2:
            raise ValueError(f"num_classes must be >= 2; got {num_classes}.")
        self.num_classes = num_classes
        self.dropout = dropout
        self.backbone = backbone
        self.preprocessor = preprocessor
        self.output_dropout = keras.layers.Dropout(
            dropout, dtype=backbone.dtype_policy, name="pooled_dropout"
        )
        self.output_dense = keras.layers.Dense(
            num_classes,
            activation="softmax",
            dtype="float32",
            name="predictions",
        )
        inputs = backbone.input
        pooled = backbone(inputs)["pooled_output"]
        outputs = self.output_dense(self.output_dropout(pooled))
        check_model_kwargs(self, kwargs)
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)

    @classmethod
    def _from_preset(cls, preset, **overrides):
        backbone_overrides, task_overrides = split_backbone_overrides(overrides)
        backbone = ViTBackbone.from_preset(preset, **backbone_overrides)
        if "preprocessor" not in task_overrides:
            task_overrides["preprocessor"] = ViTImageClassifierPreprocessor(
                backbone.image_size, backbone.num_channels
            )
        task = {**cls.preset_part(preset, "task"), **task_overrides}
        return cls(backbone, **task)

    def compile(
        self,
        optimizer="auto",
        loss="auto",
        *,
        metrics="auto",
        label_smoothing=0.0,
        **kwargs,
    ):
        """Sparse categorical cross-entropy on the probabilities (with
        `label_smoothing`), accuracy, AdamW (1e-3, weight decay 0.05) by
        default."""
        if optimizer == "auto":
            optimizer = keras.optimizers.AdamW(1e-3, weight_decay=0.05)
        if loss == "auto":
            loss = SparseCategoricalCrossentropyWithSmoothing(
                label_smoothing, from_logits=False
            )
        if metrics == "auto":
            metrics = ["sparse_categorical_accuracy"]
        super().compile(
            optimizer=optimizer, loss=loss, metrics=metrics, **kwargs
        )

    def rollout_maps(self, images):
        """Attention rollout of the pooled vector (the class token, or the
        average or sequence pooling) over the patches, as `(batch,
        grid_rows, grid_columns)` maps summing to 1 (images are raw, as
        `predict` takes them)."""
        x = (
            self.preprocessor(self._checked(images))
            if self.preprocessor
            else images
        )
        maps = keras.ops.convert_to_numpy(self.backbone.rollout(x))
        maps = maps / maps.sum(-1, keepdims=True)
        return maps.reshape((-1,) + tuple(self.backbone.grid_size))

    def get_config(self):
        config = super().get_config()
        config.update(
            {"num_classes": self.num_classes, "dropout": self.dropout}
        )
        return config
