"""``Connection.recv_async``: a receive in a coroutine, waiting on the
connection's level-triggered descriptor with the running loop's
``add_reader`` (no thread)."""

import asyncio


async def recv_async(connection):
    loop = asyncio.get_running_loop()
    while True:
        try:
            return connection.recv(timeout=0)
        except TimeoutError:
            pass
        fd = connection.fileno()
        ready = loop.create_future()
        loop.add_reader(fd, lambda: ready.done() or ready.set_result(None))
        try:
            await ready
        finally:
            loop.remove_reader(fd)
