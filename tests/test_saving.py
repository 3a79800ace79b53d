"""zoo.saving: atomic model and JSON files, float16 weight storage, and a
checked load_model."""

import os
import zipfile

import keras
import numpy as np
import pytest

from zoo.saving import (
    ModelFileError,
    load_model,
    remove_temporaries,
    save_model_atomic,
    save_weights_atomic,
    write_json_atomic,
)


def small_model():
    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [
            keras.Input((4,)),
            keras.layers.Dense(256),
            keras.layers.LayerNormalization(),
            keras.layers.Dense(256),
            keras.layers.Dense(2),
        ]
    )
    return model


def test_float16_storage_halves_the_file_and_rounds_the_weights(tmp_path):
    model = small_model()
    x = np.random.default_rng(0).normal(size=(3, 4)).astype("float32")
    full = save_model_atomic(model, str(tmp_path / "full.keras"))
    half = save_model_atomic(
        model, str(tmp_path / "half.keras"), weights_dtype="float16"
    )
    # The weights take half the bytes (the rest of the file is config).
    assert os.path.getsize(half) < 0.6 * os.path.getsize(full)
    loaded = keras.saving.load_model(half)
    for mine, original in zip(loaded.weights, model.weights):
        assert mine.dtype == "float32"  # computes as before
        np.testing.assert_array_equal(
            keras.ops.convert_to_numpy(mine),
            keras.ops.convert_to_numpy(original).astype("float16"),
        )
    np.testing.assert_allclose(
        loaded.predict(x, verbose=0), model.predict(x, verbose=0), atol=1e-2
    )
    np.testing.assert_array_equal(
        keras.saving.load_model(full).predict(x, verbose=0),
        model.predict(x, verbose=0),
    )
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".tmp")]


def test_bad_arguments_leave_nothing_behind(tmp_path):
    with pytest.raises(ValueError, match=".keras"):
        save_model_atomic(small_model(), str(tmp_path / "model.h5"))
    with pytest.raises(ValueError, match="weights_dtype"):
        save_model_atomic(
            small_model(), str(tmp_path / "m.keras"), weights_dtype="int8"
        )
    with pytest.raises(ValueError, match=".weights.h5"):
        save_weights_atomic(small_model(), str(tmp_path / "w.h5"))
    assert os.listdir(tmp_path) == []


def test_weights_are_written_through_a_temporary_file(tmp_path):
    model, other = small_model(), small_model()
    other.set_weights([w * 0 for w in model.get_weights()])
    path = str(tmp_path / "sub" / "best.weights.h5")
    save_weights_atomic(other, path)
    save_weights_atomic(model, path)  # replaces the first
    other.load_weights(path)
    for mine, original in zip(other.get_weights(), model.get_weights()):
        np.testing.assert_array_equal(mine, original)
    assert os.listdir(tmp_path / "sub") == ["best.weights.h5"]


def test_what_a_killed_write_left_is_removed_and_nothing_else(tmp_path):
    (tmp_path / ".tmp-a1b2.tmp.keras").write_bytes(b"PK half a model")
    (tmp_path / ".tmp-c3d4").mkdir()  # atomic_directory's, float16's
    (tmp_path / ".tmp-c3d4" / "model.weights.h5").write_bytes(b"")
    (tmp_path / ".old-e5f6").mkdir()
    for name in ("model.keras", ".hidden", "tmp-notes.txt"):
        (tmp_path / name).write_text("kept")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / ".tmp-x.json").write_text("{")  # not searched
    assert remove_temporaries(tmp_path) == [
        ".old-e5f6",
        ".tmp-a1b2.tmp.keras",
        ".tmp-c3d4",
    ]
    assert sorted(os.listdir(tmp_path)) == [
        ".hidden",
        "model.keras",
        "sub",
        "tmp-notes.txt",
    ]
    assert remove_temporaries(tmp_path / "missing") == []


def test_json_is_written_whole(tmp_path):
    path = write_json_atomic({"b": 1, "a": [1.5]}, str(tmp_path / "x.json"))
    assert open(path).read() == '{\n  "a": [\n    1.5\n  ],\n  "b": 1\n}\n'


