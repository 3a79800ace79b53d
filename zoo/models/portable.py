"""Task configs that load under every backend.

Keras records its *resolved* compile choices in a saved model:
`jit_compile=True` from "auto" (then torch.compile runs when the file is
loaded under PyTorch) and, under PyTorch, a torch-only optimizer class. A
`.keras` file saved under one backend must work under the others, so zoo's
tasks store portable choices instead, and leave out the backbone's own
compile settings, which using the model does not need.
"""

import keras


class PortableCompileConfig:
    """Mixin for keras-hub `Task`s with a `backbone` and a custom `compile`.

    Put it before the Keras class: `class GPT(PortableCompileConfig,
    keras_hub.models.CausalLM)`.
    """

    def get_config(self):
        config = super().get_config()
        config["backbone"].pop("compile_config", None)
        return config

    def get_compile_config(self):
        config = super().get_compile_config()
        if not config:
            return config
        config = dict(config, jit_compile="auto")
        optimizer = config.get("optimizer")
        if isinstance(optimizer, dict) and str(
            optimizer.get("module", "")
        ).startswith("keras.src.backend."):
            config["optimizer"] = dict(
                optimizer, module="keras.optimizers", registered_name=None
            )
        return config

    def compile_from_config(self, config):
        # Our `compile` has its own signature, so Keras would skip the saved
        # settings with a warning; restore them through it.
        self.compile(**keras.saving.deserialize_keras_object(config))
