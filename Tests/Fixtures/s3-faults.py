#!/usr/bin/env python3
"""A fault injector between ckport and a real S3 server (SeaweedFS in the tests).

    python3 s3-faults.py UPSTREAM PLAN LOG

Listens on 127.0.0.1 (a free port, printed on the first line of standard output) and passes
every request to UPSTREAM unchanged (headers too, so the server checks ckport's own signature),
except where PLAN says otherwise. PLAN is a JSON file read again for every request: a list of
rules, each {"method": "PUT" or "*", "contains": text the path and query must contain,
"fault": "reset" | "503" | "500", "times": how many matching requests get it}. A rule counts
its matches from when it first appears in the file. Faults:

    reset   half of the request's body is read, then the connection is dropped (a TCP reset)
    503     the answer S3 gives a client to slow down (503, code SlowDown)
    500     S3's InternalError

LOG gets one JSON line per request: method, path with query, and the fault given (or null).
Only Python's standard library; nothing here answers for the server but the faults.
"""

import http.client
import json
import os
import signal
import socket
import struct
import sys
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

upstream = urllib.parse.urlsplit(sys.argv[1])
plan_path, log_path = sys.argv[2], sys.argv[3]
lock = threading.Lock()
counts = {}
HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "proxy-connection"}


def fault_for(method, target):
    try:
        with open(plan_path) as f:
            rules = json.load(f)
    except FileNotFoundError:
        rules = []
    with lock:
        for rule in rules:
            if rule.get("method", "*") not in ("*", method) or rule.get("contains", "") not in target:
                continue
            key = json.dumps(rule, sort_keys=True)
            if counts.get(key, 0) >= rule.get("times", 1):
                continue
            counts[key] = counts.get(key, 0) + 1
            return rule["fault"]
    return None


def error_body(code, message):
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f"<Error><Code>{code}</Code><Message>{message}</Message></Error>"
    ).encode()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def body(self, limit=None):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                if size == 0:
                    self.rfile.readline()
                    return data
                data += self.rfile.read(size)
                self.rfile.readline()
        length = int(self.headers.get("Content-Length", "0"))
        return self.rfile.read(length if limit is None else min(limit, length))

    def handle_any(self):
        fault = fault_for(self.command, self.path)
        with lock, open(log_path, "a") as log:
            log.write(json.dumps({"method": self.command, "target": self.path, "fault": fault}) + "\n")
        if fault == "reset":
            length = int(self.headers.get("Content-Length", "0"))
            self.body(limit=length // 2)
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()
            self.close_connection = True
            return
        body = self.body()
        if fault in ("503", "500"):
            status, code = (503, "SlowDown") if fault == "503" else (500, "InternalError")
            answer = error_body(code, "injected by the test's fault injector")
            self.send_response(status)
            self.send_header("Content-Type", "application/xml")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)
            return
        connection = http.client.HTTPConnection(upstream.hostname, upstream.port, timeout=120)
        connection.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
        for name, value in self.headers.items():
            if name.lower() not in HOP and name.lower() != "content-length":
                connection.putheader(name, value)
        if body or self.command in ("PUT", "POST"):
            connection.putheader("Content-Length", str(len(body)))
        connection.endheaders(body)
        answer = connection.getresponse()
        data = answer.read()
        self.send_response_only(answer.status, answer.reason)
        for name, value in answer.getheaders():
            if name.lower() not in HOP and name.lower() != "content-length":
                self.send_header(name, value)
        if self.command == "HEAD":
            self.send_header("Content-Length", answer.getheader("Content-Length", "0"))
        else:
            self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)
        connection.close()

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = handle_any


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
server.daemon_threads = True
# A child of a test runner may inherit a mask that blocks SIGTERM; and when the runner goes
# (ended, or crashed before it could stop this), so does this.
signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT})
parent = os.getppid()


def watch_parent():
    while os.getppid() == parent:
        threading.Event().wait(0.5)
    os._exit(0)


threading.Thread(target=watch_parent, daemon=True).start()
print(server.server_address[1], flush=True)
server.serve_forever()
