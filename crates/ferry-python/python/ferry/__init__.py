"""ferry: fast, safe message pipes between processes on one machine.

The shape of ``multiprocessing.connection``, through shared memory::

    import ferry
    a, b = ferry.Pipe()
    a.send({"job": 1})
    assert b.recv() == {"job": 1}

- ``Pipe()`` makes a pipe; each end is a ``Connection`` (``send``/``recv``
  pickle, ``send_bytes``/``recv_bytes``/``recv_bytes_into`` for buffers,
  ``poll``, ``fileno``, ``close``; ferry's own ``recv_view``, ``loan``,
  ``send_fds``/``recv_fds``, ``recv_async``).
- Ends are picklable: pass one to a ``multiprocessing`` child under the
  ``spawn`` or ``forkserver`` start method (not ``fork``: an end inherited
  through fork raises ``RuntimeError`` in the child and is left alone).
- ``wait(conns, timeout)`` as ``multiprocessing.connection.wait``.
- ``Listener(name)``/``Client(name)``: ferry's named server (same user
  only; an optional 32-byte token from ``new_token()``).
- ``spawn([...])``: a child of any language holding a pipe to this process
  (``from_parent()`` in a Python child, ``ferry::Pipe::from_parent()`` in
  Rust).

Errors: ``EOFError`` once the peer is gone and everything it sent was read;
``BrokenPipeError`` on a send to a peer that is gone; ``TimeoutError``;
``ferry.ProtocolError`` for a peer that broke the rules (the end is closed;
this process is never harmed). ``recv()`` unpickles, so take objects only
from peers you trust, as with ``multiprocessing``; ``recv_bytes`` and
``recv_view`` are safe against any peer.
"""

import os as _os

from . import _ferry
from ._ferry import (
    OUT_OF_LINE,
    Child,
    Connection,
    Listener,
    Loan,
    NotTransferable,
    ProtocolError,
    View,
    from_parent,
    new_token,
    spawn,
)
from ._wait import wait

__all__ = [
    "OUT_OF_LINE",
    "Child",
    "Client",
    "Connection",
    "Listener",
    "Loan",
    "NotTransferable",
    "Pipe",
    "ProtocolError",
    "View",
    "from_parent",
    "new_token",
    "spawn",
    "wait",
]


def Pipe(duplex: bool = True) -> "tuple[Connection, Connection]":
    """A new pipe: two connected ends.

    Duplex by default; ``duplex=False`` gives ``(reader, writer)``, as
    ``multiprocessing.Pipe`` does.
    """
    return _ferry.pipe(duplex)


def Client(address: str, *, token: "bytes | None" = None, timeout: "float | None" = None) -> Connection:
    """Connects to the ``Listener`` at ``address`` (with its token, if any)."""
    return _ferry.client(address, token=token, timeout=timeout)


_os.register_at_fork(after_in_child=_ferry.after_fork_in_child)
