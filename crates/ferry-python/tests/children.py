"""Targets of multiprocessing children (importable under spawn and
forkserver)."""

import os
import signal
import sys
import time


def echo(conn):
    """Sends back every object until the parent closes its end."""
    try:
        while True:
            conn.send(conn.recv())
    except EOFError:
        pass


def echo_bytes(conn):
    try:
        while True:
            conn.send_bytes(conn.recv_bytes())
    except EOFError:
        pass


def send_array_and_wait(conn, size):
    """Sends a dict holding an array of `size` bytes, then waits to be
    killed."""
    import numpy as np

    arr = np.arange(size // 8, dtype=np.float64)
    conn.send({"arr": arr, "sum": float(arr.sum())})
    time.sleep(3600)


def use_inherited(conn, report):
    """Under fork: tries the inherited end, reports what happened."""
    try:
        conn.send_bytes(b"from the forked child")
        report.send_bytes(b"sent")
    except RuntimeError as e:
        report.send_bytes(b"refused: " + str(e).encode())


def python_spawned_child():
    """Run by `ferry.spawn([sys.executable, '-c', ...])`."""
    import ferry

    conn = ferry.from_parent()
    conn.send(("child", os.getpid(), conn.recv()))


def blocked_receiver(conn, report):
    """Blocks in recv; each SIGINT must become a KeyboardInterrupt soon."""
    import ferry  # noqa: F401

    # Python installs its SIGINT handler only where SIGINT was not ignored
    # at start, and a shell's background jobs start with it ignored (as CI
    # may run this): the handler Python gives an interactive program.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    count = 0
    while True:
        try:
            report.send_bytes(b"waiting")
            got = conn.recv_bytes()
            report.send_bytes(b"got:" + got)
            if got == b"stop":
                return
        except KeyboardInterrupt:
            count += 1
            report.send_bytes(b"interrupted %d" % count)


def write_through_fds(conn):
    """Writes into each descriptor it receives, then closes it."""
    conn.send_bytes(b"ready")
    try:
        while True:
            data, fds = conn.recv_fds()
            for fd in fds:
                os.write(fd, data.replace(b"write", b"written"))
                os.close(fd)
    except EOFError:
        pass
