"""Ctrl-C during a blocking receive: a KeyboardInterrupt, soon, every time,
with nothing lost; and an idle receive that does not wake."""

import os
import signal
import time

import ferry


def test_sigint_interrupts_a_blocked_receive_promptly_a_hundred_times(mp):
    a, b = ferry.Pipe()
    report_r, report_w = ferry.Pipe(duplex=False)
    import children

    p = mp.Process(target=children.blocked_receiver, args=(b, report_w))
    p.start()
    assert report_r.recv_bytes(timeout=60) == b"waiting"
    late = []
    for i in range(1, 101):
        time.sleep(0.005)  # into the blocked wait
        sent = time.monotonic()
        os.kill(p.pid, signal.SIGINT)
        assert report_r.recv_bytes(timeout=10) == b"interrupted %d" % i
        late.append(time.monotonic() - sent)
        assert report_r.recv_bytes(timeout=10) == b"waiting"
    # Nothing lost: the queue is intact after a hundred interruptions.
    for word in [b"one", b"two", b"stop"]:
        a.send_bytes(word)
    for word in [b"one", b"two", b"stop"]:
        assert report_r.recv_bytes(timeout=10) == b"got:" + word
        if word != b"stop":
            assert report_r.recv_bytes(timeout=10) == b"waiting"
    p.join(30)
    assert p.exitcode == 0
    late.sort()
    assert late[-1] < 0.1, f"slowest KeyboardInterrupt {late[-1] * 1000:.1f} ms"


def _voluntary_switches(pid, tid):
    with open(f"/proc/{pid}/task/{tid}/status") as f:
        for line in f:
            if line.startswith("voluntary_ctxt_switches"):
                return int(line.split()[1])
    raise AssertionError("no voluntary_ctxt_switches")


def test_an_idle_blocked_receive_does_not_wake():
    import threading

    a, b = ferry.Pipe()
    tid = []

    def wait():
        tid.append(threading.get_native_id())
        b.recv_bytes()

    t = threading.Thread(target=wait)
    t.start()
    time.sleep(0.3)  # past the first wait, into poll
    before = _voluntary_switches(os.getpid(), tid[0])
    time.sleep(1.0)
    after = _voluntary_switches(os.getpid(), tid[0])
    a.send_bytes(b"wake up")
    t.join(10)
    assert after - before == 0, f"{after - before} wakeups in a second of idle waiting"
