#!/usr/bin/env bash
# The reference: the gold answer written where the verifier reads the agent's.
set -euo pipefail
cp "$(cd "$(dirname "$0")" && pwd)/answer.txt" "${FOUNDRY_APP:-/app}/answer.txt"
