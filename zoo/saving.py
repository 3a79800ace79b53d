"""Atomic writes: a crash or Ctrl-C mid-save never leaves a half-written file
where a good one was (a kill leaves at most a ".tmp-" file beside it, which
`remove_temporaries` clears); a checked `load_model`, the documented way to
load a zoo model, that says what is wrong with a missing, empty, truncated
or foreign model file; and `KerasFilesOnly`, which makes every zoo model's
`save` refuse names that would not give a loadable `.keras` file."""

import contextlib
import json
import math
import os
import pickle
import shutil
import tempfile
import zipfile
import zlib

import keras
import numpy as np


def register_alias(cls, *old_names, package="zoo"):
    """Makes files that name `cls` by an earlier registered name load as
    `cls` (a class renamed to keras-hub's name keeps its saved files).

    Args:
        cls: a class registered with `keras.saving.register_keras_serializable`.
        *old_names: the names it was registered under before.
        package: the registration package.

    Returns:
        `cls`.
    """
    for name in old_names:
        keras.saving.get_custom_objects()[f"{package}>{name}"] = cls
    return cls


@contextlib.contextmanager
def atomic_path(path, suffix=None):
    """Yields a temporary file's path beside `path`: what is written there
    replaces `path` when the block ends without an error, and the temporary
    file is gone either way, so `path` is always the old file or the whole
    new one.

    The temporary file is named ".tmp-<random><suffix>"; one that a killed
    process left behind is removed by `remove_temporaries`.

    Args:
        path: the file to write.
        suffix: how the temporary name ends (default ".tmp" + `path`'s
            extension), for writers that check or append an extension
            (`np.save` adds ".npy" to a name without it).

    Example:

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "notes.txt")
    >>> with atomic_path(path) as tmp:
    ...     with open(tmp, "w") as f:
    ...         _ = f.write("saved whole or not at all")
    >>> open(path).read()
    'saved whole or not at all'
    """
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    if suffix is None:
        suffix = ".tmp" + os.path.splitext(path)[1]
    handle, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=suffix)
    os.close(handle)
    try:
        yield tmp
        _publish(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


@contextlib.contextmanager
def atomic_directory(path):
    """Yields a temporary folder beside `path`: when the block ends without
    an error it replaces `path` (an earlier folder there is removed after
    the swap), and otherwise it is removed, so `path` is the old folder or
    the whole new one (a SavedModel, say).

    Example:

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "export")
    >>> with atomic_directory(path) as tmp:
    ...     with open(os.path.join(tmp, "a.txt"), "w") as f:
    ...         _ = f.write("whole")
    >>> os.listdir(path)
    ['a.txt']
    """
    path = os.path.abspath(path)
    parent = os.path.dirname(path)
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(dir=parent, prefix=".tmp-")
    try:
        yield tmp
        old = None
        if os.path.exists(path):
            old = tempfile.mkdtemp(dir=parent, prefix=".old-")
            os.rmdir(old)
            os.replace(path, old)
        os.replace(tmp, path)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    finally:
        if os.path.exists(tmp):
            shutil.rmtree(tmp, ignore_errors=True)


TEMPORARY_PREFIXES = (".tmp-", ".old-")


def remove_temporaries(directory):
    """Removes what a killed atomic write left in `directory`: the files and
    folders of `atomic_path`, `atomic_directory` and the savers built on
    them, whose names start with ".tmp-" or ".old-". A write that
    finishes, or fails with a Python exception, removes its own; a process
    killed mid-write (SIGKILL, or SIGTERM without a handler) cannot. Only
    `directory` itself is searched, not its subfolders. Call it as a run
    starts, not beside another process writing to the same folder.

    Args:
        directory: a folder; a missing one is nothing to clean.

    Returns:
        The removed names, sorted.

    Example:

    >>> import os, tempfile
    >>> folder = tempfile.mkdtemp()
    >>> open(os.path.join(folder, ".tmp-k1ll3d.tmp.keras"), "w").close()
    >>> remove_temporaries(folder)
    ['.tmp-k1ll3d.tmp.keras']
    >>> os.listdir(folder)
    []
    """
    try:
        names = sorted(os.listdir(directory))
    except FileNotFoundError:
        return []
    removed = []
    for name in names:
        if not name.startswith(TEMPORARY_PREFIXES):
            continue
        path = os.path.join(directory, name)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            with contextlib.suppress(FileNotFoundError):
                os.remove(path)
        removed.append(name)
    return removed


def _publish(tmp, path):
    # mkstemp makes 0600 files; give the result the usual umask permissions.
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)
    os.replace(tmp, path)


