"""Drives a memsift simulator with the official anthropic and openai SDKs.

If the SDKs can parse every answer, the simulator's wire format is what real clients expect.
Prints one line per operation and a closing "N passed, N failed" line; exits non-zero on failure.
The simulator's base URL comes from MEMSIFT_SIM_URL (e.g. http://127.0.0.1:PORT).
"""

import json
import os
import sys
import time
import traceback

import anthropic
import openai

BASE_URL = os.environ["MEMSIFT_SIM_URL"].rstrip("/")
KEY = "sk-sim-conformance"
TRANSCRIPT = (
    '<turn label="D1:1" role="user" speaker="Ana" at="2026-03-01T10:00:00Z">\n'
    "I just adopted a dog named Rex.\n</turn>\n"
    '<turn label="D1:2" role="assistant" at="2026-03-01T10:00:05Z">\nCongratulations!\n</turn>\n'
)
SYSTEM = "You extract durable memories from the transcript. Answer with a JSON array."
POLL_SECONDS = 0.1
POLL_LIMIT = 200

passed = 0
failed = 0


def check(name, operation):
    """Runs one operation; prints `ok NAME detail` or `FAIL NAME error`."""
    global passed, failed
    try:
        detail = operation()
        passed += 1
        print(f"ok    {name}: {detail}", flush=True)
    except Exception as error:  # noqa: BLE001 - every failure is reported, not raised
        failed += 1
        print(f"FAIL  {name}: {type(error).__name__}: {error}", flush=True)
        traceback.print_exc(file=sys.stderr)


