#!/bin/bash
# PostToolUse, matcher "Write|Edit": log what was written and send the model
# back a lint complaint with decision "block".
input=$(cat)
path=$(jq -r '.tool_response.filePath // empty' <<<"$input")
[[ -n "$path" ]] || { echo "no tool_response.filePath" >&2; exit 1; }
jq -c '{tool: .tool_name, type: .tool_response.type, file: .tool_response.filePath,
        old: .tool_response.oldString, new: .tool_response.newString, replace_all: .tool_input.replace_all}' \
  <<<"$input" >>"$CLAUDE_PROJECT_DIR/written.log"
jq -n --arg p "$path" '{decision: "block", reason: ("lint: trailing whitespace in " + $p)}'