def test_load_model_names_what_is_wrong_with_the_file(tmp_path):
    good = save_model_atomic(small_model(), str(tmp_path / "good.keras"))
    data = open(good, "rb").read()
    folder = tmp_path / "folder.keras"
    folder.mkdir()
    (tmp_path / "garbage.keras").write_bytes(b"not a model")
    (tmp_path / "truncated.keras").write_bytes(data[: len(data) // 2])
    (tmp_path / "empty.keras").write_bytes(b"")
    with zipfile.ZipFile(good) as archive:
        (tmp_path / "hdf5.keras").write_bytes(archive.read("model.weights.h5"))
    (tmp_path / "model.h5").write_bytes(data)
    with zipfile.ZipFile(tmp_path / "foreign.keras", "w") as archive:
        archive.writestr("weights.bin", b"0" * 10)
    # One flipped byte inside the (deflated) weights: the archive's
    # directory still reads, the member does not.
    with zipfile.ZipFile(good) as archive:
        info = archive.getinfo("model.weights.h5")
    damaged = bytearray(data)
    middle = (
        info.header_offset + 30 + len(info.filename) + info.compress_size // 2
    )
    damaged[middle] ^= 0xFF
    (tmp_path / "damaged.keras").write_bytes(bytes(damaged))
    # Members that pass their checksums but hold broken contents.
    with zipfile.ZipFile(good) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    for name, member, cut in (
        ("half_weights.keras", "model.weights.h5", 2),
        ("half_config.keras", "config.json", 2),
    ):
        with zipfile.ZipFile(tmp_path / name, "w") as archive:
            for other, data in members.items():
                archive.writestr(
                    other, data[: len(data) // cut] if other == member else data
                )
    cases = {
        "missing.keras": "missing.keras: no such model file",
        "folder.keras": "no such model file \\(it is a folder\\)",
        "garbage.keras": "not a .keras archive \\(not a zip file\\)",
        "truncated.keras": r"truncated.keras is truncated \(\d+ bytes, a zip "
        r"archive without its end\): an interrupted save or copy",
        "empty.keras": r"empty.keras is empty \(0 bytes\)",
        "hdf5.keras": "is an HDF5 file, not a .keras archive",
        "model.h5": "model files end in .keras",
        "foreign.keras": "has no config.json",
        "damaged.keras": "damaged.keras is damaged",
        "half_weights.keras": "half_weights.keras is damaged: its weights",
        "half_config.keras": "half_config.keras is damaged: its config.json",
    }
    for name, message in cases.items():
        with pytest.raises(ModelFileError, match=message) as error:
            load_model(tmp_path / name)
        assert "\n" not in str(error.value)
    # A missing file is also what open() would raise.
    with pytest.raises(FileNotFoundError, match="missing.keras"):
        load_model(tmp_path / "missing.keras")
    model = load_model(good, expected=keras.Sequential)
    assert isinstance(model, keras.Sequential)
    with pytest.raises(
        ModelFileError,
        match="holds a Sequential, not a Dense or LayerNormalization",
    ):
        load_model(
            good, expected=(keras.layers.Dense, keras.layers.LayerNormalization)
        )


def test_zoo_models_save_only_keras_files(tmp_path):
    """`model.save("m.h5")` would write a legacy HDF5 file that does not
    load back: every zoo model refuses any name but `.keras`, in one line,
    before writing anything."""
    import zoo
    from zoo.saving import KerasFilesOnly

    models = {
        name: cls
        for name, cls in keras.saving.get_custom_objects().items()
        if name.startswith("zoo>")
        and isinstance(cls, type)
        and issubclass(cls, keras.Model)
    }
    assert len(models) > 10
    assert [
        n for n, c in models.items() if not issubclass(c, KerasFilesOnly)
    ] == []
    backbone = zoo.models.vit.ViTBackbone.from_preset("smoke")
    for name, message in (
        (
            "m.h5",
            r"^.*/m.h5: a zoo model is saved as a .keras file "
            r"\(model.save\('m.keras'\)\).*HDF5 file would not load back. For "
            r"the weights alone: model.save_weights\('m.weights.h5'\).$",
        ),
        ("m.hdf5", "HDF5 file would not load back"),
        ("m.weights.h5", r"names a weights file: model.save_weights"),
        ("m", r"model.save\('m.keras'\)"),
        ("m.zip", r"model.save\('m.keras'\)"),
    ):
        with pytest.raises(ValueError, match=message) as error:
            backbone.save(tmp_path / name)
        assert "\n" not in str(error.value)
    assert os.listdir(tmp_path) == []
    backbone.save(tmp_path / "m.keras")
    assert isinstance(load_model(tmp_path / "m.keras"), type(backbone))


def test_renamed_classes_load_from_configs_with_their_old_names():
    import zoo

    assert zoo.models.GPT is zoo.models.GPTCausalLM
    assert zoo.models.BertClassifier is zoo.models.BertTextClassifier
    assert (
        zoo.layers.TokenAndPositionEmbedding is zoo.layers.PositionalEmbedding
    )
    for old in ("GPT", "BertClassifier"):
        assert keras.saving.get_registered_object(f"zoo>{old}") is not None


def test_docstring_examples(monkeypatch):
    import doctest
    import pathlib

    import zoo

    monkeypatch.chdir(pathlib.Path(__file__).resolve().parent.parent)
    failures, tried = doctest.testmod(zoo.saving, extraglobs={"zoo": zoo})
    assert tried and not failures


def test_atomic_directory_replaces_a_folder_whole_or_not_at_all(tmp_path):
    from zoo.saving import atomic_directory

    path = tmp_path / "export"
    with atomic_directory(path) as tmp:
        (tmp_path / tmp / "old.txt").write_text("old")
    with pytest.raises(RuntimeError):
        with atomic_directory(path) as tmp:
            (tmp_path / tmp / "new.txt").write_text("half")
            raise RuntimeError("killed mid-write")
    assert sorted(p.name for p in path.iterdir()) == ["old.txt"]
    with atomic_directory(path) as tmp:
        (tmp_path / tmp / "new.txt").write_text("new")
    assert sorted(p.name for p in path.iterdir()) == ["new.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["export"]
