"""safe_io.read_output: the bytes of a regular file the step left, never through a link, a FIFO
or past its size limit (read after the step ended, from a directory the sample wrote)."""

from __future__ import annotations

import os

import pytest

from reward_service.safe_io import UnsafeOutput, read_output, read_output_text


@pytest.mark.parametrize("size", [0, 1, 20_000, 65_536, 65_537, 300_001])
def test_reads_the_whole_file(tmp_path, size):
    data = os.urandom(size)
    (tmp_path / "f").write_bytes(data)
    assert read_output(tmp_path / "f") == data
    assert read_output(tmp_path / "f", max_bytes=size) == data


def test_a_file_over_the_limit_is_refused(tmp_path):
    (tmp_path / "f").write_bytes(b"x" * 1001)
    with pytest.raises(UnsafeOutput, match="over the 1000 byte limit"):
        read_output(tmp_path / "f", max_bytes=1000)


def test_links_fifos_and_dirs_are_refused(tmp_path):
    (tmp_path / "target").write_text("secret")
    (tmp_path / "link").symlink_to(tmp_path / "target")
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "dir").mkdir()
    for name in ("link", "fifo", "dir"):
        with pytest.raises(UnsafeOutput):
            read_output(tmp_path / name)
    with pytest.raises(FileNotFoundError):
        read_output(tmp_path / "missing")


def test_text_is_decoded_with_replacement(tmp_path):
    (tmp_path / "f").write_bytes(b"ok \xff end")
    assert read_output_text(tmp_path / "f") == "ok \ufffd end"
