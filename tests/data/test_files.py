"""zoo.data.files: the data sets' text files read as UTF-8, a file that is
not one error line naming it and the byte offset."""

import gzip

import pytest

from zoo.data.download import DataNotFoundError
from zoo.data.files import decode_utf8, read_utf8

pytestmark = pytest.mark.one_backend  # plain Python: the same everywhere


def test_text_is_read_as_open_reads_it_less_a_byte_order_mark(tmp_path):
    path = tmp_path / "a.txt"
    path.write_bytes(b"\xef\xbb\xbfcaf\xc3\xa9\r\nline two\rthree\n")
    assert read_utf8(path) == "café\nline two\nthree\n"
    packed = tmp_path / "a.txt.gz"
    with gzip.open(packed, "wb") as f:
        f.write("Straße\n".encode())
    assert read_utf8(str(packed)) == "Straße\n"


def test_invalid_utf8_names_the_file_and_the_byte_offset(tmp_path):
    path = tmp_path / "latin1.txt"
    path.write_bytes("good line\ncafé".encode("latin-1"))
    with pytest.raises(
        DataNotFoundError,
        match=rf"^{path} is not valid UTF-8: byte offset 13 "
        r"\(b'\\xe9'\); save it as UTF-8.$",
    ):
        read_utf8(path)
    packed = tmp_path / "latin1.txt.gz"
    with gzip.open(packed, "wb") as f:
        f.write(b"ok \xff")
    with pytest.raises(
        DataNotFoundError,
        match=r"latin1.txt.gz \(decompressed\) is not "
        "valid UTF-8: byte offset 3",
    ):
        read_utf8(str(packed))
    with pytest.raises(DataNotFoundError, match="label.txt is not valid"):
        decode_utf8(b"\x80", "label.txt")
