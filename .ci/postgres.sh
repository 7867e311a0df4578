#!/usr/bin/env bash
# Make the PostgreSQL server binaries (initdb, pg_ctl) available to tests/postgres.
# Idempotent: installs Debian's `postgresql` only when no initdb can be found, and
# asks Debian not to create/start its default cluster (the tests start their own
# throwaway cluster on a loopback port). Run before pytest, e.g. from .ci/run:
#     bash path/to/ci-postgres.sh
set -euo pipefail

have_initdb() {
    if [ -n "${AAIS_PG_BINDIR:-}" ] && [ -x "${AAIS_PG_BINDIR}/initdb" ]; then return 0; fi
    if command -v initdb >/dev/null 2>&1; then return 0; fi
    compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null
}

if ! have_initdb; then
    as_root=()
    if [ "$(id -u)" -ne 0 ]; then as_root=(sudo); fi
    "${as_root[@]}" mkdir -p /etc/postgresql-common/createcluster.d
    echo "create_main_cluster = false" |
        "${as_root[@]}" tee /etc/postgresql-common/createcluster.d/aais-no-main-cluster.conf >/dev/null
    "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y -qq --no-install-recommends postgresql
fi

if ! have_initdb; then
    echo "ci-postgres: initdb is still missing after installing postgresql" >&2
    exit 1
fi
