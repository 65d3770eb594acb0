"""The benchmark runs (a check, not a measurement: figures come from
`python -m ferry.bench` on a quiet machine)."""

import json

from ferry import bench


def test_the_benchmark_runs_every_kind(tmp_path, capsys):
    out = tmp_path / "rows.json"
    bench.main(["--quick", "--placement", "unpinned", "--json", str(out)])
    rows = json.loads(out.read_text())
    transports = {r["transport"] for r in rows}
    assert {"ferry-bytes", "mp-pipe-bytes", "ferry-pickle", "mp-pipe-pickle", "mp-queue",
            "ferry-in-place", "shm-pipe", "copy-floor", "ferry-array", "mp-pipe-array",
            "pyzmq-ipc"} <= transports
    assert all(r["p50_us"] > 0 for r in rows)
    assert "| ferry-bytes | 64 B | unpinned |" in capsys.readouterr().out
