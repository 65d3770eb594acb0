"""``python -m ferry.bench``: ferry against what Python has, in one run.

Round trips between this process and a child it starts (``spawn``), which
echoes each message, for each transport, size and placement:

- ``ferry-bytes`` / ``mp-pipe-bytes``: ``send_bytes``/``recv_bytes``;
- ``ferry-pickle`` / ``mp-pipe-pickle`` / ``mp-queue``: ``send``/``recv``
  (``put``/``get``) of a ``bytes`` object;
- ``ferry-in-place`` / ``shm-pipe``: each message written once, in place in
  shared memory, by its sender (one ``memcpy`` of a payload it holds), and
  read in place by its receiver (its first and last 8 bytes checked, no
  copy): a ferry loan, received as a view; against a
  ``multiprocessing.shared_memory`` block with a ``multiprocessing.Pipe``
  doorbell (the same two copies per round trip); ``copy-floor`` is those two
  copies alone, in this process, with no message: what neither can go
  below;
- ``ferry-array`` / ``mp-pipe-array``: ``send``/``recv`` of a dict holding a
  numpy array of the size (pickle protocol 5 with out-of-band buffers for
  ferry: the array is copied once, into shared memory, and received in
  place; ``multiprocessing`` pickles it in band);
- ``pyzmq-ipc``: a ``zmq.PAIR`` over ``ipc://``, if pyzmq is installed.

Placements: ``split`` (this process on CPU 0, the child on CPU 1) and
``same`` (both on CPU 0). Every figure is a median over the row's round
trips (p50, p99); ratios are to the ``multiprocessing`` row of the same
kind, size and placement in this run. The issue's targets are checked at
the end.
"""

import argparse
import json
import multiprocessing
import os
import statistics
import sys
import time

import ferry

KINDS = {
    "bytes": ["ferry-bytes", "mp-pipe-bytes", "pyzmq-ipc"],
    "pickle": ["ferry-pickle", "mp-pipe-pickle", "mp-queue"],
    "in-place": ["ferry-in-place", "shm-pipe", "copy-floor"],
    "array": ["ferry-array", "mp-pipe-array"],
}
BASELINE = {
    "bytes": "mp-pipe-bytes",
    "pickle": "mp-pipe-pickle",
    "in-place": "shm-pipe",
    "array": "mp-pipe-array",
}
SIZES = {
    "bytes": [64, 144, 65536, 1 << 20],
    "pickle": [64, 144, 65536, 1 << 20],
    "in-place": [1 << 20],
    "array": [1 << 20, 100_000_000],
}


def _pin(cpu):
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})


