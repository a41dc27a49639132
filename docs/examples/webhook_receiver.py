"""Receive cortex-workers webhooks and verify each one (docs/webhooks.md).

Run with CORTEX_URL and CORTEX_API_KEY set; the server must allow the receiver's host
(`CORTEX_WEBHOOK_ALLOWED_PRIVATE_HOSTS=127.0.0.1`) since this example listens on loopback.
"""

import http.server
import os
import threading
import time

import httpx
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

api = httpx.Client(
    base_url=os.environ["CORTEX_URL"],
    headers={"Authorization": f"Bearer {os.environ['CORTEX_API_KEY']}"},
)
seen: dict[str, dict] = {}  # webhook-id -> event: a retried event is handled once
secret = ""


class Receiver(http.server.BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["content-length"]))
        try:
            event = Webhook(secret).verify(body, dict(self.headers))
        except WebhookVerificationError:
            self.send_response(401)  # not from us, or replayed too late
        else:
            seen.setdefault(self.headers["webhook-id"], event)
            self.send_response(204)  # any 2xx ends the retries
        self.end_headers()


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
threading.Thread(target=server.serve_forever, daemon=True).start()

# Subscribe: the answer carries the signing secret, shown this once.
hook = api.post(
    "/v1/webhooks",
    json={"url": f"http://127.0.0.1:{server.server_port}/hooks", "events": ["job.completed"]},
).json()
secret = hook["secret"]

# Something that completes: a job (the scripted model answers from metadata.script).
job = api.post(
    "/v1/jobs",
    json={
        "instructions": "Say whether the review is positive.",
        "input": "I love it",
        "result_schema": {"type": "object", "properties": {"positive": {"type": "boolean"}}},
        "metadata": {"script": [{"text": '{"positive": true}'}]},
    },
).json()

deadline = time.monotonic() + 30
while not seen and time.monotonic() < deadline:
    time.sleep(0.2)
(event,) = seen.values()
print(event["type"], event["data"]["job_id"] == job["id"], event["data"]["status"])

for delivery in api.get(f"/v1/webhooks/{hook['id']}/deliveries").json():
    print(
        delivery["event_type"], delivery["status"], [a["status_code"] for a in delivery["attempts"]]
    )
api.delete(f"/v1/webhooks/{hook['id']}")
server.shutdown()
