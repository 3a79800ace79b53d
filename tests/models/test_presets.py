"""One registry of every family's presets (`zoo.models.list_presets`), one
preset schema (`zoo.models.presets.SECTIONS`, checked when a family is
imported), one `from_preset(preset, **overrides)` on every backbone, task
and preprocessor (`zoo.models.presets.FromPreset`) with one-line errors,
and an explicit `get_config` on every backbone."""

import doctest
import importlib
import inspect
import pkgutil

import keras_hub
import pytest

import zoo
from zoo.models import presets
from zoo.models.presets import FromPreset, Presets, TaskFromPreset


def zoo_classes():
    """Every class defined in `zoo.models`, by qualified name."""
    classes = {}
    for info in pkgutil.walk_packages(zoo.models.__path__, "zoo.models."):
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            if inspect.isclass(value) and value.__module__ == info.name:
                classes[f"{value.__module__}.{value.__qualname__}"] = value
    return classes


def defines_from_preset(cls):
    """Whether `cls.from_preset` comes from the zoo (not keras-hub's)."""
    for klass in cls.__mro__:
        if "from_preset" in vars(klass):
            return klass.__module__.startswith("zoo.")
    return False


# Image encoders are parts of a captioning backbone's preset (its
# "image_encoder" spec, built by `image_encoder_from_config`): they have no
# presets of their own and keep keras-hub's `from_preset`, which loads a
# directory saved by `save_to_preset`.
ENCODERS = "zoo.models.captioning.image_encoders."

PRESET_CLASSES = sorted(
    (name, cls)
    for name, cls in zoo_classes().items()
    if issubclass(cls, FromPreset) and cls not in (FromPreset, TaskFromPreset)
)
KERAS_HUB_BASES = (
    keras_hub.models.Backbone,
    keras_hub.models.Task,
    keras_hub.models.Preprocessor,
)


def first_preset(cls):
    """A preset the class builds (a subclass of a family's base backbone:
    one of its own kind)."""
    for name in cls._presets.names():
        try:
            cls.preset_class(name)
        except ValueError:
            continue
        return name
    raise AssertionError(f"no preset of {cls.__name__}")


def test_every_family_and_preset_is_listed_with_its_description():
    listed = zoo.models.list_presets()
    assert sorted(listed) == [
        "bert",
        "captioning",
        "gpt",
        "imagegpt",
        "seq2seq",
        "text classifier",
        "vit",
    ]
    for family, names in listed.items():
        assert names, family
        assert all(isinstance(d, str) and d for d in names.values()), family
    assert "flickr8k_lstm" in listed["captioning"]
    assert zoo.models.list_presets("vit") == listed["vit"]


def test_an_unknown_family_names_the_families():
    with pytest.raises(ValueError, match="the families are bert, captioning"):
        zoo.models.list_presets("pixelcnn")


def test_every_preset_of_every_family_has_the_sections_of_the_schema():
    families = presets._FAMILIES
    assert len(families) == 7
    for family, table in families.items():
        for name, preset in table.items():
            assert sorted(preset) == sorted(presets.SECTIONS), (family, name)
            assert isinstance(preset["description"], str), (family, name)
            for section in presets.SECTIONS[1:]:
                assert isinstance(preset[section], dict), (family, name)


