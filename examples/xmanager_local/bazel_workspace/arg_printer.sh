#!/bin/sh
# Writes its argument count, then each argument on its own line, to $OUTPUT_PATH.
{
  echo "$#"
  for arg in "$@"; do printf '%s\n' "$arg"; done
} > "$OUTPUT_PATH"