def check_model_path(path, method="save"):
    """A ValueError, one line, unless `path` names a `.keras` file: Keras'
    `save` writes a legacy HDF5 file for a `.h5` or `.hdf5` name, which
    does not keep a zoo model's classes, tokenizer and preprocessor and so
    does not load back; a `.weights.h5` name is for `save_weights`.

    Example:

    >>> check_model_path("model.h5")
    Traceback (most recent call last):
      ...
    ValueError: model.h5: a zoo model is saved as a .keras file \
(model.save('model.keras')), which keeps its classes and preprocessor; an \
HDF5 file would not load back. For the weights alone: \
model.save_weights('model.weights.h5').
    """
    path = os.fspath(path)
    if path.endswith(".keras"):
        return path
    stem = os.path.basename(path)
    for suffix in (".weights.h5", ".weights.json"):
        if stem.endswith(suffix):
            stem = stem[: -len(suffix)]
            break
    else:
        stem = os.path.splitext(stem)[0]
    stem = stem or "model"
    if path.endswith((".weights.h5", ".weights.json")):
        raise ValueError(
            f"{path} names a weights file: model.save_weights({path!r}) "
            f"writes the weights alone; model.{method}('{stem}.keras') the "
            "whole model."
        )
    kind = (
        "an HDF5 file would not load back"
        if path.endswith((".h5", ".hdf5"))
        else "other names are refused"
    )
    raise ValueError(
        f"{path}: a zoo model is saved as a .keras file "
        f"(model.{method}('{stem}.keras')), which keeps its classes and "
        f"preprocessor; {kind}. For the weights alone: "
        f"model.save_weights('{stem}.weights.h5')."
    )


class KerasFilesOnly:
    """Mixin for zoo's models (every backbone, encoder and task has it,
    through `zoo.models.jax_state.KeepsWeightsOnError`): `save` writes
    `.keras` files only; any other name is one `ValueError` line pointing
    to `.keras` (and to `save_weights` for `.weights.h5`), before anything
    is written. Keras itself writes a legacy HDF5 file for `.h5`, without
    the zoo's classes, which cannot be loaded back. `hf://` paths (Keras'
    Hugging Face Hub saving) pass through.

    A model loaded from a file with quantised layers saves again
    (`own_dtype_policies`, run whenever Keras saves its variables).

    Example:

    >>> import zoo
    >>> backbone = zoo.models.vit.ViTBackbone.from_preset("smoke")
    >>> backbone.save("vit.h5")
    Traceback (most recent call last):
      ...
    ValueError: vit.h5: a zoo model is saved as a .keras file \
(model.save('vit.keras')), which keeps its classes and preprocessor; an \
HDF5 file would not load back. For the weights alone: \
model.save_weights('vit.weights.h5').
    """

    def save(self, filepath, *args, **kwargs):
        if not str(os.fspath(filepath)).startswith("hf://"):
            check_model_path(filepath)
        return super().save(filepath, *args, **kwargs)

    def save_own_variables(self, store):
        # Keras saves this model's own variables before its layers'.
        own_dtype_policies(self)
        super().save_own_variables(store)


def own_dtype_policies(model):
    """Gives each quantised layer of `model` that reads its dtype policy
    from a `DTypePolicyMap` the policy the map holds for it; returns how
    many layers it changed.

    A keras-hub backbone saved with quantised layers records them in a
    `DTypePolicyMap`, and once loaded every layer holds that map, looking
    its own policy up by path. Keras' `Dense`, `EinsumDense` and
    `Embedding` read `dtype_policy.quantization_mode` (the map's: None)
    when they save their weights, so a loaded int8 layer saved its scale
    as None ("Invalid dtype: object"). With its own policy, as
    `keras.Model.quantize` leaves it, the layer saves as it did before it
    was loaded; the layers compute and the backbone's config record
    exactly what they did.
    """
    changed = 0
    for layer in model._flatten_layers(include_self=False):
        policy = getattr(layer, "_dtype_policy", None)
        if (
            isinstance(policy, keras.dtype_policies.DTypePolicyMap)
            and not isinstance(layer, keras.Model)
            and layer.path
            and policy[layer.path].quantization_mode is not None
        ):
            layer._dtype_policy = policy[layer.path]
            changed += 1
    return changed


