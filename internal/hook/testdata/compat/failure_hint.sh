#!/bin/bash
# PostToolUseFailure: give the model a hint about the failed command.
jq '{hookSpecificOutput: {hookEventName: "PostToolUseFailure",
     additionalContext: ("Hint: " + .tool_input.command + " failed: " + (.error | split("\n") | last))}}'
