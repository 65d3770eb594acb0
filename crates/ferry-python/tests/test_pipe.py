"""One process: the Connection's calls, their errors, views and loans."""

import array
import multiprocessing
import os
import pickle
import threading
import time

import pytest

import ferry


def test_bytes_and_objects_go_through_in_order():
    a, b = ferry.Pipe()
    a.send_bytes(b"one")
    a.send({"two": 2})
    a.send_bytes(bytearray(b"three"))
    a.send_bytes(memoryview(b"xxfourxx"), 2, 4)
    assert b.recv_bytes() == b"one"
    assert b.recv() == {"two": 2}
    assert b.recv_bytes() == b"three"
    assert b.recv_bytes() == b"four"
    # Duplex: the other way too.
    b.send([1, 2, 3])
    assert a.recv() == [1, 2, 3]


def test_any_buffer_is_sent_as_its_bytes():
    a, b = ferry.Pipe()
    a.send_bytes(array.array("d", [1.5, 2.5]))
    assert b.recv_bytes() == array.array("d", [1.5, 2.5]).tobytes()


def test_offsets_are_checked_as_multiprocessing_checks_them():
    a, b = ferry.Pipe()
    with pytest.raises(ValueError):
        a.send_bytes(b"abc", 4)
    with pytest.raises(ValueError):
        a.send_bytes(b"abc", 1, 3)
    a.send_bytes(b"abc", 3)
    assert b.recv_bytes() == b""


