#!/usr/bin/env bash
# Grades /app/answer.txt as taskfoundry's exact_or_f1 verifier grades an answer
# (foundry_verifier/answer.py); the reward goes to /logs/verifier/reward.json.
set -euo pipefail
cd "$(dirname "$0")"
exec python3 -m foundry_verifier.answer "${FOUNDRY_APP:-/app}/answer.txt" \
  "${FOUNDRY_VERIFIER_LOGS:-/logs/verifier}"
