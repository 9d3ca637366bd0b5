#!/bin/bash
# Stop: send the agent back once, and let it stop when it runs on because
# of this hook already (stop_hook_active), so it cannot loop.
input=$(cat)
jq -e 'has("stop_hook_active") and has("last_assistant_message")' <<<"$input" >/dev/null || { echo "missing Stop fields" >&2; exit 1; }
if [[ $(jq -r '.stop_hook_active' <<<"$input") == "true" ]]; then
  exit 0
fi
jq -n --arg last "$(jq -r '.last_assistant_message' <<<"$input")" \
  '{decision: "block", reason: ("You said \"" + $last + "\" but the tests have not run; run them.")}'
