"""``MemoryRecords``: aiokafka's cursor over the batches of one records field, as a thin view
onto :func:`aiokafka_lite.records.reader.iter_batches` (``aiokafka.record.MemoryRecords`` under
``install_as_aiokafka()``; aiokafka's own tests decode Fetch answers with it)."""

from __future__ import annotations

from collections.abc import Iterator

from aiokafka_lite.records.reader import Batch, Buffer, iter_batches

__all__ = ["MemoryRecords"]


class MemoryRecords:
    """The record batches of ``bytes_data`` (a Fetch partition's ``records``), one at a time:
    ``has_next()``, ``next_batch()`` (a batch iterates its records: ``offset``, ``timestamp``,
    ``key``, ``value``, ``headers``), ``size_in_bytes()``. A partial trailing batch is not
    returned; CRCs are not checked here (``batch.validate_crc()`` does)."""

    def __init__(self, bytes_data: Buffer) -> None:
        self._size = len(memoryview(bytes_data))
        self._batches: Iterator[Batch] = iter_batches(bytes_data, check_crcs=False)
        self._next: Batch | None = next(self._batches, None)

    def size_in_bytes(self) -> int:
        """The size of the whole records field."""
        return self._size

    def has_next(self) -> bool:
        """True while a complete batch is left."""
        return self._next is not None

    def next_batch(self) -> Batch | None:
        """The next complete batch, or None after the last."""
        batch = self._next
        if batch is not None:
            self._next = next(self._batches, None)
        return batch
