"""``ferry.wait``, as ``multiprocessing.connection.wait``."""

import selectors
import time

from . import _ferry


def wait(object_list, timeout=None):
    """The objects of ``object_list`` that are ready, waiting up to
    ``timeout`` seconds (``None``: until one is).

    A ``ferry.Connection`` is ready when a receive would not wait (a
    message, or the peer's end); any other object (a ``multiprocessing``
    connection, a socket, anything with ``fileno()``) when its descriptor
    is readable. Returns an empty list on timeout.
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    ours = [o for o in object_list if type(o) is _ferry.Connection]
    theirs = [o for o in object_list if type(o) is not _ferry.Connection]
    while True:
        ready = [o for o in ours if o.poll(0)]
        if ready:
            return ready
        with selectors.DefaultSelector() as selector:
            for o in object_list:
                selector.register(o, selectors.EVENT_READ)
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            events = selector.select(left)
        ready = [key.fileobj for key, _ in events if key.fileobj in theirs]
        ready += [o for o in ours if o.poll(0)]
        if ready:
            return ready
        if deadline is not None and time.monotonic() >= deadline:
            return []
