#!/bin/bash
# PreToolUse, matcher "Bash": deny rm -rf with a JSON permission decision.
input=$(cat)
if [[ $(jq -r '.tool_name' <<<"$input") == "Bash" ]] && jq -e '.tool_input.command | test("rm -rf")' <<<"$input" >/dev/null; then
  jq -n '{hookSpecificOutput: {hookEventName: "PreToolUse", permissionDecision: "deny",
          permissionDecisionReason: "Destructive command blocked by policy"}}'
fi
exit 0