@pytest.mark.parametrize(
    "preset, message",
    [
        (
            {"description": "d", "backbone": {}, "training": {}},
            r"^toy preset 'p': missing section\(s\) tokenizer, preprocessor, "
            r"task\. Every preset has exactly the sections description, "
            r"backbone, tokenizer, preprocessor, task, training",
        ),
        (
            {
                "description": "d",
                "backbone": {},
                "tokenizer": {},
                "preprocessor": {},
                "task": {},
                "training": {},
                "pretraining": {},
            },
            r"^toy preset 'p': unknown section\(s\) pretraining\. ",
        ),
        (
            {
                "description": "",
                "backbone": {},
                "tokenizer": {},
                "preprocessor": {},
                "task": {},
                "training": {},
            },
            r"^toy preset 'p': its description must be a non-empty string",
        ),
        (
            {
                "description": "d",
                "backbone": {},
                "tokenizer": {},
                "preprocessor": {},
                "task": {},
                "training": [],
            },
            r"^toy preset 'p': section 'training' must be a dict; got a list",
        ),
    ],
)
def test_a_preset_off_the_schema_is_one_clear_error(preset, message):
    with pytest.raises(ValueError, match=message) as error:
        Presets("toy", {"p": preset})
    assert "\n" not in str(error.value)
    assert "toy" not in presets._FAMILIES


def test_the_preset_classes_are_every_backbone_task_and_preprocessor():
    preset_classes = {cls for _, cls in PRESET_CLASSES}
    keras_hub_classes = {
        cls
        for name, cls in zoo_classes().items()
        if issubclass(cls, KERAS_HUB_BASES) and not name.startswith(ENCODERS)
    }
    assert keras_hub_classes == preset_classes
    # 7 families: 12 backbones and 3 base classes (the families with
    # several), 7 tasks, 7 preprocessors.
    assert len(preset_classes) == 31


def test_every_from_preset_has_the_one_signature():
    for name, cls in zoo_classes().items():
        if defines_from_preset(cls):
            assert issubclass(cls, FromPreset), name
            assert cls.from_preset.__func__ is FromPreset.from_preset.__func__
    parameters = list(
        inspect.signature(FromPreset.from_preset).parameters.values()
    )
    assert [(p.name, p.kind) for p in parameters] == [
        ("preset", inspect.Parameter.POSITIONAL_OR_KEYWORD),
        ("overrides", inspect.Parameter.VAR_KEYWORD),
    ]


@pytest.mark.parametrize("name, cls", PRESET_CLASSES)
def test_a_missing_keyword_is_one_line_naming_class_preset_and_keyword(
    name, cls
):
    preset = first_preset(cls)
    for keyword in cls.preset_requires:
        with pytest.raises(ValueError) as error:
            cls.from_preset(preset)
        message = str(error.value)
        assert "\n" not in message
        assert message.startswith(
            f"{cls.__name__}.from_preset({preset!r}) needs {keyword}=...: "
        )
        assert message.endswith(".") and len(message) < 240
        with pytest.raises(ValueError, match=r"needs .*=\.\.\.: "):
            cls.from_preset(preset, **{keyword: None})  # None is missing


@pytest.mark.parametrize("name, cls", PRESET_CLASSES)
def test_an_unknown_keyword_is_one_line_listing_the_accepted_ones(name, cls):
    preset = first_preset(cls)
    given = {keyword: object() for keyword in cls.preset_requires}
    with pytest.raises(ValueError) as error:
        cls.from_preset(preset, hiden_dim=8, **given)
    message = str(error.value)
    assert "\n" not in message
    accepted = sorted(cls.preset_arguments(preset))
    assert message == (
        f"{cls.__name__}.from_preset({preset!r}) got the unknown argument "
        f"'hiden_dim'; it accepts {', '.join(accepted)}."
    )
    assert set(cls.preset_requires) <= set(accepted)
    assert "name" in accepted


def test_tasks_accept_the_backbones_arguments_as_backbone_overrides():
    gpt = zoo.models.GPT
    accepted = gpt.preset_arguments("smoke")
    assert {"preprocessor", "name", "compile"} <= accepted
    assert "backbone_num_layers" in accepted
    # The task gives the backbone its vocabulary (the preprocessor's).
    assert "backbone_vocabulary_size" not in accepted
    assert "backbone" not in accepted
    captioner = zoo.models.ImageCaptioner.preset_arguments("smoke")
    assert "backbone_image_encoder" in captioner


