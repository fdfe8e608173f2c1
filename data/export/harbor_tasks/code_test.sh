#!/usr/bin/env bash
# Grades the repository the agent left in /app as taskfoundry grades a code attempt
# (foundry_verifier/code.py); the reward goes to /logs/verifier/reward.json.
set -euo pipefail
cd "$(dirname "$0")"
exec python3 -m foundry_verifier.code --checkpoint "${FOUNDRY_CHECKPOINT:-1}" \
  "${FOUNDRY_APP:-/app}" "${FOUNDRY_VERIFIER_LOGS:-/logs/verifier}"
