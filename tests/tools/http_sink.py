#!/usr/bin/python3
"""A one-shot HTTP sink for tests/test_callbacks_remote.c: listens on a free local port (written
to PORTFILE), records the path, content type and body of N POST requests to OUTFILE, then exits."""
import http.server, sys

port_file, out_file, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
seen = []

class Sink(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0))).decode()
        seen.append("%s|%s|%s|%s" % (self.path, self.headers.get("Content-Type"), self.headers.get("X-Token"), body))
        self.send_response(200)
        self.end_headers()
    def log_message(self, *args):
        pass

server = http.server.HTTPServer(("127.0.0.1", 0), Sink)
server.timeout = 30
with open(port_file + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
import os; os.rename(port_file + ".tmp", port_file)
while len(seen) < n:
    server.handle_request()
with open(out_file, "w") as f:
    f.write("\n".join(seen) + "\n")