def anthropic_checks():
    client = anthropic.Anthropic(base_url=BASE_URL, api_key=KEY, max_retries=0)
    state = {}
    custom_ids = [f"conformance-{n}" for n in range(3)]

    def create():
        batch = client.messages.batches.create(
            requests=[
                {
                    "custom_id": custom_id,
                    "params": {
                        "model": "claude-haiku-4-5",
                        "max_tokens": 1024,
                        "system": [{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral", "ttl": "1h"}}],
                        "messages": [{"role": "user", "content": TRANSCRIPT}],
                    },
                }
                for custom_id in custom_ids
            ]
        )
        assert batch.id.startswith("msgbatch_"), batch.id
        assert batch.processing_status == "in_progress", batch.processing_status
        assert batch.results_url is None, batch.results_url
        assert batch.request_counts.processing == len(custom_ids), batch.request_counts
        state["batch"] = batch
        return f"{batch.id} status={batch.processing_status}"

    def poll():
        batch = state["batch"]
        polls = 0
        while batch.processing_status != "ended":
            assert polls < POLL_LIMIT, "batch did not end"
            time.sleep(POLL_SECONDS)
            batch = client.messages.batches.retrieve(batch.id)
            polls += 1
        assert batch.results_url and batch.results_url.startswith("http"), batch.results_url
        state["batch"] = batch
        return f"ended after {polls} retrieve(s), succeeded={batch.request_counts.succeeded}"

    def results():
        lines = list(client.messages.batches.results(state["batch"].id))
        got = sorted(line.custom_id for line in lines)
        assert got == sorted(custom_ids), got
        assert all(line.result.type == "succeeded" for line in lines), [line.result.type for line in lines]
        usage = lines[0].result.message.usage
        return f"{len(lines)} result(s), first usage input={usage.input_tokens} output={usage.output_tokens}"

    def listing():
        page = client.messages.batches.list(limit=10)
        ids = [batch.id for batch in page.data]
        assert state["batch"].id in ids, ids
        return f"{len(ids)} batch(es), newest first={ids[0]}"

    def message():
        reply = client.messages.create(
            model="claude-haiku-4-5",
            max_tokens=512,
            system=[{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral", "ttl": "5m"}}],
            messages=[{"role": "user", "content": TRANSCRIPT}],
        )
        assert reply.id.startswith("msg_"), reply.id
        assert reply.stop_reason in ("end_turn", "max_tokens"), reply.stop_reason
        json.loads(reply.content[0].text)
        return f"{reply.id} stop_reason={reply.stop_reason} text={reply.content[0].text[:40]!r}"

    check("anthropic messages.batches.create", create)
    check("anthropic messages.batches.retrieve (poll)", poll)
    check("anthropic messages.batches.results", results)
    check("anthropic messages.batches.list", listing)
    check("anthropic messages.create", message)


def openai_checks():
    client = openai.OpenAI(base_url=f"{BASE_URL}/v1", api_key=KEY, max_retries=0)
    state = {}
    custom_ids = [f"conformance-{n}" for n in range(3)]

    def upload():
        lines = [
            {
                "custom_id": custom_id,
                "method": "POST",
                "url": "/v1/chat/completions",
                "body": {
                    "model": "gpt-4o-mini",
                    "max_completion_tokens": 512,
                    "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": TRANSCRIPT}],
                },
            }
            for custom_id in custom_ids
        ]
        content = "".join(json.dumps(line) + "\n" for line in lines).encode()
        uploaded = client.files.create(file=("memsift-conformance.jsonl", content), purpose="batch")
        assert uploaded.id.startswith("file-"), uploaded.id
        assert uploaded.bytes == len(content), uploaded.bytes
        state["file"] = uploaded
        return f"{uploaded.id} bytes={uploaded.bytes}"

    def create():
        batch = client.batches.create(
            input_file_id=state["file"].id,
            endpoint="/v1/chat/completions",
            completion_window="24h",
            metadata={"batch_uuid": "conformance-0001"},
        )
        assert batch.id.startswith("batch_"), batch.id
        assert batch.status == "validating", batch.status
        assert batch.metadata == {"batch_uuid": "conformance-0001"}, batch.metadata
        state["batch"] = batch
        return f"{batch.id} status={batch.status}"

    def poll():
        batch = state["batch"]
        walk = [batch.status]
        polls = 0
        while batch.status not in ("completed", "failed", "expired", "cancelled"):
            assert polls < POLL_LIMIT, "batch did not finish"
            time.sleep(POLL_SECONDS)
            batch = client.batches.retrieve(batch.id)
            polls += 1
            if walk[-1] != batch.status:
                walk.append(batch.status)
        assert batch.status == "completed", batch.status
        assert batch.output_file_id, "no output file"
        state["batch"] = batch
        return " -> ".join(walk)

    def download():
        text = client.files.content(state["batch"].output_file_id).text
        lines = [json.loads(line) for line in text.splitlines() if line.strip()]
        got = sorted(line["custom_id"] for line in lines)
        assert got == sorted(custom_ids), got
        assert all(line["response"]["status_code"] == 200 for line in lines)
        return f"{len(lines)} output line(s), error_file_id={state['batch'].error_file_id}"

    def listing():
        page = client.batches.list(limit=10)
        ids = [batch.id for batch in page.data]
        assert state["batch"].id in ids, ids
        return f"{len(ids)} batch(es)"

    def chat():
        completion = client.chat.completions.create(
            model="gpt-4o-mini",
            messages=[{"role": "system", "content": SYSTEM}, {"role": "user", "content": TRANSCRIPT}],
        )
        assert completion.id.startswith("chatcmpl-"), completion.id
        json.loads(completion.choices[0].message.content)
        usage = completion.usage
        return f"{completion.id} finish_reason={completion.choices[0].finish_reason} prompt_tokens={usage.prompt_tokens}"

    def embeddings():
        response = client.embeddings.create(model="text-embedding-3-small", input=["I adopted a dog", "my dog Rex"])
        vectors = [item.embedding for item in response.data]
        assert len(vectors) == 2 and len(vectors[0]) == 384, [len(vector) for vector in vectors]
        norm = sum(x * x for x in vectors[0]) ** 0.5
        assert abs(norm - 1.0) < 1e-3, norm
        return f"{len(vectors)} vector(s) of {len(vectors[0])} dims, norm={norm:.4f}"

    check("openai files.create (purpose=batch)", upload)
    check("openai batches.create", create)
    check("openai batches.retrieve (poll)", poll)
    check("openai files.content (output file)", download)
    check("openai batches.list", listing)
    check("openai chat.completions.create", chat)
    check("openai embeddings.create", embeddings)


def main():
    print(f"simulator: {BASE_URL}  anthropic {anthropic.__version__}  openai {openai.__version__}", flush=True)
    anthropic_checks()
    openai_checks()
    print(f"{passed} passed, {failed} failed", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
