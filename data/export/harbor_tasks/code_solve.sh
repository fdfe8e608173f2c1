#!/usr/bin/env bash
# The reference: the files taskfoundry's reference change writes (files/) laid over the
# repository in /app, and those it deletes (deleted.txt) removed.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
app="${FOUNDRY_APP:-/app}"
cp -R "$here/files/." "$app/"
while IFS= read -r path; do
  rm -f -- "$app/$path"
done < "$here/deleted.txt"