@pytest.mark.parametrize("name, cls", PRESET_CLASSES)
def test_every_preset_section_is_arguments_the_class_takes(name, cls):
    """What a class reads from a preset, it can be built with (a renamed
    constructor argument fails here, not in a recipe)."""
    for preset in cls._presets.names():
        try:
            built = cls.preset_class(preset)
        except ValueError:
            continue  # a preset of another kind of backbone
        accepted = cls.preset_arguments(preset)
        if issubclass(cls, TaskFromPreset):
            section = cls.preset_part(preset, "task")
        elif issubclass(cls, keras_hub.models.Preprocessor):
            section = cls.preset_part(preset, "preprocessor")
        else:
            section = cls.preset_part(preset, "backbone")
            # The key that names the class, in families with several.
            section.pop("kind", None)
            section.pop("class", None)
        assert set(section) <= accepted, (name, preset, built)


def test_families_with_several_tasks_key_their_sections_by_task():
    from zoo.models import bert

    for preset in bert.PRESETS.names():
        for section in ("preprocessor", "task"):
            part = bert.PRESETS.part(preset, section)
            assert sorted(part) == ["classifier", "masked_lm"], preset
        assert sorted(bert.PRESETS.part(preset, "training")) == [
            "finetuning",
            "pretraining",
        ]
    assert bert.BertClassifierPreprocessor.preset_part(
        "small", "preprocessor"
    ) == {"sequence_length": 512}
    assert bert.BertMaskedLMPreprocessor.preset_part(
        "small", "preprocessor"
    ) == {"sequence_length": 256}
    assert bert.BertClassifier.preset_part("smoke", "task") == {"dropout": 0.0}


def test_a_subclass_refuses_a_preset_of_another_kind_in_one_line():
    from zoo.models.seq2seq import RNNSeq2SeqBackbone

    with pytest.raises(ValueError) as error:
        RNNSeq2SeqBackbone.from_preset("smoke", vocabulary_size=10)
    assert str(error.value) == (
        "RNNSeq2SeqBackbone.from_preset('smoke'): the preset's backbone is "
        "TransformerSeq2SeqBackbone, not RNNSeq2SeqBackbone (call "
        "Seq2SeqBackbone.from_preset, which builds the preset's own)."
    )


def test_an_unknown_preset_lists_the_presets():
    with pytest.raises(ValueError) as error:
        zoo.models.ViTBackbone.from_preset("imagenet")
    assert str(error.value) == (
        "Unknown vit preset 'imagenet'; the presets are cifar, mnist, "
        "mnist_cct, mnist_conv_stem, mnist_seqpool, smoke."
    )


def test_every_backbone_lists_its_constructor_arguments_in_get_config():
    """Read from the source: each registered backbone's `get_config`, the
    one of the class that defines its `__init__` (ImageGPT's backbone is
    the GPT's with other presets), names every argument of that
    `__init__`."""
    backbones = [
        cls
        for cls in zoo_classes().values()
        if issubclass(cls, keras_hub.models.Backbone)
        and keras_hub_registered(cls)
    ]
    assert len(backbones) == 16  # 12 of the families, 4 image encoders
    for cls in backbones:
        cls = next(c for c in cls.__mro__ if "__init__" in vars(c))
        assert "get_config" in vars(cls), cls.__name__
        source = inspect.getsource(cls.get_config)
        for name, parameter in inspect.signature(
            cls.__init__
        ).parameters.items():
            if name in ("self", "dtype") or parameter.kind in (
                parameter.VAR_POSITIONAL,
                parameter.VAR_KEYWORD,
            ):
                continue
            assert f'"{name}"' in source, (cls.__name__, name)


def keras_hub_registered(cls):
    import keras

    return keras.saving.get_registered_object(f"zoo>{cls.__name__}") is cls


def test_docstring_examples():
    failures, tried = doctest.testmod(presets)
    assert tried and not failures