def _count(size, quick):
    count = 20000 if size <= 1024 else 5000 if size <= 65536 else 500 if size <= 1 << 20 else 10
    return max(3, count // 20) if quick else count


# The children: each echoes until its parent closes.


def _child_bytes(conn, cpu):
    """Echoes bytes: a ferry or a multiprocessing connection."""
    _pin(cpu)
    try:
        while True:
            conn.send_bytes(conn.recv_bytes())
    except EOFError:
        pass


def _child_objects(conn, cpu):
    """Echoes objects: a ferry or a multiprocessing connection."""
    _pin(cpu)
    try:
        while True:
            conn.send(conn.recv())
    except EOFError:
        pass


def _child_ferry_in_place(conn, cpu):
    _pin(cpu)
    reply = os.urandom(1 << 20)
    try:
        while True:
            with conn.recv_view() as view:
                n = len(view)
                m = memoryview(view)
                _check(m, n)
                m.release()
            with conn.loan(n) as loan:
                memoryview(loan)[:] = memoryview(reply)[:n]
    except EOFError:
        pass


def _check(m, n):
    """Reads a received message in place: its first and last 8 bytes."""
    if n >= 16:
        m[:8].tobytes()
        m[n - 8 : n].tobytes()


def _child_mp_queue(inbox, outbox, cpu):
    _pin(cpu)
    while True:
        obj = inbox.get()
        if obj is None:
            return
        outbox.put(obj)


def _child_shm(conn, name, cpu):
    from multiprocessing import shared_memory

    _pin(cpu)
    shm = shared_memory.SharedMemory(name=name)
    buf = shm.buf
    half = len(buf) // 2
    reply = os.urandom(half)
    try:
        while True:
            n = int.from_bytes(conn.recv_bytes(), "little")
            _check(buf, n)
            buf[half : half + n] = memoryview(reply)[:n]
            conn.send_bytes(n.to_bytes(8, "little"))
    except EOFError:
        pass
    finally:
        del buf
        shm.close()


def _child_zmq(address, cpu):
    import zmq

    _pin(cpu)
    sock = zmq.Context.instance().socket(zmq.PAIR)
    sock.connect(address)
    while True:
        msg = sock.recv(copy=False)
        if len(msg) == 0:
            return
        sock.send(msg, copy=False)


# One row: start the child, time the round trips, stop it.


def _row(ctx, transport, size, placement, count):
    parent_cpu, child_cpu = {"split": (0, 1), "same": (0, 0), "unpinned": (None, None)}[placement]
    _pin(parent_cpu)
    payload = os.urandom(size) if size <= 1 << 20 else b"\x01" * size
    closers = []
    if transport in ("ferry-bytes", "ferry-pickle", "ferry-in-place", "ferry-array"):
        a, b = ferry.Pipe()
        target = {
            "ferry-bytes": _child_bytes,
            "ferry-pickle": _child_objects,
            "ferry-in-place": _child_ferry_in_place,
            "ferry-array": _child_objects,
        }[transport]
        p = ctx.Process(target=target, args=(b, child_cpu))
        closers.append(a.close)
        if transport == "ferry-bytes":
            def rt():
                a.send_bytes(payload)
                return a.recv_bytes()
        elif transport == "ferry-pickle":
            def rt():
                a.send(payload)
                return a.recv()
        elif transport == "ferry-in-place":
            def rt():
                with a.loan(size) as loan:
                    memoryview(loan)[:] = payload
                with a.recv_view() as view:
                    m = memoryview(view)
                    _check(m, size)
                    n = len(m)
                    m.release()
                return range(n)
        else:
            import numpy as np

            arr = np.frombuffer(payload, dtype=np.uint8)

            def rt():
                a.send({"arr": arr, "n": size})
                return a.recv()["arr"]
    elif transport in ("mp-pipe-bytes", "mp-pipe-pickle", "mp-pipe-array"):
        a, b = ctx.Pipe()
        target = _child_bytes if transport == "mp-pipe-bytes" else _child_objects
        p = ctx.Process(target=target, args=(b, child_cpu))
        closers.append(a.close)
        if transport == "mp-pipe-bytes":
            def rt():
                a.send_bytes(payload)
                return a.recv_bytes()
        elif transport == "mp-pipe-pickle":
            def rt():
                a.send(payload)
                return a.recv()
        else:
            import numpy as np

            arr = np.frombuffer(payload, dtype=np.uint8)

            def rt():
                a.send({"arr": arr, "n": size})
                return a.recv()["arr"]
    elif transport == "mp-queue":
        inbox, outbox = ctx.Queue(), ctx.Queue()
        p = ctx.Process(target=_child_mp_queue, args=(inbox, outbox, child_cpu))
        closers.append(lambda: inbox.put(None))

        def rt():
            inbox.put(payload)
            return outbox.get()
    elif transport == "shm-pipe":
        from multiprocessing import shared_memory

        shm = shared_memory.SharedMemory(create=True, size=2 * size)
        buf = shm.buf
        a, b = ctx.Pipe()
        p = ctx.Process(target=_child_shm, args=(b, shm.name, child_cpu))
        header = size.to_bytes(8, "little")

        def rt():
            buf[:size] = payload
            a.send_bytes(header)
            a.recv_bytes()
            _check(buf[size : 2 * size], size)
            return range(size)

        def close_shm():
            a.close()
            p.join(30)
            buf.release()
            shm.close()
            shm.unlink()

        closers.append(close_shm)
    elif transport == "copy-floor":
        from multiprocessing import shared_memory

        shm = shared_memory.SharedMemory(create=True, size=2 * size)
        buf = shm.buf
        reply = os.urandom(size)

        class _NoChild:
            exitcode = 0

            def start(self):
                pass

            def join(self, _=None):
                pass

        p = _NoChild()

        def rt():
            buf[:size] = payload
            _check(buf[size : 2 * size], size)
            buf[size : 2 * size] = reply
            _check(buf[:size], size)
            return range(size)

        def close_floor():
            buf.release()
            shm.close()
            shm.unlink()

        closers.append(close_floor)
    elif transport == "pyzmq-ipc":
        try:
            import zmq
        except ImportError:
            return None
        address = f"ipc:///tmp/ferry-bench-{os.getpid()}.ipc"
        sock = zmq.Context.instance().socket(zmq.PAIR)
        sock.bind(address)
        p = ctx.Process(target=_child_zmq, args=(address, child_cpu))
        closers.append(lambda: sock.send(b""))

        def rt():
            sock.send(payload, copy=False)
            return sock.recv(copy=False)
    else:
        raise ValueError(transport)
    p.start()
    try:
        for _ in range(max(2, count // 10)):
            rt()
        times = []
        for _ in range(count):
            start = time.perf_counter_ns()
            got = rt()
            times.append(time.perf_counter_ns() - start)
        if len(got) != size:
            raise AssertionError(f"{transport}: {len(got)} bytes back, {size} sent")
    finally:
        for close in closers:
            close()
        p.join(30)
        if p.exitcode is None:
            p.kill()
    times.sort()
    return {
        "p50_us": times[len(times) // 2] / 1000,
        "p99_us": times[min(len(times) - 1, len(times) * 99 // 100)] / 1000,
    }


def _label(size):
    if size >= 1 << 20 and size % (1 << 20) == 0:
        return f"{size >> 20} MiB"
    if size >= 1_000_000 and size % 1_000_000 == 0:
        return f"{size // 1_000_000} MB"
    if size >= 1024 and size % 1024 == 0:
        return f"{size >> 10} KiB"
    return f"{size} B"


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m ferry.bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--placement", default="split,same", help="split, same, unpinned (comma-separated)")
    parser.add_argument("--repeat", type=int, default=1, help="runs of every row, interleaved; medians reported")
    parser.add_argument("--quick", action="store_true", help="a twentieth of the round trips")
    parser.add_argument("--kinds", default=",".join(KINDS), help="bytes, pickle, in-place, array")
    parser.add_argument("--json", help="also write the rows to this file")
    args = parser.parse_args(argv)
    if (os.cpu_count() or 1) < 2 and "split" in args.placement:
        print("one CPU: the split placement is skipped", file=sys.stderr)
        args.placement = ",".join(p for p in args.placement.split(",") if p != "split")
    ctx = multiprocessing.get_context("spawn")
    plan = [
        (kind, transport, size, placement)
        for placement in args.placement.split(",")
        for kind in args.kinds.split(",")
        for size in SIZES[kind]
        for transport in KINDS[kind]
    ]
    runs = {row: [] for row in plan}
    total = len(plan) * args.repeat
    done = 0
    started = time.monotonic()
    for run in range(args.repeat):
        for row in plan:
            kind, transport, size, placement = row
            done += 1
            result = _row(ctx, transport, size, placement, _count(size, args.quick))
            if result is None:
                print(f"[{done}/{total}] {transport}: not installed, skipped", file=sys.stderr)
                continue
            runs[row].append(result)
            print(
                f"[{done}/{total} run {run + 1}] {transport} {_label(size)} ({placement}): "
                f"p50 {result['p50_us']:.2f} us, p99 {result['p99_us']:.2f} us",
                file=sys.stderr,
            )
    rows = []
    for (kind, transport, size, placement), results in runs.items():
        if not results:
            continue
        rows.append(
            {
                "kind": kind,
                "transport": transport,
                "size": size,
                "placement": placement,
                "p50_us": statistics.median(r["p50_us"] for r in results),
                "p99_us": statistics.median(r["p99_us"] for r in results),
                "p50_min_max": [min(r["p50_us"] for r in results), max(r["p50_us"] for r in results)],
            }
        )
    base = {
        (r["kind"], r["size"], r["placement"]): r["p50_us"]
        for r in rows
        if r["transport"] == BASELINE[r["kind"]]
    }
    for r in rows:
        b = base.get((r["kind"], r["size"], r["placement"]))
        r["ratio"] = r["p50_us"] / b if b else None
    print(f"\npython -m ferry.bench: {len(rows)} rows, {args.repeat} run(s), {time.monotonic() - started:.0f} s; "
          f"Python {sys.version.split()[0]}, {os.cpu_count()} CPUs\n")
    print(f"| transport | size | placement | p50 µs | p99 µs | p50 min–max | ×baseline |")
    print("|---|---:|---|---:|---:|---:|---:|")
    for r in rows:
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.3f}"
        lo, hi = r["p50_min_max"]
        print(
            f"| {r['transport']} | {_label(r['size'])} | {r['placement']} | {r['p50_us']:.2f} | "
            f"{r['p99_us']:.2f} | {lo:.2f}–{hi:.2f} | {ratio} ({BASELINE[r['kind']]}) |"
        )
    print("\nTargets (issue 35):")
    find = {(r["transport"], r["size"], r["placement"]): r for r in rows}
    checks = [
        ("ferry-bytes", 64, "split", "p50 ≤ 5 µs", lambda r: r["p50_us"] <= 5.0),
        ("ferry-bytes", 64, "split", "≥ 8× faster than mp-pipe-bytes", lambda r: r["ratio"] <= 1 / 8),
        ("ferry-in-place", 1 << 20, "split", "≤ 0.7× shm-pipe", lambda r: r["ratio"] <= 0.7),
        ("ferry-in-place", 1 << 20, "same", "≤ 0.7× shm-pipe", lambda r: r["ratio"] <= 0.7),
        ("ferry-array", 1 << 20, "split", "≤ 0.5× mp-pipe-array", lambda r: r["ratio"] <= 0.5),
        ("ferry-array", 1 << 20, "same", "≤ 0.5× mp-pipe-array", lambda r: r["ratio"] <= 0.5),
    ]
    for transport, size, placement, what, ok in checks:
        r = find.get((transport, size, placement))
        if r is None or r["ratio"] is None:
            continue
        verdict = "met" if ok(r) else "NOT met"
        print(f"- {transport} {_label(size)} ({placement}): {what}: {verdict} "
              f"(p50 {r['p50_us']:.2f} µs, ×{r['ratio']:.3f})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
