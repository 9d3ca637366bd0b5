#!/bin/bash
# UserPromptSubmit: drop prompts that contain a secret; add the date to the others.
input=$(cat)
if jq -e '.prompt | test("(?i)password")' <<<"$input" >/dev/null; then
  echo '{"decision": "block", "reason": "Prompt contains a password; it was not sent"}'
  exit 0
fi
echo '{"hookSpecificOutput": {"hookEventName": "UserPromptSubmit", "additionalContext": "Today is a test day."}}'
