"""A minimal push-event receiver, as a backend service of yours would run one.

It listens on 127.0.0.1, verifies every delivery with the official Standard Webhooks library
(`pip install standardwebhooks`) using the client secret exactly as `clients/create` answered it
(`whsec_...`), answers 204 to a verified delivery and 401 to anything else, and appends each verified
event as one JSON line to `--events` (docs/quickstart.sh waits on that file).

    python docs/webhook_receiver.py --secret-file var/quickstart/secret --events var/quickstart/events.jsonl

The secret is read from `--secret-file` at each delivery (the quickstart registers the client, and so
learns the secret, after this receiver is already listening): until the file exists, deliveries get 503
and the service retries them. With `--port 0` (the default) the system picks a free port; the receiver
writes it to `--port-file`. A real receiver also deduplicates by the `webhook-id` header: delivery is at
least once.
"""

import argparse
import contextlib
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from standardwebhooks import Webhook, WebhookVerificationError


def make_handler(secret_file: Path, events_file: Path) -> type[BaseHTTPRequestHandler]:
    class Receiver(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if not secret_file.exists():
                self.answer(503, "no secret yet")
                return
            secret = secret_file.read_text().strip()
            try:
                event = Webhook(secret).verify(body, dict(self.headers))
            except WebhookVerificationError as exc:
                print(f"receiver: REJECTED {self.headers.get('webhook-id')}: {exc}", file=sys.stderr)
                self.answer(401, str(exc))
                return
            print(f"receiver: verified {event['type']} {event['id']}", file=sys.stderr, flush=True)
            with events_file.open("a") as out:
                out.write(json.dumps({"webhook_id": self.headers["webhook-id"], "event": event}) + "\n")
            self.answer(204)

        def answer(self, status: int, text: str = "") -> None:
            self.send_response(status)
            self.send_header("Content-Length", str(len(text.encode())))
            self.end_headers()
            self.wfile.write(text.encode())

        def log_message(self, format: str, *args) -> None:  # the verdicts above say enough
            pass

    return Receiver


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--port-file", type=Path)
    parser.add_argument("--secret-file", type=Path, required=True)
    parser.add_argument("--events", type=Path, required=True)
    args = parser.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", args.port), make_handler(args.secret_file, args.events))
    port = server.server_address[1]
    if args.port_file:  # written whole, then renamed: a reader never sees half of it
        args.port_file.with_suffix(".tmp").write_text(str(port))
        args.port_file.with_suffix(".tmp").replace(args.port_file)
    print(f"receiver: listening on http://127.0.0.1:{port}/", file=sys.stderr, flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()


if __name__ == "__main__":
    main()
