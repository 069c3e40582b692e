"""A minimal, fast JSON-RPC 2.0 HTTP/1.1 server for the round-trip baseline (stdlib only).

Why a second server next to the chaos server: the chaos server runs every batch element as
its own task so that it can bend replies on purpose, which makes a 100-request batch take
about 2 ms.  The overhead targets are stated against a plain loopback server (about 0.7 ms
for a 100-request batch with httpx), so the benchmark measures against both.  It answers
``echo`` correctly (result = params, in request order, notifications unanswered) and runs in
its own process so that its CPU never shares the client's GIL.

Run: ``python benchmarks/fastserver.py`` prints ``http://127.0.0.1:PORT/`` and serves forever.
"""

from __future__ import annotations

import json
import socket
import threading


def _answer(element: object) -> dict[str, object] | None:
    if not isinstance(element, dict) or "id" not in element:
        return None
    return {"jsonrpc": "2.0", "id": element["id"], "result": element.get("params")}


def _reply(body: bytes) -> bytes:
    value = json.loads(body)
    if isinstance(value, list):
        out: object = [r for r in map(_answer, value) if r is not None]
    else:
        out = _answer(value)
    return b"" if out is None else json.dumps(out, separators=(",", ":")).encode()


def _serve(conn: socket.socket) -> None:
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    buf = b""
    with conn:
        while True:
            while b"\r\n\r\n" not in buf:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                buf += chunk
            head, _, buf = buf.partition(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            while len(buf) < length:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                buf += chunk
            body, buf = buf[:length], buf[length:]
            out = _reply(body)
            conn.sendall(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                + str(len(out)).encode()
                + b"\r\n\r\n"
                + out
            )


def main() -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    print(f"http://127.0.0.1:{listener.getsockname()[1]}/", flush=True)
    while True:
        conn, _ = listener.accept()
        threading.Thread(target=_serve, args=(conn,), daemon=True).start()


if __name__ == "__main__":
    main()
