"""Shared fixtures of the Python suite (run by `tests/pytest.rs`, or by hand
with the package installed: `FERRY_PEER` names the Rust peer binary)."""

import multiprocessing
import os
import shutil

import pytest


@pytest.fixture(params=["spawn", "forkserver"])
def mp(request):
    """A multiprocessing context of each start method that passes ends."""
    return multiprocessing.get_context(request.param)


@pytest.fixture
def peer():
    """The Rust peer (`src/bin/peer.rs`)."""
    path = os.environ.get("FERRY_PEER") or shutil.which("ferry-python-peer")
    if not path:
        pytest.skip("FERRY_PEER is not set (run through `cargo test -p ferry-python`)")
    return path


def open_fds():
    """This process's open descriptors."""
    return len(os.listdir("/proc/self/fd"))
