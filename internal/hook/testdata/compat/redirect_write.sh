#!/bin/bash
# PreToolUse, matcher "Write": allow the write, but into out/ (updatedInput
# replaces the whole input, so the content is carried over).
jq '{hookSpecificOutput: {hookEventName: "PreToolUse", permissionDecision: "allow",
     updatedInput: (.tool_input + {file_path: (.cwd + "/out/" + (.tool_input.file_path | split("/") | last))})}}'
