#!/bin/bash
# SessionStart, matcher "startup": plain stdout is context for the model.
input=$(cat)
echo "Session $(jq -r '.session_id' <<<"$input") started from $(jq -r '.source' <<<"$input") in $(jq -r '.cwd' <<<"$input")"
