"""The output copier: a reader that never reads, or is gone, does not hold the launch."""
from __future__ import annotations

import os
import time

from jobenv.launch.watch import output


def test_a_reader_that_never_reads_costs_dropped_bytes_not_a_stall(monkeypatch):
    monkeypatch.setattr(output, "LIMIT", 1 << 20)
    r, w = os.pipe()
    sink = output.Sink(w)
    t = time.monotonic()
    for _ in range(64):
        sink.put(b"x" * 65536)  # 4 MiB into a 64 KiB pipe nobody reads
    assert time.monotonic() - t < 5
    assert sink.dropped >= 2 << 20
    sink.drain(lambda: True)  # told to give up: returns though the writer is stuck
    os.close(r)  # the writer's next write fails (EPIPE): it ends
    sink.thread.join(10)
    assert not sink.thread.is_alive()
    os.close(w)


def test_a_closed_output_is_dropped_silently():
    r, w = os.pipe()
    os.close(r)
    sink = output.Sink(w)
    sink.put(b"lost\n")
    sink.drain(lambda: False)
    assert sink.failed is not None and sink.dropped == 0
    os.close(w)
