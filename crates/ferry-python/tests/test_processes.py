"""Across processes: multiprocessing children (spawn, forkserver), fork,
ferry.spawn with Python and Rust children, zero-copy arrays, a named
server, and peers that break the rules."""

import multiprocessing
import os
import signal
import sys
import threading
import time

import numpy as np
import pytest

import children
import ferry
from conftest import open_fds


def test_an_end_passed_to_a_child_carries_objects_both_ways(mp):
    a, b = ferry.Pipe()
    p = mp.Process(target=children.echo, args=(b,))
    p.start()
    assert b.closed
    for obj in [None, 1, "two", {"three": [3]}, b"\0" * 100_000]:
        a.send(obj)
        assert a.recv() == obj
    a.close()
    p.join(30)
    assert p.exitcode == 0


def test_every_size_crosses_to_a_child_and_back(mp):
    a, b = ferry.Pipe()
    p = mp.Process(target=children.echo_bytes, args=(b,))
    p.start()
    for n in [0, 1, 100, 4096, 65536, 1 << 20, 16 << 20, 64 << 20]:
        payload = os.urandom(min(n, 4096)) * (n // 4096) + os.urandom(n % 4096)
        a.send_bytes(payload)
        assert a.recv_bytes() == payload, n
    a.close()
    p.join(30)
    assert p.exitcode == 0


def test_a_large_array_arrives_in_a_pool_block_and_outlives_its_sender(mp):
    a, b = ferry.Pipe()
    size = 1 << 20
    p = mp.Process(target=children.send_array_and_wait, args=(b, size))
    p.start()
    got = a.recv()
    arr = got["arr"]
    assert arr.nbytes == size and not arr.flags.writeable
    # No copy: the array's memory is a ferry View read in place.
    base = arr
    while not isinstance(base, ferry.View):
        base = base.base if isinstance(base, np.ndarray) else base.obj
    assert base.in_place
    os.kill(p.pid, signal.SIGKILL)
    p.join(30)
    # The sender is dead; the block is still ours.
    assert float(arr.sum()) == got["sum"]
    assert arr[-1] == size // 8 - 1
    with pytest.raises(EOFError):
        a.recv()


def test_fork_children_cannot_use_inherited_ends():
    fork = multiprocessing.get_context("fork")
    a, b = ferry.Pipe()
    report_r, report_w = fork.Pipe(duplex=False)
    p = fork.Process(target=children.use_inherited, args=(b, report_w))
    p.start()
    said = report_r.recv_bytes()
    p.join(30)
    assert said.startswith(b"refused: ") and b"fork" in said
    # The parent's pipe is untouched by the child's exit.
    a.send_bytes(b"still here")
    assert b.recv_bytes() == b"still here"


def test_a_python_child_started_by_spawn_talks_back():
    child, conn = ferry.spawn(
        [sys.executable, "-c", "import children; children.python_spawned_child()"],
        env={"PYTHONPATH": os.path.dirname(__file__) + os.pathsep + os.environ.get("PYTHONPATH", "")},
    )
    conn.send("hello")
    kind, pid, got = conn.recv(timeout=60)
    assert (kind, pid, got) == ("child", child.pid, "hello")
    assert child.wait(60) == 0
    with pytest.raises(EOFError):
        conn.recv(timeout=10)


def test_a_rust_child_echoes_bytes_and_objects(peer):
    child, conn = ferry.spawn([peer, "greet"])
    assert conn.recv_bytes(timeout=60) == b"hello from rust"
    for n in [0, 144, 1 << 20]:
        payload = os.urandom(n)
        conn.send_bytes(payload)
        assert conn.recv_bytes(timeout=60) == payload
    arr = np.arange(1 << 17, dtype=np.float64)  # 1 MiB, out of band
    conn.send({"arr": arr})
    assert (conn.recv(timeout=60)["arr"] == arr).all()
    conn.close()
    assert child.wait(60) == 0


def test_a_peer_over_the_limit_is_a_protocol_error(peer):
    child, conn = ferry.spawn([peer, "oversize", str(2 << 20)])
    conn.max_message = 1 << 20
    with pytest.raises(ferry.ProtocolError):
        conn.recv_bytes(timeout=60)
    # The end is closed to that peer; this process goes on.
    with pytest.raises((ferry.ProtocolError, BrokenPipeError)):
        conn.send_bytes(b"x")
    child.kill()
    child.wait(60)


def test_a_pickle_claiming_impossible_parts_is_a_protocol_error(peer):
    child, conn = ferry.spawn([peer, "bad-parts"])
    with pytest.raises(ferry.ProtocolError):
        conn.recv(timeout=60)
    conn.close()
    child.wait(60)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_peer_that_sends_nonsense_gets_errors_never_a_crash(peer, seed):
    count = 500
    child, conn = ferry.spawn([peer, "garbage", str(seed), str(count)])
    protocol = objects = 0
    last = None
    deadline = time.monotonic() + 60
    while True:
        assert time.monotonic() < deadline, "the nonsense never ended"
        try:
            last = conn.recv(timeout=60)
            objects += 1
        except EOFError:
            break
        except ferry.ProtocolError:
            protocol += 1
    # The heads with impossible counts were protocol errors (a head's parts
    # are the messages after it, so fewer results than messages), every
    # body a valid pickle arrived as its object, and the connection ended
    # as the peer hung up, not before.
    assert protocol > 0 and objects > 0
    assert protocol + objects <= count
    print(f"seed {seed}: {protocol} protocol errors, {objects} objects, last {last!r:.40}")
    assert child.wait(60) == 0
    # This process goes on: a new pipe works.
    a, b = ferry.Pipe()
    a.send({"still": "here"})
    assert b.recv(timeout=5) == {"still": "here"}


def test_a_named_server_accepts_clients_with_its_token():
    name = f"pytest-{os.getpid()}-{time.monotonic_ns()}"
    token = ferry.new_token()
    with ferry.Listener(name, token=token) as listener:
        accepted = []

        def serve():
            # Handshakes are answered inside accept: it runs beside the
            # clients; a refused client is no accepted connection.
            while len(accepted) < 1:
                try:
                    accepted.append(listener.accept(timeout=30))
                except TimeoutError:
                    return

        server = threading.Thread(target=serve)
        server.start()
        with pytest.raises(PermissionError):
            ferry.Client(name, token=ferry.new_token(), timeout=10)
        client = ferry.Client(name, token=token, timeout=10)
        server.join(30)
        served = accepted[0]
        assert listener.last_accepted[0] == os.getpid()
        client.send("ping")
        assert served.recv() == "ping"
        served.send("pong")
        assert client.recv() == "pong"
    with pytest.raises(ConnectionRefusedError):
        ferry.Client(name, token=token, timeout=1)


def test_descriptors_cross_processes_without_leaking(mp):
    a, b = ferry.Pipe()
    p = mp.Process(target=children.write_through_fds, args=(b,))
    p.start()
    # Descriptors sent before the child took its end would be queued in
    # this process, and an end with descriptors queued for it cannot leave.
    assert a.recv_bytes(timeout=60) == b"ready"
    before = open_fds()
    for i in range(50):
        r, w = os.pipe()
        a.send_fds(b"write %d" % i, [w])
        os.close(w)
        assert os.read(r, 64) == b"written %d" % i
        os.close(r)
    a.close()
    p.join(30)
    assert p.exitcode == 0
    assert open_fds() <= before
