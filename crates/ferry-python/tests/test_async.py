"""Event loops: asyncio over add_reader with a hundred pipes at once, and
selectors over the level-triggered descriptor."""

import asyncio
import selectors
import threading

import ferry


def _clients(pairs, rounds):
    """Each round: a number to every pipe's server, then each reply (the
    number plus one) checked."""
    for r in range(rounds):
        for i, (a, _) in enumerate(pairs):
            a.send(i * 1000 + r)
        for i, (a, _) in enumerate(pairs):
            assert a.recv(timeout=30) == i * 1000 + r + 1


def test_a_hundred_pipes_in_one_asyncio_loop():
    pairs = [ferry.Pipe() for _ in range(100)]
    rounds = 20

    async def serve(conn):
        for _ in range(rounds):
            msg = await conn.recv_async()
            conn.send(msg + 1)

    async def main():
        t = threading.Thread(target=_clients, args=(pairs, rounds))
        t.start()
        await asyncio.wait_for(asyncio.gather(*(serve(b) for _, b in pairs)), 60)
        t.join()

    asyncio.run(main())


def test_the_descriptor_is_level_triggered():
    a, b = ferry.Pipe()
    sel = selectors.DefaultSelector()
    sel.register(b.fileno(), selectors.EVENT_READ)
    assert sel.select(0) == []
    a.send_bytes(b"one")
    a.send_bytes(b"two")
    assert len(sel.select(5)) == 1
    assert b.recv_bytes() == b"one"
    # Still readable: a message is still there.
    assert len(sel.select(0)) == 1
    assert b.recv_bytes() == b"two"
    # Not readable: a receive would wait.
    assert sel.select(0) == []
    a.close()
    # The end makes it readable, for good.
    assert len(sel.select(5)) == 1
    assert len(sel.select(0)) == 1


def test_wait_returns_the_ready_connections():
    pairs = [ferry.Pipe() for _ in range(5)]
    ends = [b for _, b in pairs]
    assert ferry.wait(ends, 0.01) == []
    pairs[3][0].send("x")
    assert ferry.wait(ends, 5) == [ends[3]]
    threading.Timer(0.05, pairs[1][0].send, ("y",)).start()
    assert ends[1] in ferry.wait([ends[1], ends[2]], 5)


def test_trio_waits_on_the_descriptor():
    import trio
    pairs = [ferry.Pipe() for _ in range(10)]
    rounds = 20

    async def recv(conn):
        # trio's own wait on a level-triggered descriptor, then a receive
        # that does not block.
        while not conn.poll():
            await trio.lowlevel.wait_readable(conn.fileno())
        return conn.recv()

    async def serve(conn):
        for _ in range(rounds):
            conn.send(await recv(conn) + 1)

    async def main():
        t = threading.Thread(target=_clients, args=(pairs, rounds))
        t.start()
        with trio.fail_after(60):
            async with trio.open_nursery() as nursery:
                for _, b in pairs:
                    nursery.start_soon(serve, b)
        t.join()

    trio.run(main)
