#!/usr/bin/env python3
"""The seeds' teammate turn loop (002, s09 _teammate_loop), for timing.

Usage: reference_turn.py BASE_URL [TURNS]

Runs one agent against an Anthropic-compatible server whose replies are
bash tool calls (troupe fake-api with the echo script of README
"Performance"), the way the seeds' reference loop does each turn: drain the
inbox file, POST the whole conversation to /v1/messages (not streamed),
append the reply, run each bash call with subprocess.run(shell=True) and
append the results. Prints one JSON line: the p50 and p99 of a turn (from
the end of one round of tool results to the end of the next) and of its
model call, in ms.

The seeds' code calls the API through the anthropic Python SDK. This
machine has no way to install it (no PyPI), so this loop speaks the wire
protocol with the standard library (http.client, json), which costs less per
call than the SDK's request building and response models: the figure it
gives is at most the reference's, and a comparison against it favours the
reference.
"""

import http.client
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.parse

TOOLS = [
    {"name": "bash", "description": "Run a shell command.",
     "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}},
    {"name": "read_file", "description": "Read file contents.",
     "input_schema": {"type": "object", "properties": {"path": {"type": "string"}, "limit": {"type": "integer"}}, "required": ["path"]}},
    {"name": "write_file", "description": "Write content to file.",
     "input_schema": {"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}}, "required": ["path", "content"]}},
    {"name": "edit_file", "description": "Replace exact text in file.",
     "input_schema": {"type": "object", "properties": {"path": {"type": "string"}, "old_text": {"type": "string"}, "new_text": {"type": "string"}}, "required": ["path", "old_text", "new_text"]}},
    {"name": "send_message", "description": "Send message to a teammate.",
     "input_schema": {"type": "object", "properties": {"to": {"type": "string"}, "content": {"type": "string"}}, "required": ["to", "content"]}},
    {"name": "read_inbox", "description": "Read and drain your inbox.",
     "input_schema": {"type": "object", "properties": {}}},
]


def read_inbox(path):
    """Read every line of the inbox and empty it, as the seeds' MessageBus does."""
    if not os.path.exists(path):
        return "[]"
    with open(path) as f:
        msgs = [json.loads(line) for line in f.read().strip().splitlines() if line]
    with open(path, "w") as f:
        f.write("")
    return json.dumps(msgs, indent=2)


def run_bash(command, cwd):
    r = subprocess.run(command, shell=True, cwd=cwd, capture_output=True, text=True, timeout=120)
    out = (r.stdout + r.stderr).strip()
    return out[:50000] if out else "(no output)"


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p / 100))]


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    url = urllib.parse.urlparse(sys.argv[1])
    turns = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    conn = http.client.HTTPConnection(url.hostname, url.port)
    headers = {"content-type": "application/json", "x-api-key": os.environ.get("ANTHROPIC_API_KEY", "bench"),
               "anthropic-version": "2023-06-01"}
    work = tempfile.mkdtemp(prefix="reference-turn-")
    inbox = os.path.join(work, "worker.jsonl")
    sys_prompt = f"You are 'worker', role: coder, at {work}."
    messages = [{"role": "user", "content": "Run the benchmark: call bash with echo on every turn."}]
    turn_ms, model_ms = [], []
    start = time.perf_counter()
    for _ in range(turns):
        box = read_inbox(inbox)
        if box != "[]":
            messages.append({"role": "user", "content": f"<inbox>{box}</inbox>"})
            messages.append({"role": "assistant", "content": "Noted inbox messages."})
        call = time.perf_counter()
        body = json.dumps({"model": "claude-sonnet-4-5", "max_tokens": 8000, "system": sys_prompt,
                           "messages": messages, "tools": TOOLS})
        conn.request("POST", url.path.rstrip("/") + "/v1/messages", body, headers)
        resp = conn.getresponse()
        data = resp.read()
        if resp.status != 200:
            sys.exit(f"{resp.status}: {data[:300]!r}")
        reply = json.loads(data)
        model_ms.append((time.perf_counter() - call) * 1000)
        messages.append({"role": "assistant", "content": reply["content"]})
        if reply["stop_reason"] != "tool_use":
            break
        results = []
        for block in reply["content"]:
            if block["type"] == "tool_use" and block["name"] == "bash":
                results.append({"type": "tool_result", "tool_use_id": block["id"],
                                "content": run_bash(block["input"]["command"], work)})
        messages.append({"role": "user", "content": results})
        now = time.perf_counter()
        turn_ms.append((now - start) * 1000)
        start = now
    if not turn_ms:
        sys.exit("the model made no tool calls; its replies must be bash tool calls")
    print(json.dumps({"turns": len(turn_ms), "ms_per_turn_p50": round(pct(turn_ms, 50), 3),
                      "ms_per_turn_p99": round(pct(turn_ms, 99), 3), "model_ms_p50": round(pct(model_ms, 50), 3),
                      "python": sys.version.split()[0]}))


if __name__ == "__main__":
    main()
