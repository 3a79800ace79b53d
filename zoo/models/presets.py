"""Named presets: configurations of a model family, by name, and the one
`from_preset(preset, **overrides)` every backbone, task and preprocessor
has.

keras-hub's `from_preset` loads a preset *directory* (config, tokenizer and
weights, often downloaded). The zoo's presets are the sizes and settings its
recipes train, so they are plain dicts in each family's
`<family>_presets.py`. Every preset of every family has the same six
sections, no more and no fewer (`Presets` checks them when the family is
imported); a section the family has nothing for is `{}`:

    {"cpu_small": {
        "description": "...",     # one line, listed by list_presets()
        "backbone": {...},        # backbone constructor arguments
        "tokenizer": {...},       # the tokenizer the recipe trains
                                  # (vocabulary_size)
        "preprocessor": {...},    # preprocessor constructor arguments
        "task": {...},            # task constructor arguments (head, dropout)
        "training": {...},        # what the recipe trains with: epochs or
                                  # steps, batch size, schedule, ...
    }}

Inside the sections, three conventions cover what some families need:

* a family with several backbone classes names the preset's in the
  backbone section (`"kind"` in `seq2seq` and `captioning`, `"class"` in
  `text classifier`); a backbone argument that is itself a model is given
  by its spec (`captioning`'s `"image_encoder"`, built by
  `image_encoder_from_config`);
* a family with several tasks keys its `preprocessor` and `task` sections
  by task (BERT: `"masked_lm"`, `"classifier"`); each class reads its own
  (`FromPreset.preset_subsection`);
* a family trained in several phases keys its `training` section by phase
  (BERT: `"pretraining"`, `"finetuning"`).

Each class reads its own section with `from_preset(name, **overrides)`
(`FromPreset`); recipes read `training`. Trained models are `.keras` files
(`saved_models/`), loaded with `zoo.saving.load_model`.
"""

import copy
import inspect

from zoo.models.arguments import MODEL_KWARGS

# Every preset's sections, in the order a preset lists them.
SECTIONS = (
    "description",
    "backbone",
    "tokenizer",
    "preprocessor",
    "task",
    "training",
)

# family -> its Presets, filled as each family's presets module is imported
# (`import zoo` imports them all).
_FAMILIES = {}


def _check_schema(family, presets):
    """A ValueError naming the preset and the section when a preset does
    not have exactly `SECTIONS` (a non-empty string description, dicts for
    the rest)."""
    for name, preset in presets.items():
        where = f"{family} preset {name!r}"
        if not isinstance(preset, dict):
            raise ValueError(
                f"{where} is a {type(preset).__name__}; a preset is a dict "
                f"of the sections {', '.join(SECTIONS)}."
            )
        missing = [s for s in SECTIONS if s not in preset]
        unknown = [s for s in preset if s not in SECTIONS]
        if missing or unknown:
            problems = []
            if missing:
                problems.append(f"missing section(s) {', '.join(missing)}")
            if unknown:
                problems.append(
                    f"unknown section(s) {', '.join(map(str, unknown))}"
                )
            raise ValueError(
                f"{where}: {'; '.join(problems)}. Every preset has exactly "
                f"the sections {', '.join(SECTIONS)} ({{}} for one the "
                "family has nothing for)."
            )
        description = preset["description"]
        if not isinstance(description, str) or not description:
            raise ValueError(
                f"{where}: its description must be a non-empty string."
            )
        for section in SECTIONS[1:]:
            if not isinstance(preset[section], dict):
                raise ValueError(
                    f"{where}: section {section!r} must be a dict; got a "
                    f"{type(preset[section]).__name__}."
                )


