"""Reading the data sets' text files (reviews, sentence files, corpora,
caption files) so that a file that is not UTF-8 is one line naming the
file and the byte where decoding failed, not a `UnicodeDecodeError`
deep inside a loader that does not say which of 50,000 files it was.
"""

import gzip

from zoo.data.download import DataNotFoundError


def decode_utf8(data, label):
    """`data` (bytes) as text; a leading byte-order mark is dropped.

    Args:
        data: the file's bytes.
        label: how the message names the file (its path).

    Raises:
        DataNotFoundError: invalid UTF-8, naming `label`, the byte offset
            of the first invalid byte and the bytes there.

    Example:

    >>> decode_utf8(b"caf\\xc3\\xa9", "menu.txt")
    'café'
    >>> decode_utf8(b"caf\\xe9 au lait", "menu.txt")
    Traceback (most recent call last):
      ...
    zoo.data.download.DataNotFoundError: menu.txt is not valid UTF-8: byte \
offset 3 (b'\\xe9 au'); save it as UTF-8.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise DataNotFoundError(
            f"{label} is not valid UTF-8: byte offset {error.start} "
            f"({data[error.start : error.start + 4]!r}); save it as UTF-8."
        ) from None
    return text.removeprefix("\ufeff")


def read_utf8(path):
    """A text file's contents, as `open(path, encoding="utf-8").read()`
    gives them (line ends as "\\n"), less a leading byte-order mark;
    `.gz` files decompressed (the byte offset of an error is then one in
    the decompressed text).

    Raises:
        DataNotFoundError: the file is not valid UTF-8 (see
            `decode_utf8`).
    """
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    label = str(path) + (" (decompressed)" if opener is gzip.open else "")
    text = decode_utf8(data, label)
    return text.replace("\r\n", "\n").replace("\r", "\n")