def test_every_size_from_empty_to_64_mib_arrives_whole():
    a, b = ferry.Pipe()
    sizes = [0, 1, 63, 64, 4095, 4096, 65535, 65536, 262144, 1 << 20, 16 << 20, 64 << 20]
    payloads = {n: os.urandom(min(n, 1 << 16)) * max(1, n // (1 << 16)) for n in sizes}
    payloads = {n: p[:n].ljust(n, b"\x01") for n, p in payloads.items()}

    def send():
        for n in sizes:
            a.send_bytes(payloads[n])

    sender = threading.Thread(target=send)
    sender.start()
    for n in sizes:
        assert b.recv_bytes() == payloads[n], n
    sender.join()


def test_maxlength_refuses_and_keeps_the_message():
    a, b = ferry.Pipe()
    a.send_bytes(b"0123456789")
    with pytest.raises(OSError, match="bad message length"):
        b.recv_bytes(4)
    assert b.recv_bytes(10) == b"0123456789"


def test_recv_bytes_into_fills_a_buffer_or_says_too_short():
    a, b = ferry.Pipe()
    a.send_bytes(b"hello")
    buf = bytearray(8)
    assert b.recv_bytes_into(buf, 2) == 5
    assert buf == b"\0\0hello\0"
    a.send_bytes(b"much too long")
    with pytest.raises(multiprocessing.BufferTooShort) as caught:
        b.recv_bytes_into(bytearray(4))
    assert caught.value.args[0] == b"much too long"


def test_poll_waits_and_says_what_a_receive_would_do():
    a, b = ferry.Pipe()
    assert not b.poll()
    started = time.monotonic()
    assert not b.poll(0.05)
    assert time.monotonic() - started >= 0.04
    threading.Timer(0.05, a.send_bytes, (b"late",)).start()
    assert b.poll(5)
    assert b.recv_bytes() == b"late"
    assert not b.poll(0)


def test_the_end_of_the_peer_after_its_messages():
    a, b = ferry.Pipe()
    a.send_bytes(b"last words")
    a.close()
    assert a.closed
    assert b.poll(0)  # the message
    assert b.recv_bytes() == b"last words"
    assert b.poll(0)  # the end: a receive would not wait
    with pytest.raises(EOFError):
        b.recv_bytes()
    with pytest.raises(BrokenPipeError):
        b.send_bytes(b"to no one")


def test_closed_ends_refuse_and_context_managers_close():
    with ferry.Pipe()[0] as a:
        assert not a.closed
    assert a.closed
    with pytest.raises(OSError, match="closed"):
        a.send_bytes(b"x")


def test_one_way_pipes_refuse_the_other_way():
    reader, writer = ferry.Pipe(duplex=False)
    assert reader.readable and not reader.writable
    assert writer.writable and not writer.readable
    writer.send("x")
    assert reader.recv() == "x"
    with pytest.raises(OSError, match="read-only"):
        reader.send("y")
    with pytest.raises(OSError, match="write-only"):
        writer.recv()


def test_timeouts_raise_timeout_error():
    a, b = ferry.Pipe()
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        b.recv(timeout=0.05)
    assert 0.04 <= time.monotonic() - started < 2


def test_views_are_read_only_and_released_only_without_exports():
    a, b = ferry.Pipe()
    a.send_bytes(b"seen in place")
    view = b.recv_view()
    assert bytes(view) == b"seen in place" and len(view) == 13
    m = memoryview(view)
    assert m.readonly
    with pytest.raises(TypeError):
        m[0] = 0
    with pytest.raises(BufferError):
        view.release()
    m.release()
    view.release()
    assert view.released
    with pytest.raises(ValueError):
        bytes(view)


def test_a_loan_is_written_then_sent_or_given_back():
    a, b = ferry.Pipe()
    with a.loan(5) as loan:
        memoryview(loan)[:] = b"hello"
    assert b.recv_bytes() == b"hello"
    loan = a.loan(3)
    m = memoryview(loan)
    with pytest.raises(BufferError):
        loan.send()
    m.release()
    loan.abort()
    with pytest.raises(ValueError):
        loan.send()
    with pytest.raises(RuntimeError):
        with a.loan(3) as loan:
            raise RuntimeError("changed my mind")
    a.send_bytes(b"next")
    assert b.recv_bytes() == b"next"  # the aborted loans sent nothing


def test_descriptors_travel_and_are_duplicates():
    a, b = ferry.Pipe()
    r, w = os.pipe()
    a.send_fds(b"a pipe", [r, w])
    data, fds = b.recv_fds()
    assert data == b"a pipe" and len(fds) == 2
    os.write(fds[1], b"through")
    assert os.read(r, 7) == b"through"
    for fd in [r, w, *fds]:
        os.close(fd)
    with pytest.raises(OSError):
        a.send_fds(b"closed", [r])


def test_ends_travel_inside_objects():
    a, b = ferry.Pipe()
    c, d = ferry.Pipe()
    a.send({"reply_to": c})
    assert c.closed  # it went with the message
    got = b.recv()["reply_to"]
    got.send("through the moved end")
    assert d.recv() == "through the moved end"
    with pytest.raises(ValueError):
        a.send([a])


def test_one_end_is_safe_from_many_threads():
    a, b = ferry.Pipe()
    per, threads = 2000, 8

    def send(t):
        for i in range(per):
            a.send((t, i, b"x" * (i % 300)))

    senders = [threading.Thread(target=send, args=(t,)) for t in range(threads)]
    got = {t: [] for t in range(threads)}
    lock = threading.Lock()

    def receive():
        for _ in range(per * threads // 4):
            t, i, _ = b.recv()
            with lock:
                got[t].append(i)

    receivers = [threading.Thread(target=receive) for _ in range(4)]
    for t in senders + receivers:
        t.start()
    for t in senders + receivers:
        t.join()
    for t in range(threads):
        assert sorted(got[t]) == list(range(per))


def test_a_pickled_end_is_claimed_once():
    a, b = ferry.Pipe()
    data = pickle.dumps(b)
    assert b.closed
    again = pickle.loads(data)
    a.send("after the hand-off")
    assert again.recv() == "after the hand-off"
    with pytest.raises(EOFError, match="already"):
        pickle.loads(data)


def test_a_receive_of_parts_keeps_its_deadline_and_loses_nothing():
    a, b = ferry.Pipe()
    buffers = []
    data = pickle.dumps(pickle.PickleBuffer(bytearray(b"the part")), protocol=5,
                        buffer_callback=buffers.append)
    head = b"\xffferry\x01\x00" + (1).to_bytes(4, "little") + (0).to_bytes(4, "little") + data
    a.send_bytes(head)  # a pickle in parts whose one part is late
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        b.recv(timeout=0.05)
    assert time.monotonic() - started < 2
    with pytest.raises(ValueError, match="half received"):
        b.recv_bytes(timeout=0)
    a.send_bytes(b"the part")
    assert bytes(b.recv(timeout=5)) == b"the part"
    a.send_bytes(b"next")
    assert b.recv_bytes() == b"next"