class Presets(dict):
    """A family's presets: `name -> {section -> dict}`, checked against the
    schema (`SECTIONS`) when made, with errors that list the names there
    are.

    Args:
        family: the family's name, for messages ("gpt", "text classifier").
        presets: the `name -> sections` dict.

    Raises:
        ValueError: a preset misses a section, has one not in `SECTIONS`,
            or a section is not a dict (the description: not a string).

    Example:

    >>> Presets("toy", {"tiny": {"description": "a toy", "backbone": {}}})
    Traceback (most recent call last):
      ...
    ValueError: toy preset 'tiny': missing section(s) tokenizer, \
preprocessor, task, training. Every preset has exactly the sections \
description, backbone, tokenizer, preprocessor, task, training ({} for one \
the family has nothing for).
    """

    def __init__(self, family, presets):
        _check_schema(family, presets)
        super().__init__(presets)
        self.family = family
        _FAMILIES[family] = self

    def check_name(self, name):
        """A ValueError listing the presets when `name` is not one."""
        if name not in self:
            raise ValueError(
                f"Unknown {self.family} preset {name!r}; the presets are "
                f"{', '.join(sorted(self))}."
            )

    def part(self, name, part):
        """A copy of preset `name`'s section `part`."""
        self.check_name(name)
        if part not in SECTIONS:
            raise ValueError(
                f"Unknown preset section {part!r}; the sections are "
                f"{', '.join(SECTIONS)}."
            )
        return copy.deepcopy(self[name][part])

    def description(self, name):
        self.check_name(name)
        return self[name]["description"]

    def names(self):
        return sorted(self)


