"""Atomic writes: a crash or Ctrl-C mid-save never leaves a half-written file
where a good one was."""

import json
import os
import tempfile


def _atomic_path(path):
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    suffix = os.path.splitext(path)[1]
    handle, tmp = tempfile.mkstemp(
        dir=directory, prefix=".tmp-", suffix=".tmp" + suffix
    )
    os.close(handle)
    return tmp


def _publish(tmp, path):
    # mkstemp makes 0600 files; give the result the usual umask permissions.
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)
    os.replace(tmp, path)


def save_model_atomic(model, path):
    """`model.save(path)` through a temporary file and an atomic rename."""
    if not path.endswith(".keras"):
        raise ValueError(f"model files end in .keras; got {path!r}.")
    tmp = _atomic_path(path)
    try:
        model.save(tmp)
        _publish(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return path


def write_json_atomic(data, path):
    """Writes `data` as indented JSON through a temporary file."""
    tmp = _atomic_path(path)
    try:
        with open(tmp, "w") as f:
            json.dump(data, f, indent=2, sort_keys=True)
            f.write("\n")
        _publish(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return path
