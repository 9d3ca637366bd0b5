#!/bin/bash
# Any event: keep the input for the test to read, one JSON value a line.
jq -c . >>"$CLAUDE_PROJECT_DIR/events.jsonl"
