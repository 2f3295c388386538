"""Following a job's output as text: the rules every ``xcore_job_logs`` keeps.

- Chunks are ``str``, decoded from the job's bytes as UTF-8 *incrementally*: a multi-byte
  character split across two reads is held back until its last byte arrives, never garbled.
  Bytes that are not UTF-8 become U+FFFD (the replacement character); nothing raises.
- End of stream: with ``follow=False`` the iterator ends after what the log holds now. With
  ``follow=True`` it ends once the job is terminal *and* everything it wrote has been yielded
  (the log is read once more after the job is seen finished), so nothing written just before
  exit is lost. Bytes of an incomplete character left at the very end become U+FFFD.
- A log that does not exist yet yields nothing (and, when following, is waited for).

``follow_bytes`` works for any source that can read from an offset (a local file, a file
over SSH, an object store); ``follow_file`` is it for a local path.
"""

from __future__ import annotations

import codecs
import os
import time
from collections.abc import Callable, Iterable, Iterator

POLL_SECS = 0.2
CHUNK_BYTES = 1 << 16


class TextDecoder:
    """UTF-8 bytes in, text out, never splitting a character across ``feed`` calls."""

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def feed(self, data: bytes) -> str:
        """The text completed by ``data`` (an incomplete trailing character is kept for later)."""
        return self._decoder.decode(data)

    def finish(self) -> str:
        """End of stream: the held-back bytes of an incomplete character, as U+FFFD."""
        return self._decoder.decode(b"", final=True)


def decode_chunks(chunks: Iterable[bytes]) -> Iterator[str]:
    """Decode a stream of byte chunks into non-empty text chunks (see ``TextDecoder``)."""
    decoder = TextDecoder()
    for chunk in chunks:
        text = decoder.feed(chunk)
        if text:
            yield text
    tail = decoder.finish()
    if tail:
        yield tail


def follow_bytes(
    read_from: Callable[[int], bytes],
    *,
    follow: bool,
    finished: Callable[[], bool] = lambda: True,
    poll_secs: float = POLL_SECS,
    sleep: Callable[[float], None] = time.sleep,
) -> Iterator[str]:
    """Text from a byte source that grows, following the rules in this module's docstring.

    :param read_from: returns the bytes from an offset to the current end (``b""`` when
        nothing new, also when the source does not exist yet). It may return fewer bytes.
    :param follow: keep reading until ``finished()`` says the job is terminal.
    :param finished: whether the job is terminal (asked only when nothing new was read).
    """

    def raw() -> Iterator[bytes]:
        offset = 0
        while True:
            data = read_from(offset)
            if data:
                offset += len(data)
                yield data
                continue
            if not follow:
                return
            if finished():
                while data := read_from(offset):  # what the job wrote just before it ended
                    offset += len(data)
                    yield data
                return
            sleep(poll_secs)

    return decode_chunks(raw())


def read_file_from(path: str | os.PathLike[str], chunk_bytes: int = CHUNK_BYTES) -> Callable[[int], bytes]:
    """A ``read_from`` for ``follow_bytes`` over a local file (missing file: no bytes)."""

    def read_from(offset: int) -> bytes:
        try:
            with open(path, "rb") as log:
                log.seek(offset)
                return log.read(chunk_bytes)
        except FileNotFoundError:
            return b""

    return read_from


def follow_file(
    path: str | os.PathLike[str],
    *,
    follow: bool,
    finished: Callable[[], bool] = lambda: True,
    poll_secs: float = POLL_SECS,
    chunk_bytes: int = CHUNK_BYTES,
) -> Iterator[str]:
    """A local log file as text chunks; the usual body of ``xcore_job_logs``."""
    return follow_bytes(read_file_from(path, chunk_bytes), follow=follow, finished=finished, poll_secs=poll_secs)
