"""A fake 'vLLM server' for the repro cleanup tests: same module path and flags as the real one.

It serves /health, /metrics and /v1/completions on 127.0.0.1:--port, spawns a child that ignores SIGTERM
and listens on a second port (so teardown must escalate to SIGKILL and reach grandchildren), writes a temp
file into $TMPDIR and a socket-like file into $FAKE_SYSTMP (named like LMCache's IPC sockets), and records
every pid and port in $FAKE_STATE_DIR so the test can check that nothing survives.
"""

import json
import os
import subprocess
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

CHILD = r"""
import os, signal, socket, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen()
state = sys.argv[1]
with open(os.path.join(state, "child.json"), "a") as f:
    f.write('{"pid": %d, "port": %d}\n' % (os.getpid(), s.getsockname()[1]))
while True:
    time.sleep(1)
"""


def main() -> None:
    port = int(sys.argv[sys.argv.index("--port") + 1])
    state = os.environ["FAKE_STATE_DIR"]
    delay = float(os.environ.get("FAKE_DELAY_S", "0.5"))
    open(os.path.join(os.environ["TMPDIR"], "fake-temp-file"), "w").close()
    sys_tmp = os.environ.get("FAKE_SYSTMP")
    if sys_tmp:
        open(os.path.join(sys_tmp, f"engine_fake{os.getpid()}_service_lookup_lmcache_rpc_port_0"), "w").close()
    child = subprocess.Popen([sys.executable, "-c", CHILD, state])

    class H(BaseHTTPRequestHandler):
        def log_message(self, *a):  # keep the log quiet
            pass

        def _send(self, code: int, body: bytes, ctype: str = "application/json") -> None:
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            if self.path == "/health":
                self._send(200, b"")
            elif self.path == "/metrics":
                self._send(200, b"vllm:prefix_cache_queries_total 10\nvllm:prefix_cache_hits_total 5\n",
                           "text/plain")
            else:
                self._send(404, b"{}")

        def do_POST(self):
            n = int(self.headers.get("Content-Length", "0"))
            req = json.loads(self.rfile.read(n))
            if self.path == "/tokenize":  # a toy tokenizer: one id per word (its length), 1 = BOS
                ids = ([1] if req.get("add_special_tokens") else []) + [len(w) for w in req["prompt"].split()]
                self._send(200, json.dumps({"tokens": ids}).encode())
                return
            with open(os.path.join(state, "prompts.jsonl"), "a") as f:
                f.write(json.dumps(req["prompt"]) + "\n")
            time.sleep(delay)
            # one write per line: print() from several threads can interleave text and newline
            sys.stdout.write("LMCache INFO: Reqid: cmpl-x, Total tokens 512, Inference Engine computed tokens: 0, "
                             "LMCache hit tokens: 256, need to load: 256\n")
            sys.stdout.flush()
            choice = {"text": " ba", "token_ids": [7, 8] if req.get("return_token_ids") else None}
            body = {"choices": [choice], "usage": {"prompt_tokens": 512, "completion_tokens": 1}}
            self._send(200, json.dumps(body).encode())

    srv = ThreadingHTTPServer(("127.0.0.1", port), H)
    with open(os.path.join(state, "server.json"), "a") as f:
        f.write(json.dumps({"pid": os.getpid(), "port": port, "child_spawned": child.pid}) + "\n")
    print("fake server up", flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    main()
