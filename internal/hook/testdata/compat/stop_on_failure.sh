#!/bin/bash
# PostToolUse, matcher "Bash": stop the agent when the build output says so.
input=$(cat)
if jq -e '.tool_response.stdout | test("BUILD FAILED")' <<<"$input" >/dev/null; then
  echo '{"continue": false, "stopReason": "Build failed; fix it by hand before going on"}'
fi
exit 0
