"""Fixtures for tests against a real mem0 (``mem0ai``): an embeddings server serving evalloop's own
default embedder on loopback, and the REST wrapper of :mod:`support.mem0_rest` as a process.
Skips when ``mem0ai`` is not installed (``pip install -e ".[test,mem0]"``)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from support.loopback import JSONHandler, serving

needs_mem0 = pytest.mark.skipif(importlib.util.find_spec("mem0") is None,
                                reason="mem0ai is not installed (pip install -e '.[mem0]')")


def _embed_handler(embedder) -> type[BaseHTTPRequestHandler]:
    class Handler(JSONHandler):
        def do_POST(self) -> None:
            body = self.read_json()
            texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
            vectors = embedder.embed([str(t) for t in texts]).tolist()
            data = [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)]
            self.send_json(200, {"object": "list", "data": data, "model": body.get("model"),
                                 "usage": {"prompt_tokens": 0, "total_tokens": 0}})

    return Handler


@dataclass
class Mem0Server:
    url: str
    process: subprocess.Popen


@pytest.fixture(scope="module")
def mem0_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mem0Server]:
    """A real mem0 behind its REST shape on 127.0.0.1, with evalloop's embedder on loopback."""
    from evalloop.memory.embedders import default_embedder

    embedder = default_embedder()
    data = tmp_path_factory.mktemp("mem0")
    with serving(_embed_handler(embedder)) as embeddings:
        embed_url = f"http://127.0.0.1:{embeddings.server_address[1]}/v1"
        port_file = data / "port"
        env = {**os.environ, "MEM0_TELEMETRY": "False", "MEM0_DIR": str(data / "home"), "NO_PROXY": "127.0.0.1"}
        script = Path(__file__).with_name("mem0_rest.py")
        log = (data / "log").open("w")
        proc = subprocess.Popen([sys.executable, str(script), str(port_file), embed_url, str(embedder.dim),
                                 str(data)], env=env, stdout=subprocess.DEVNULL, stderr=log)
        try:
            deadline = time.monotonic() + 120
            while not port_file.exists():
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"mem0 REST wrapper did not start: {(data / 'log').read_text()[-2000:]}")
                time.sleep(0.1)
            yield Mem0Server(url=f"http://127.0.0.1:{port_file.read_text()}", process=proc)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
            log.close()
