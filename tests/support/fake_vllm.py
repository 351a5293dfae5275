"""Just enough of vLLM's OpenAI server for the RL tests: health, models, chat with token ids/logprobs, LoRA load/unload.

Used in-process (:class:`FakeVLLM`, a real HTTP server on 127.0.0.1) and as a server *process* started
the way `prime rl run` starts vLLM from another environment (``inference.vllm_command = [python,
this file]``): then it reads the flags RL appends (``--port``, ``--served-model-name``), writes them
and its ``CUDA_VISIBLE_DEVICES`` to the JSON file named by ``$FAKE_VLLM_RECORD``, and serves until
terminated.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

REPLY = {
    "prompt_token_ids": [1, 2, 3],
    "choices": [
        {
            "message": {"role": "assistant", "content": "42"},
            "finish_reason": "stop",
            "token_ids": [52, 50, 2],
            "logprobs": {
                "content": [
                    {"token": "4", "logprob": -0.5},
                    {"token": "2", "logprob": -0.25},
                    {"token": "", "logprob": -0.1},
                ]
            },
        }
    ],
    "usage": {"prompt_tokens": 3, "completion_tokens": 3},
}


class FakeVLLM:
    """A fake vLLM server on ``port``; ``lora_routes=False`` acts like a server without runtime LoRA loading."""

    def __init__(self, port: int, served_name: str = "base", lora_routes: bool = True):
        self.calls: list[tuple[str, dict]] = []
        self.loaded: list[str] = []
        self.served_name = served_name
        self.lora_routes = lora_routes
        self.server = ThreadingHTTPServer(("127.0.0.1", port), _handler(self))
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def models(self) -> dict:
        adapters = [{"id": name, "parent": self.served_name} for name in self.loaded]
        return {"object": "list", "data": [{"id": self.served_name, "parent": None}, *adapters]}

    def post(self, path: str, body: dict) -> tuple[int, dict]:
        self.calls.append((path, body))
        if path == "/v1/chat/completions":
            return 200, REPLY
        if "lora_adapter" in path and not self.lora_routes:
            return 404, {"detail": "Not Found"}
        if path == "/v1/load_lora_adapter":
            self.loaded.append(body["lora_name"])
        elif path == "/v1/unload_lora_adapter":
            if body["lora_name"] not in self.loaded:
                return 404, {"object": "error", "message": f"The lora adapter '{body['lora_name']}' cannot be found."}
            self.loaded.remove(body["lora_name"])
        return 200, {}

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _handler(owner: FakeVLLM) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):  # quiet
            return

        def _reply(self, code: int, body: dict) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            if self.path == "/health":
                self._reply(200, {})
            elif self.path == "/v1/models":
                self._reply(200, owner.models())
            else:
                self._reply(404, {"detail": "Not Found"})

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            self._reply(*owner.post(self.path, body))

    return Handler


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--served-model-name", default="base")
    args, _ = parser.parse_known_args(argv)
    record = os.environ.get("FAKE_VLLM_RECORD")
    if record:
        with open(record, "w") as handle:
            json.dump({"argv": argv, "CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES"),
                       "lora_updating": os.environ.get("VLLM_ALLOW_RUNTIME_LORA_UPDATING")}, handle)
    server = FakeVLLM(args.port, args.served_model_name)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    while not stop.wait(0.2):
        pass
    server.close()


if __name__ == "__main__":
    main(sys.argv[1:])
