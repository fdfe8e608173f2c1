#!/bin/sh
# Runs the command it is given with the network cut: in a network namespace of its own, where
# only loopback is up (the fake model servers and the Prefect server of the tests listen there),
# so that a test reaching for a package registry or a model hub fails instead of passing on a
# machine that happens to have the network. As root, `unshare --net`; as another user, with
# their uid mapped as it is (`--map-current-user`). It sets FOUNDRY_NETWORK_CUT=1, which
# tests/test_offline.py checks. Where no network namespace can be made it says why, and runs
# the command with the network (tests/test_offline.py then skips, saying so). Another user gets
# the capabilities of the namespace only to bring loopback up: the command runs without them.
set -eu
PATH="$PATH:/usr/sbin:/sbin"
if ! command -v ip >/dev/null 2>&1; then
  echo "without_network.sh: no \`ip\` (iproute2) to bring loopback up; running with the network" >&2
  exec "$@"
fi
for flags in "--net" "--net --map-current-user --keep-caps"; do
  # shellcheck disable=SC2086 # the flags are two words on purpose
  if unshare $flags true 2>/dev/null; then
    # shellcheck disable=SC2016 # "$@" is the inner shell's
    exec unshare $flags sh -c 'ip link set lo up && FOUNDRY_NETWORK_CUT=1 exec setpriv \
      --inh-caps=-all --ambient-caps=-all "$@"' sh "$@"
  fi
done
echo "without_network.sh: no network namespace can be made here (unshare --net failed);" \
  "running with the network" >&2
exec "$@"
