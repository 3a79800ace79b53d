"""Task configs that load under every backend.

Keras records its *resolved* compile choices in a saved model:
`jit_compile=True` from "auto" (then torch.compile runs when the file is
loaded under PyTorch) and, under PyTorch, a torch-only optimizer class. A
`.keras` file saved under one backend must work under the others, so zoo's
tasks store portable choices instead, and leave out the backbone's own
compile settings, which using the model does not need.

Keras also decides whether a model can be compiled with XLA from all of its
layers, and a task's preprocessor holds layers that run only in `tf.data`
(`TextVectorization`, `StringLookup`), which XLA cannot compile: without
care, `jit_compile="auto"` resolves to False for the whole task and JAX
trains it op by op, many times slower than compiled.
The compiled step never runs the preprocessor, so zoo's tasks judge XLA
support on the layers the step does run.
"""

import warnings

import keras


class PortableCompileConfig:
    """Mixin for keras-hub `Task`s with a `backbone` and a custom `compile`.

    Put it before the Keras class: `class GPT(PortableCompileConfig,
    keras_hub.models.CausalLM)`.
    """

    def _compiled_layers_support_jit(self):
        preprocessing = set()
        if getattr(self, "preprocessor", None) is not None:
            preprocessing = {
                id(layer) for layer in self.preprocessor._flatten_layers()
            }
        return all(
            layer.supports_jit
            for layer in self._flatten_layers()
            if id(layer) not in preprocessing
        )

    def _resolve_auto_jit_compile(self):
        # Keras' own rules (per backend and device), judged on the backbone,
        # then on the rest of the compiled layers.
        if not self.backbone._resolve_auto_jit_compile():
            return False
        return self._compiled_layers_support_jit()

    @property
    def jit_compile(self):
        if getattr(self, "_jit_compile", None) is None:
            self._jit_compile = self._resolve_auto_jit_compile()
        return self._jit_compile

    @jit_compile.setter
    def jit_compile(self, value):
        if value and not self._compiled_layers_support_jit():
            warnings.warn(
                "Model doesn't support `jit_compile=True`. "
                "Proceeding with `jit_compile=False`.",
                stacklevel=2,
            )
            value = False
        self._jit_compile = value

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
        self.compile(**self._compile_arguments(config))
        optimizer = getattr(self, "optimizer", None)
        if optimizer is not None and self.built:
            # The optimizer's saved state (moments, step count) loads next.
            # Keras' own compile_from_config builds the optimizer here, and
            # a file saved before any training step (the shipped models)
            # then warns that its state does not fit; build it only when
            # the file holds a built optimizer's state.
            variables = self.trainable_variables
            optimizer.load_own_variables = lambda store: _load_optimizer_state(
                optimizer, variables, store
            )

    def _compile_arguments(self, config):
        """The keyword arguments of `compile` that a saved compile config
        records."""
        return keras.saving.deserialize_keras_object(config)


def _load_optimizer_state(optimizer, variables, store):
    """Loads a saved optimizer state into `optimizer`, building it for
    `variables` first when the file holds more than an unbuilt one has."""
    if not optimizer.built and len(store.keys()) > len(optimizer.variables):
        optimizer.build(variables)
    type(optimizer).load_own_variables(optimizer, store)
