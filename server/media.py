"""The files the server serves, as every session shares them: Streamlit's media store, made to keep a served
download a while longer, and the lock that makes heavy exports one at a time.

ui/exports.py makes the files and offers the buttons; what every session shares while they are made and fetched is
here (installed into the running server once a process, by the first page that offers a download).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections import OrderedDict
from typing import Any

from streamlit.runtime.media_file_storage import MediaFileKind, MediaFileStorageError
from streamlit.runtime.memory_media_file_storage import MemoryMediaFileStorage

# a served download stays fetchable this long after Streamlit lets go of it ($ATTENTION_LAB_DOWNLOAD_KEEP_S: 0 is
# Streamlit's own rule, for benchmarks/download_clicks.py's comparison)
KEEP_S = float(os.environ.get("ATTENTION_LAB_DOWNLOAD_KEEP_S", 120))
KEEP_BYTES = 64_000_000  # at most this many bytes of such files, the oldest dropped first
EXPORT_WAIT_S = 60.0  # a heavy export waits this long for the one being made (the browser waits 180 s)
# Held while a heavy export is made; a second click waits for it, up to EXPORT_WAIT_S, then gets BUSY.
EXPORT_LOCK = threading.Lock()


class _KeptDownloads(MemoryMediaFileStorage):
    """Streamlit's in-memory media store, except that a downloadable file it is told to delete stays KEEP_S
    seconds more (KEEP_BYTES at most, oldest out first): Streamlit deletes a served file once two script runs of
    any session have ended, so with others rerunning a click's fetch could find it gone (404, "canceled")."""

    _kept: OrderedDict[str, tuple[float, int]]
    _kept_lock: threading.Lock

    def delete_file(self, file_id: str) -> None:
        file = self._files_by_id.get(file_id)
        if file is None or file.kind != MediaFileKind.DOWNLOADABLE:
            super().delete_file(file_id)
            return
        with self._kept_lock:
            self._kept[file_id] = (time.monotonic(), len(file.content))
            self._kept.move_to_end(file_id)
        self.sweep()

    def load_and_get_id(self, *args: Any, **kwargs: Any) -> str:
        file_id = super().load_and_get_id(*args, **kwargs)
        with self._kept_lock:
            self._kept.pop(file_id, None)  # the same file made again: in use, not to be dropped
        self.sweep()
        return file_id

    def sweep(self) -> None:
        """Delete the kept files older than KEEP_S, and the oldest while they hold more than KEEP_BYTES (the
        newest is kept whatever its size)."""
        now = time.monotonic()
        with self._kept_lock:
            total = sum(size for _, size in self._kept.values())
            while self._kept:
                file_id, (since, size) = next(iter(self._kept.items()))
                if now - since <= KEEP_S and (total <= KEEP_BYTES or len(self._kept) == 1):
                    break
                del self._kept[file_id]
                total -= size
                with contextlib.suppress(MediaFileStorageError):
                    super().delete_file(file_id)


_KEEP_INSTALL = threading.Lock()


def keep_downloads() -> bool:
    """Make the running server's media store a `_KeptDownloads` (once per process; every session shares it).
    False where there is no server (AppTest) or its store is not Streamlit's in-memory one."""
    from streamlit import runtime

    if not runtime.exists() or KEEP_S <= 0:
        return False
    return _keep(runtime.get_instance().media_file_mgr._storage)


def _keep(storage: object) -> bool:
    """Turn Streamlit's in-memory media store into a `_KeptDownloads`: True when it is one now."""
    with _KEEP_INSTALL:
        if isinstance(storage, _KeptDownloads):
            return True
        if type(storage) is not MemoryMediaFileStorage:
            return False
        storage._kept = OrderedDict()
        storage._kept_lock = threading.Lock()
        storage.__class__ = _KeptDownloads  # the same object and files, its deletes deferred from now on
    return True