def save_model_atomic(model, path, weights_dtype=None):
    """`model.save(path)` through a temporary file and an atomic rename.

    Args:
        model: a Keras model.
        path: the `.keras` file to write.
        weights_dtype: "float16" stores float32 weights as float16 (half the
            file; Keras casts them back to the variables' float32 when the
            file is loaded, so the model computes as before, from rounded
            weights). None keeps them as they are.
    """
    check_model_path(path)
    if weights_dtype not in (None, "float16"):
        raise ValueError(
            f"weights_dtype must be None or 'float16'; got {weights_dtype!r}."
        )
    with atomic_path(path) as tmp:
        model.save(tmp)
        if weights_dtype == "float16":
            _store_float16(tmp)
    return path


def save_weights_atomic(model, path):
    """`model.save_weights(path)` through a temporary file and an atomic
    rename (`path` ends in `.weights.h5`, as Keras requires)."""
    if not path.endswith(".weights.h5"):
        raise ValueError(f"weights files end in .weights.h5; got {path!r}.")
    with atomic_path(path, suffix=".weights.h5") as tmp:
        model.save_weights(tmp, overwrite=True)
    return path


def _store_float16(keras_file):
    """Rewrites the float32 arrays of a `.keras` file's weights as float16."""
    import h5py

    folder = tempfile.mkdtemp(dir=os.path.dirname(keras_file), prefix=".tmp-")
    try:
        with zipfile.ZipFile(keras_file) as archive:
            names = archive.namelist()
            archive.extractall(folder)
        weights = os.path.join(folder, "model.weights.h5")
        # A new file: HDF5 does not give back the space of deleted arrays.
        smaller = weights + ".float16"
        with (
            h5py.File(weights, "r") as source,
            h5py.File(smaller, "w") as target,
        ):
            _copy_float16(source, target)
        os.replace(smaller, weights)
        with zipfile.ZipFile(keras_file, "w", zipfile.ZIP_DEFLATED) as out:
            for name in names:
                out.write(os.path.join(folder, name), name)
    finally:
        import shutil

        shutil.rmtree(folder, ignore_errors=True)


def _copy_float16(source, target):
    """Copies an HDF5 group with its attributes, float32 arrays as float16
    (unless a value would overflow float16)."""
    import h5py

    target.attrs.update(source.attrs)
    for name, item in source.items():
        if isinstance(item, h5py.Group):
            _copy_float16(item, target.create_group(name))
            continue
        value = item[()]
        if (
            item.dtype == np.float32
            and np.abs(value).max(initial=0.0) <= np.finfo("float16").max
        ):
            value = value.astype("float16")
        target.create_dataset(name, data=value)
        target[name].attrs.update(item.attrs)


def write_json_atomic(data, path, strict=False):
    """Writes `data` as indented JSON through a temporary file.

    Args:
        data: dicts, lists, strings, numbers, booleans and None.
        path: the file to write.
        strict: write strict JSON: non-finite floats become the strings
            "inf", "-inf" and "nan" (Python's `json` otherwise writes
            `Infinity` and `NaN`, which other readers refuse), and NumPy
            scalars and arrays become Python numbers and lists.

    Returns:
        `path`.

    Example:

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "report.json")
    >>> _ = write_json_atomic({"max": float("inf")}, path, strict=True)
    >>> json.load(open(path))
    {'max': 'inf'}
    """
    if strict:
        data = _strict_json(data)
    with atomic_path(path) as tmp:
        with open(tmp, "w") as f:
            json.dump(data, f, indent=2, sort_keys=True, allow_nan=not strict)
            f.write("\n")
    return path


def save_npz_atomic(arrays, path):
    """`np.savez(path, **arrays)` through a temporary file.

    Example:

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "arrays.npz")
    >>> _ = save_npz_atomic({"x": np.arange(3)}, path)
    >>> np.load(path)["x"]
    array([0, 1, 2])
    """
    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        np.savez(f, **arrays)
    return path


def save_pickle_atomic(obj, path):
    """`pickle.dump(obj)` into `path` through a temporary file.

    Example:

    >>> import os, pickle, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "batch.pkl")
    >>> _ = save_pickle_atomic({"inputs": ["a review"]}, path)
    >>> pickle.load(open(path, "rb"))
    {'inputs': ['a review']}
    """
    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        pickle.dump(obj, f)
    return path


