#!/bin/bash
# PreToolUse, matcher "Edit|Write": refuse writes to .env files and to
# anything under secrets/, with exit 2 and the reason on stderr.
input=$(cat)
file=$(jq -r '.tool_input.file_path // empty' <<<"$input")
[[ -n "$file" ]] || { echo "no tool_input.file_path" >&2; exit 1; }
[[ "$file" == /* ]] || { echo "file_path is not absolute: $file" >&2; exit 1; }
case "$file" in
  *.env|*/secrets/*) echo "Blocked: $(basename "$file") is protected" >&2; exit 2 ;;
esac
exit 0
