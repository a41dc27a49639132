"""An LLM function over HTTP: one job, then a batch (docs/jobs.md).

Run with CORTEX_URL and CORTEX_API_KEY set. The scripted model answers from
`metadata.script`, one reply per attempt; drop `metadata` to ask the configured model.
"""

import os
import time

import httpx

api = httpx.Client(
    base_url=os.environ["CORTEX_URL"],
    headers={"Authorization": f"Bearer {os.environ['CORTEX_API_KEY']}"},
)
schema = {
    "type": "object",
    "properties": {"sentiment": {"enum": ["positive", "negative"]}},
    "required": ["sentiment"],
}

# One job: the first answer is not valid, so it is retried with the validation error.
job = api.post(
    "/v1/jobs",
    json={
        "instructions": "Classify the review's sentiment.",
        "input": "Works great, arrived early.",
        "result_schema": schema,
        "max_attempts": 3,
        "metadata": {
            "script": [{"text": '{"sentiment": "great"}'}, {"text": '{"sentiment": "positive"}'}]
        },
    },
).json()
while (job := api.get(f"/v1/jobs/{job['id']}").json())["status"] not in ("succeeded", "failed"):
    time.sleep(0.2)
print(job["status"], job["result"], [a["error"] is None for a in job["attempts"]])

# A batch: the same instructions and schema over many inputs, one job each.
batch = api.post(
    "/v1/batches",
    json={
        "instructions": "Return the input as it is.",
        "result_schema": {"type": "object", "required": ["n"]},
        "inputs": [{"n": i} for i in range(5)],  # the scripted model echoes each input
    },
).json()
while (status := api.get(f"/v1/batches/{batch['id']}").json())["status"] != "completed":
    time.sleep(0.2)
page = api.get(f"/v1/batches/{batch['id']}/results", params={"offset": 0, "limit": 100}).json()
print(status["counts"]["succeeded"], [r["result"]["n"] for r in page["results"]])
