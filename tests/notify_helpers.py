"""A local HTTP receiver for the notification tests: records each request, answers as scripted."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import attrs


@attrs.define
class Receiver:
    url: str
    requests: list[tuple[dict[str, str], bytes]] = attrs.field(factory=list)
    codes: list[int] = attrs.field(factory=list)  # answers in turn; 200 once they run out

    def wait_for(self, count: int, timeout: float = 60) -> list[tuple[dict[str, str], bytes]]:
        deadline = time.monotonic() + timeout
        while len(self.requests) < count:
            assert time.monotonic() < deadline, f"only {len(self.requests)} of {count} requests came"
            time.sleep(0.02)
        return list(self.requests)


@contextmanager
def receiver(codes: list[int] | None = None,
             hold: Callable[[], None] | None = None) -> Iterator[Receiver]:
    """An HTTP server on 127.0.0.1 for the duration; ``hold`` runs before each answer."""
    lock = threading.Lock()
    box: list[Receiver] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - the http.server name
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            if hold:
                hold()
            with lock:
                box[0].requests.append(({k.lower(): v for k, v in self.headers.items()}, body))
                code = box[0].codes.pop(0) if box[0].codes else 200
            try:
                self.send_response(code)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")
            except OSError:  # the client gave up waiting (the hanging-sink test): nothing to answer
                pass

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    box.append(Receiver(f"http://127.0.0.1:{server.server_address[1]}/hook?token=t0ps3cret", codes=list(codes or [])))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield box[0]
    finally:
        server.shutdown()
        server.server_close()


@attrs.define
class Mailbox:
    """What a minimal SMTP server on 127.0.0.1 received: (sender, recipients, message bytes)."""

    port: int
    messages: list[tuple[str, list[str], bytes]] = attrs.field(factory=list)
    encrypted: list[bool] = attrs.field(factory=list)  # per message: whether it came over TLS
    auth: list[str] = attrs.field(factory=list)  # the AUTH lines clients sent


@contextmanager
def smtp_server(tls: tuple[str, str] | None = None) -> Iterator[Mailbox]:
    """Enough of SMTP (RFC 5321) for smtplib: EHLO, AUTH PLAIN, MAIL, RCPT, DATA, QUIT, and
    STARTTLS (RFC 3207) when ``tls`` names a certificate and key file."""
    import socket
    import socketserver
    import ssl

    class Handler(socketserver.StreamRequestHandler):
        def reply(self, line: str) -> None:
            self.wfile.write(line.encode() + b"\r\n")

        def handle(self) -> None:
            self.reply("220 localhost test SMTP")
            sender, recipients, encrypted = "", [], False
            while line := self.rfile.readline():
                verb = line.decode().strip().split(" ", 1)[0].upper()
                text = line.decode().strip()
                if verb in ("EHLO", "HELO"):
                    offer = b"250-STARTTLS\r\n" if tls and not encrypted else b""
                    self.wfile.write(b"250-localhost\r\n" + offer + b"250 AUTH PLAIN\r\n")
                elif verb == "STARTTLS" and tls:
                    self.reply("220 go ahead")
                    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
                    context.load_cert_chain(*tls)
                    self.request = context.wrap_socket(self.request, server_side=True)
                    self.rfile, self.wfile = self.request.makefile("rb"), self.request.makefile("wb", buffering=0)
                    encrypted = True
                elif verb == "AUTH":
                    box[0].auth.append(text)
                    self.reply("235 ok")
                elif verb == "MAIL":
                    sender, recipients = text.split(":", 1)[1].strip().strip("<>"), []
                    self.reply("250 ok")
                elif verb == "RCPT":
                    recipients.append(text.split(":", 1)[1].strip().strip("<>"))
                    self.reply("250 ok")
                elif verb == "DATA":
                    self.reply("354 go on")
                    data = b""
                    while (chunk := self.rfile.readline()) not in (b".\r\n", b""):
                        data += chunk[1:] if chunk.startswith(b"..") else chunk
                    box[0].messages.append((sender, recipients, data))
                    box[0].encrypted.append(encrypted)
                    self.reply("250 queued")
                elif verb == "QUIT":
                    self.reply("221 bye")
                    return
                else:
                    self.reply("250 ok")

    class Server(socketserver.ThreadingTCPServer):
        daemon_threads = True
        address_family = socket.AF_INET

    server = Server(("127.0.0.1", 0), Handler)
    box = [Mailbox(server.server_address[1])]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield box[0]
    finally:
        server.shutdown()
        server.server_close()
