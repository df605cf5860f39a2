#!/bin/sh
# Install the Debian packages a benchmark needs when they are missing (as .ci/run does for
# the tests): `sh benchmarks/system-packages.sh wrk postgresql`.
#   wrk         the HTTP load generator of benchmarks/http_load.py
#   postgresql  the server binaries tests/support/pg.py starts a throwaway server with (and runuser,
#               from util-linux, which it uses to run the server as `postgres` under root)
set -eu
missing=""
for need in "$@"; do
    case "$need" in
    wrk)
        command -v wrk >/dev/null 2>&1 || missing="$missing wrk"
        ;;
    postgresql)
        ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing="$missing postgresql"
        command -v runuser >/dev/null 2>&1 || missing="$missing util-linux"
        ;;
    *)
        echo "system-packages.sh: unknown package $need" >&2
        exit 2
        ;;
    esac
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
    echo "missing Debian packages:$missing; install them with: sudo apt-get install$missing" >&2
    exit 1
fi
echo "installing:$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086  # one word per package
apt-get install -y -qq --no-install-recommends $missing
