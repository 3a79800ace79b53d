"""Named presets: configurations of a model family, by name.

keras-hub's `from_preset` loads a preset *directory* (config, tokenizer and
weights, often downloaded). The zoo's presets are the sizes and settings its
recipes train, so they are plain dicts in each family's `presets.py`:

    {"cpu_small": {
        "description": "...",
        "backbone": {...},        # backbone constructor arguments
        "preprocessor": {...},    # preprocessor arguments
        "task": {...},            # task arguments (heads, dropout)
        "training": {...},        # what the recipe trains with
    }}

and each class reads its own part with `from_preset(name, **overrides)`.
Trained models are `.keras` files (`saved_models/`), loaded with
`keras.saving.load_model`.
"""

import copy

# family -> its Presets, filled as each family's presets module is imported
# (`import zoo` imports them all).
_FAMILIES = {}


class Presets(dict):
    """A family's presets: `name -> {part -> dict}`, with errors that list
    the names and parts there are.

    Args:
        family: the family's name, for messages ("gpt", "text classifier").
        presets: the `name -> parts` dict.
    """

    def __init__(self, family, presets):
        super().__init__(presets)
        self.family = family
        _FAMILIES[family] = self

    def part(self, name, part):
        """A copy of preset `name`'s `part` (empty when it has none)."""
        if name not in self:
            raise ValueError(
                f"Unknown {self.family} preset {name!r}; the presets are "
                f"{', '.join(sorted(self))}."
            )
        return copy.deepcopy(self[name].get(part, {}))

    def description(self, name):
        return self[name].get("description", "")

    def names(self):
        return sorted(self)


def list_presets(family=None):
    """Every preset of every family: `{family: {name: description}}`, or
    one family's `{name: description}`.

    Args:
        family: a family's name ("bert", "captioning", "gpt", "seq2seq",
            "text classifier", "vit"), or None for all of them.

    Example:

    >>> import zoo
    >>> "nanogpt" in zoo.models.list_presets("gpt")
    True
    >>> sorted(zoo.models.list_presets())[:2]
    ['bert', 'captioning']
    """
    if family is not None:
        if family not in _FAMILIES:
            raise ValueError(
                f"Unknown family {family!r}; the families are "
                f"{', '.join(sorted(_FAMILIES))}."
            )
        presets = _FAMILIES[family]
        return {name: presets.description(name) for name in presets.names()}
    return {name: list_presets(name) for name in sorted(_FAMILIES)}