def _strict_json(value):
    """`value` with non-finite floats as strings and NumPy values as
    Python ones (dict keys as strings)."""
    if isinstance(value, dict):
        return {str(k): _strict_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_strict_json(v) for v in value]
    if isinstance(value, np.ndarray):
        return _strict_json(value.tolist())
    if isinstance(value, (np.floating, float)):
        value = float(value)
        return value if math.isfinite(value) else str(value)
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    return value


def _not_a_zip(path):
    """What a file that is no zip archive is, as the end of a sentence
    that starts with its path."""
    size = os.path.getsize(path)
    if size == 0:
        return "is empty (0 bytes): not a model file (an interrupted save?)."
    with open(path, "rb") as f:
        head = f.read(8)
    if head.startswith(b"PK\x03\x04"):
        return (
            f"is truncated ({size} bytes, a zip archive without its end): "
            "an interrupted save or copy; save or copy it again."
        )
    if head.startswith(b"\x89HDF"):
        return (
            "is an HDF5 file, not a .keras archive (not a zip file): load "
            "weights files with model.load_weights."
        )
    return (
        "is not a .keras archive (not a zip file): it is corrupt, or "
        "another format."
    )


class ModelFileError(ValueError):
    """A model file that is missing, not a `.keras` archive, damaged, or
    holds another kind of model than the caller needs."""


class ModelFileNotFoundError(ModelFileError, FileNotFoundError):
    """No file at a model's path (a `ModelFileError` that is also the
    `FileNotFoundError` that `open` would raise)."""


def load_model(path, expected=None, **kwargs):
    """`keras.saving.load_model` after checking the file, so a bad path is
    one clear error naming the file and the problem (Keras says "File not
    found" for an empty, truncated or corrupt file too). The documented way
    to load a zoo model; the recipes use it.

    Args:
        path: a `.keras` file.
        expected: a class (or tuple of classes) the model must be an
            instance of, e.g. `zoo.models.seq2seq.Translator`; None: any.
        **kwargs: passed to `keras.saving.load_model` (`compile`,
            `safe_mode`, `custom_objects`).

    Returns:
        The model.

    Raises:
        ModelFileError: no such file (`ModelFileNotFoundError`, also a
            `FileNotFoundError`), a name that does not end in `.keras`,
            an empty file, a truncated archive, a file that is no zip
            archive (an HDF5 file, another format), a damaged
            archive (a member fails its checksum, weights that HDF5 cannot
            read, a config that is not JSON) or one without the
            `config.json` every `.keras` file has, or a model that is not
            `expected`.

    Example:

    >>> translator = load_model("saved_models/translate_de_en.keras",
    ...                         expected=zoo.models.seq2seq.Translator)
    ... # doctest: +SKIP
    """
    path = os.fspath(path)
    if os.path.isdir(path):
        raise ModelFileError(f"{path}: no such model file (it is a folder).")
    if not os.path.isfile(path):
        raise ModelFileNotFoundError(f"{path}: no such model file.")
    if not path.endswith(".keras"):
        raise ModelFileError(f"{path}: model files end in .keras.")
    if not zipfile.is_zipfile(path):
        raise ModelFileError(f"{path} {_not_a_zip(path)}")
    try:
        with zipfile.ZipFile(path) as archive:
            if "config.json" not in archive.namelist():
                raise ModelFileError(
                    f"{path} has no config.json: not a Keras model file."
                )
            damaged = archive.testzip()
    except (zipfile.BadZipFile, zlib.error, EOFError) as error:
        raise ModelFileError(f"{path} is damaged: {error}.") from None
    if damaged is not None:
        raise ModelFileError(
            f"{path} is damaged: {damaged} fails its checksum."
        )
    import keras

    try:
        model = keras.saving.load_model(path, **kwargs)
    except OSError as error:  # h5py: a damaged weights member
        raise ModelFileError(
            f"{path} is damaged: its weights (model.weights.h5) cannot be "
            f"read ({error})."
        ) from None
    except json.JSONDecodeError as error:
        raise ModelFileError(
            f"{path} is damaged: its config.json is not JSON ({error})."
        ) from None
    if expected is not None and not isinstance(model, expected):
        names = expected if isinstance(expected, tuple) else (expected,)
        raise ModelFileError(
            f"{path} holds a {type(model).__name__}, not a "
            f"{' or '.join(c.__name__ for c in names)}."
        )
    return model