def list_presets(family=None):
    """Every preset of every family: `{family: {name: description}}`, or
    one family's `{name: description}`.

    Args:
        family: a family's name ("bert", "captioning", "gpt", "seq2seq",
            "text classifier", "vit", "imagegpt"), or None for all of them.

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


def constructor_arguments(cls):
    """The keyword arguments `cls(...)` takes by name: its `__init__`'s
    named parameters and, for a Keras model or layer, `MODEL_KWARGS`."""
    parameters = inspect.signature(cls.__init__).parameters.values()
    names = {
        p.name
        for p in parameters
        if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    }
    return names | set(MODEL_KWARGS)


def split_backbone_overrides(overrides):
    """`(backbone, task)`: a task's `backbone_<argument>` overrides as the
    backbone's `<argument>`, and the rest.

    Example:

    >>> split_backbone_overrides({"backbone_dropout": 0.0, "name": "lm"})
    ({'dropout': 0.0}, {'name': 'lm'})
    """
    backbone, task = {}, {}
    for key, value in overrides.items():
        if key.startswith("backbone_"):
            backbone[key[len("backbone_") :]] = value
        else:
            task[key] = value
    return backbone, task


def preset_kind_class(cls, preset, base, key, classes):
    """The backbone class of `preset` in a family with several: the one
    `classes` has under the backbone section's `key` ("kind", "class").
    Called on the family's `base` class, any; on a subclass, that
    subclass or a ValueError.

    Args:
        cls: the class `from_preset` was called on.
        preset: the preset's name.
        base: the family's base backbone class.
        key: the backbone section's key that names the class.
        classes: `{name under key: class}`.
    """
    chosen = classes[cls._presets.part(preset, "backbone")[key]]
    if cls is not base and cls is not chosen:
        raise ValueError(
            f"{cls.__name__}.from_preset({preset!r}): the preset's backbone "
            f"is {chosen.__name__}, not {cls.__name__} (call "
            f"{base.__name__}.from_preset, which builds the preset's own)."
        )
    return chosen


class FromPreset:
    """The one `from_preset(preset, **overrides)` of every backbone, task
    and preprocessor: it checks the preset's name, that the keywords the
    class cannot build without are there (`preset_requires`) and that every
    override is one the class accepts (`preset_arguments`), each failure one
    `ValueError` line, then builds with `_from_preset`.

    A class mixes it in first and sets:

    * `_presets`: its family's `Presets`;
    * `preset_requires`: `{keyword: hint}`, what `from_preset` cannot build
      without (a backbone's `vocabulary_size`, a task's `preprocessor`, a
      preprocessor's `tokenizer`), each with a one-line hint (formatted
      with `cls` and `preset`);
    * `preset_subsection`: in a family with several tasks, the key of its
      task in the `preprocessor` and `task` sections (BERT's "masked_lm",
      "classifier"); None where the section is flat;
    * `_from_preset(preset, **overrides)`: the build itself.

    Tasks mix in `TaskFromPreset` instead.
    """

    _presets = None
    preset_requires = {}
    preset_subsection = None

    @classmethod
    def from_preset(cls, preset, **overrides):
        """A fresh object of preset `preset` (see the family's `PRESETS`),
        arguments overridden by `overrides`.

        Args:
            preset: a preset name of the family (`zoo.models.list_presets`).
            **overrides: constructor arguments that replace the preset's,
                and those the preset cannot give (`preset_requires`).

        Raises:
            ValueError: an unknown preset, a missing required keyword, or a
                keyword the class does not accept; one line each.
        """
        cls._presets.check_name(preset)
        call = f"{cls.__name__}.from_preset({preset!r})"
        missing = [k for k in cls.preset_requires if overrides.get(k) is None]
        if missing:
            raise ValueError(
                f"{call} needs "
                + ", ".join(f"{k}=..." for k in missing)
                + ": "
                + "; ".join(
                    cls.preset_requires[k].format(cls=cls, preset=preset)
                    for k in missing
                )
                + "."
            )
        accepted = cls.preset_arguments(preset)
        unknown = [k for k in overrides if k not in accepted]
        if unknown:
            which = "argument" if len(unknown) == 1 else "arguments"
            raise ValueError(
                f"{call} got the unknown {which} "
                f"{', '.join(repr(k) for k in unknown)}; it accepts "
                f"{', '.join(sorted(accepted))}."
            )
        return cls._from_preset(preset, **overrides)

    @classmethod
    def preset_class(cls, preset):
        """The class `from_preset(preset)` builds: this one (a family's
        base backbone class builds the preset's own, `preset_kind_class`)."""
        return cls

    @classmethod
    def preset_arguments(cls, preset):
        """The override names `from_preset(preset, ...)` accepts: the
        constructor's arguments."""
        return constructor_arguments(cls.preset_class(preset))

    @classmethod
    def preset_part(cls, preset, section):
        """A copy of preset `preset`'s `section` for this class: its own
        task's entry where the family keys the section by task."""
        part = cls._presets.part(preset, section)
        if cls.preset_subsection is not None and section in (
            "preprocessor",
            "task",
        ):
            part = part[cls.preset_subsection]
        return part

    @classmethod
    def _from_preset(cls, preset, **overrides):
        raise NotImplementedError(f"{cls.__name__} has no _from_preset.")


class TaskFromPreset(FromPreset):
    """`FromPreset` for a task: `preprocessor` is required (the vocabulary
    comes from its tokenizer), `backbone_<argument>` overrides go to the
    backbone (`backbone_cls.from_preset`), the others, over the preset's
    `task` section, to the task.

    The backbone class is keras-hub's `backbone_cls` (a family's base class
    builds the preset's kind). A task may extend
    `_backbone_defaults(preset, preprocessor)`: backbone arguments taken
    from the preprocessor (by default its tokenizer's `vocabulary_size`),
    which `backbone_` overrides replace.
    """

    preset_requires = {
        "preprocessor": "the task takes its vocabulary from the "
        "preprocessor's tokenizer, e.g. "
        "{cls.preprocessor_cls.__name__}.from_preset({preset!r}, "
        "tokenizer=...)",
    }

    @classmethod
    def preset_arguments(cls, preset):
        own = (constructor_arguments(cls) - {"backbone"}) | {"compile"}
        filled = set(cls.backbone_cls.preset_requires)
        backbone = cls.backbone_cls.preset_arguments(preset) - filled
        return own | {f"backbone_{name}" for name in backbone}

    @classmethod
    def _backbone_defaults(cls, preset, preprocessor):
        return {"vocabulary_size": preprocessor.tokenizer.vocabulary_size()}

    @classmethod
    def _from_preset(cls, preset, preprocessor=None, **overrides):
        backbone_overrides, task_overrides = split_backbone_overrides(overrides)
        backbone = cls.backbone_cls.from_preset(
            preset,
            **{
                **cls._backbone_defaults(preset, preprocessor),
                **backbone_overrides,
            },
        )
        task = {**cls.preset_part(preset, "task"), **task_overrides}
        return cls(backbone, preprocessor, **task)
