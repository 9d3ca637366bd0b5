#!/bin/bash
# PreToolUse, matcher "Read": refuse reads of more than 100 lines at once.
input=$(cat)
limit=$(jq -r '.tool_input.limit // 2000' <<<"$input")
if (( limit > 100 )); then
  echo "Read at most 100 lines of $(jq -r '.tool_input.file_path' <<<"$input") at a time" >&2
  exit 2
fi
exit 0
