"""Pickling for ``Connection.send``/``recv``, and pickling of ends.

``send(obj)`` pickles with protocol 5 (the C pickler, ``copyreg``'s
reducers). Each out-of-band buffer of at least ``OUT_OF_LINE`` bytes (a
numpy array's data, a ``bytearray``, a ``PickleBuffer``) becomes a message
of its own, which to another process goes through a pool block of shared
memory: copied once, on send, and read in place by the receiver, whose
object is rebuilt over read-only views of those blocks. ``Connection``s
inside the object travel as pipe ends, in a message of their own right
after the pickle's.

A ``Connection`` pickled any other way (as an argument of a
``multiprocessing`` child, through a ``multiprocessing.Queue``) travels
through this process's hand-off table: see ``handoff.rs``.
"""

import copyreg
import pickle
import threading

from . import _ferry

_local = threading.local()


def _reduce_connection(connection):
    ends = getattr(_local, "ends", None)
    if ends is None:
        # Pickled outside `send`: the end waits in this process's hand-off
        # table until the process that unpickles it claims it.
        return (_ferry.claim, _ferry.offer(connection))
    ends.append(connection)
    return (_arrived, (len(ends) - 1,))


def _arrived(index):
    """The `index`-th end the message being unpickled carried."""
    ends = getattr(_local, "arrived", None)
    if ends is None or type(index) is not int or not 0 <= index < len(ends):
        raise pickle.UnpicklingError("the pickle names a ferry end its message did not carry")
    return ends[index]


copyreg.pickle(_ferry.Connection, _reduce_connection)
reduce_connection = _reduce_connection


def dumps(obj):
    """``(data, out_of_band_buffers, ends)`` of ``obj``."""
    buffers = []
    ends = []

    def keep(buffer):
        raw = buffer.raw()
        if raw.nbytes >= _ferry.OUT_OF_LINE:
            buffers.append(raw)
            return False
        return True

    outer = getattr(_local, "ends", None)
    _local.ends = ends
    try:
        data = pickle.dumps(obj, protocol=5, buffer_callback=keep)
    finally:
        _local.ends = outer
    return data, buffers, ends


def loads(data, buffers, ends, offset):
    """The object ``dumps`` took apart, from byte ``offset`` of ``data``."""
    outer = getattr(_local, "arrived", None)
    _local.arrived = ends
    try:
        view = memoryview(data)
        return pickle.loads(view[offset:] if offset else view, buffers=buffers)
    except EOFError as e:
        # Not the peer gone (that EOFError is ferry's, raised before this):
        # a message that ends inside its pickle.
        raise pickle.UnpicklingError("a message that ends inside its pickle") from e
    finally:
        _local.arrived = outer
