#!/usr/bin/env bash
# Prints a command, quoted so that it can be pasted into a shell, then runs it;
# with DRY_RUN=1 it only prints. The Makefile's Dataflow targets run every
# docker and gcloud command through this.
set -euo pipefail
printf '+'
printf ' %q' "$@"
printf '\n'
if [ "${DRY_RUN:-0}" != 1 ]; then
  exec "$@"
fi
