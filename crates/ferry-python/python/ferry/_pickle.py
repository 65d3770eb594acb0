"""Pickling for ``Connection.send``/``recv``, and pickling of ends.

``send(obj)`` pickles with protocol 5. Each out-of-band buffer of at least
``OUT_OF_LINE`` bytes (a numpy array's data, a ``bytearray``, a
``PickleBuffer``) becomes a message of its own, which to another process
goes through a pool block of shared memory: copied once, on send, and read
in place by the receiver, whose object is rebuilt over read-only views of
those blocks. ``Connection``s inside the object travel as pipe ends, with
the message.

A ``Connection`` pickled any other way (as an argument of a
``multiprocessing`` child, through a ``multiprocessing.Queue``) travels
through this process's hand-off table: see ``handoff.rs``.
"""

import copyreg
import io
import pickle
from multiprocessing.reduction import ForkingPickler

from . import _ferry

_END = "ferry.end"


class _Pickler(pickle.Pickler):
    # What ``multiprocessing`` pickles its own objects with, too.
    _table = None

    def __init__(self, file, buffers, ends):
        super().__init__(file, protocol=5, buffer_callback=self._buffer)
        if _Pickler._table is None:
            table = copyreg.dispatch_table.copy()
            table.update(ForkingPickler._extra_reducers)
            _Pickler._table = table
        self.dispatch_table = _Pickler._table
        self._buffers = buffers
        self._ends = ends

    def _buffer(self, buffer):
        raw = buffer.raw()
        if raw.nbytes >= _ferry.OUT_OF_LINE:
            self._buffers.append(raw)
            return False
        return True

    def persistent_id(self, obj):
        if type(obj) is _ferry.Connection:
            self._ends.append(obj)
            return (_END, len(self._ends) - 1)
        return None


class _Unpickler(pickle.Unpickler):
    def __init__(self, file, buffers, ends):
        super().__init__(file, buffers=buffers)
        self._ends = ends

    def persistent_load(self, pid):
        if type(pid) is tuple and len(pid) == 2 and pid[0] == _END and type(pid[1]) is int:
            if 0 <= pid[1] < len(self._ends):
                return self._ends[pid[1]]
        raise pickle.UnpicklingError(f"unknown persistent id {pid!r}")


def dumps(obj):
    """``(data, out_of_band_buffers, ends)`` of ``obj``."""
    file = io.BytesIO()
    buffers, ends = [], []
    _Pickler(file, buffers, ends).dump(obj)
    return file.getvalue(), buffers, ends


def loads(data, buffers, ends):
    """The object ``dumps`` took apart."""
    return _Unpickler(io.BytesIO(memoryview(data)), buffers, ends).load()


def reduce_connection(connection):
    """``Connection.__reduce__``: the end waits in this process's hand-off
    table until the process that unpickles it claims it."""
    return (_ferry.claim, _ferry.offer(connection))
