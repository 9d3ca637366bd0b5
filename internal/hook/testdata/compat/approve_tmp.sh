#!/bin/bash
# PermissionRequest, matcher "Write": approve writes under the project's tmp/, deny the others.
input=$(cat)
case "$(jq -r '.tool_input.file_path' <<<"$input")" in
  "$CLAUDE_PROJECT_DIR"/tmp/*) echo '{"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": {"behavior": "allow"}}}' ;;
  *) echo '{"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": {"behavior": "deny", "message": "only tmp/ may be written"}}}' ;;
esac
