#!/usr/bin/env bash
# Start / stop a throwaway single-host Slurm 22.05 (munged, MariaDB, slurmdbd, slurmctld,
# three fake nodes node-a/node-b/node-c, slurmrestd with JWT) for the Slurm connector tests.
# Recipe: shared/recipes/real-services.md section 3 (each pitfall there was hit once).
#
#   scripts/ci-slurm.sh start   # prints ONLY `export VAR=value` lines on stdout (eval them)
#   scripts/ci-slurm.sh stop    # stops this checkout's daemons by PID, in reverse order
#
# Exports: ATTRIBUTION_TEST_SLURM_CONF (slurm.conf path), ATTRIBUTION_TEST_SLURMRESTD_URL,
# ATTRIBUTION_TEST_SLURM_JWT (a token for user slurm, 3 h). Everything else goes to stderr,
# and every daemon's stdio is detached so a CI log pipe never hangs on it (pitfall 7).
#
# Each checkout gets its own root (/tmp/attribution-slurm-ci-<checkout hash>) and the first
# free block of ports from BASE_PORT (default 16800, step 100): ctld +17, slurmd +18,
# dbd +19, restd +20, mysql +6, fake nodes +31... `start` on a running instance only
# prints its exports again; a half-started one is stopped and started fresh.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd -P)
R=${SLURM_ROOT:-/tmp/attribution-slurm-ci-$(printf '%s' "$REPO" | cksum | cut -d' ' -f1)}
SLURM_NODES=${SLURM_NODES:-"node-a node-b node-c"}
HOST=$(hostname -s)
export SLURM_CONF=$R/etc/slurm.conf
LIB=/usr/lib/x86_64-linux-gnu/slurm-wlm

log() { echo "ci-slurm: $*" >&2; }

# wait_for SECONDS CMD...: poll CMD every 0.1 s, each try bounded so a hung client can't stall CI
wait_for() {
  local n=$(($1 * 10)); shift
  for _ in $(seq 1 "$n"); do timeout 10 "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done
  log "timeout waiting for: $*"; return 1
}

port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

alive() { [ -n "${1:-}" ] && [ -n "$(ps -o stat= -p "$1" 2>/dev/null | grep -v Z)" ]; }  # zombies are dead

stop_pidfile() {
  local f=$1 p; [ -f "$f" ] || return 0
  p=$(cat "$f" 2>/dev/null || true); alive "$p" || return 0
  kill "$p" 2>/dev/null || true
  for _ in $(seq 1 100); do alive "$p" || return 0; sleep 0.1; done
  kill -9 "$p" 2>/dev/null || true
}

stop() {
  [ -d "$R" ] || return 0
  alive "$(cat "$R/run/slurmctld.pid" 2>/dev/null)" || alive "$(cat "$R/mysql/mysqld.pid" 2>/dev/null)" \
    || alive "$(cat "$R/munge/munged.pid" 2>/dev/null)" || alive "$(cat "$R/run/slurmdbd.pid" 2>/dev/null)" \
    || alive "$(cat "$R/run/slurmrestd.pid" 2>/dev/null)" \
    || return 0
  stop_pidfile "$R/run/slurmrestd.pid"
  for f in "$R"/run/slurmd*.pid; do stop_pidfile "$f"; done
  stop_pidfile "$R/run/slurmctld.pid"
  stop_pidfile "$R/run/slurmdbd.pid"
  stop_pidfile "$R/mysql/mysqld.pid"
  stop_pidfile "$R/munge/munged.pid"
  log "stopped ($R)"
}

exports() { cat "$R/exports"; }

running() {
  [ -f "$R/exports" ] && alive "$(cat "$R/run/slurmctld.pid" 2>/dev/null)" \
    && alive "$(cat "$R/run/slurmrestd.pid" 2>/dev/null)" \
    && timeout 10 scontrol ping 2>/dev/null | grep -q UP
}

pick_base() {
  local b k busy
  for b in $(seq "${BASE_PORT:-16800}" 100 19900); do
    busy=
    for k in 6 17 18 19 20 31 32 33 34 35 36; do port_busy $((b + k)) && { busy=1; break; }; done
    [ -z "$busy" ] && { echo "$b"; return; }
  done
  log "no free port block from ${BASE_PORT:-16800} (set BASE_PORT)"; return 1
}

install() {
  if command -v slurmctld >/dev/null && command -v slurmrestd >/dev/null \
      && command -v mariadbd >/dev/null && command -v munged >/dev/null && [ -e $LIB/auth_jwt.so ]; then
    return 0
  fi
  log "installing Slurm, MariaDB and munge (apt)"
  timeout 60 apt-get update -qq >&2 || log "apt-get update failed; trying the install anyway"
  DEBIAN_FRONTEND=noninteractive timeout 240 apt-get install -y -qq --no-install-recommends \
    slurm-wlm slurmdbd slurmrestd slurm-client slurm-wlm-jwt-plugin munge mariadb-server \
    >"/tmp/attribution-slurm-apt.log" 2>&1 || { tail -20 /tmp/attribution-slurm-apt.log >&2; return 1; }
}

fail() {
  log "start failed; last log lines:"
  for f in "$R"/log/*.log "$R"/munge/munged.log; do
    [ -s "$f" ] && { echo "--- $f" >&2; tail -5 "$f" >&2; }
  done
  stop
  exit 1
}

start() {
  local t0=$SECONDS
  if running; then log "already running ($R)"; exports; return 0; fi
  install
  stop  # a half-started instance from an earlier run
  trap fail ERR
  local base; base=$(pick_base)
  rm -rf "$R"; mkdir -p "$R"/etc "$R"/state "$R"/spool "$R"/log "$R"/run "$R"/munge "$R"/mysql
  chmod 755 "$R"; chmod 1777 "$R/run" "$R/log"  # slurmrestd runs as user slurm and writes here

  # munge: own key and socket (/etc/munge untouched); socket dir 0755, key 0400 owned by munge
  dd if=/dev/urandom of="$R/munge/munge.key" bs=1 count=1024 status=none
  chown -R munge:munge "$R/munge"; chmod 755 "$R/munge"; chmod 400 "$R/munge/munge.key"
  runuser -u munge -- munged --socket="$R/munge/munge.sock" --key-file="$R/munge/munge.key" \
    --pid-file="$R/munge/munged.pid" --log-file="$R/munge/munged.log" \
    --seed-file="$R/munge/munged.seed" </dev/null >/dev/null 2>&1

  # MariaDB on 127.0.0.1 only; --no-defaults ignores /etc/mysql
  local myport=$((base + 6))
  chown mysql:mysql "$R/mysql"
  mariadb-install-db --no-defaults --user=mysql --datadir="$R/mysql/data" \
    --auth-root-authentication-method=normal --skip-test-db >"$R/log/mariadb-install.log" 2>&1
  mariadbd --no-defaults --user=mysql --datadir="$R/mysql/data" --socket="$R/mysql/mysqld.sock" \
    --pid-file="$R/mysql/mysqld.pid" --bind-address=127.0.0.1 --port=$myport --skip-name-resolve \
    --log-error="$R/log/mariadb.log" --innodb-buffer-pool-size=128M --innodb-log-file-size=64M \
    --innodb-lock-wait-timeout=900 --innodb-flush-log-at-trx-commit=2 </dev/null >/dev/null 2>&1 &
  wait_for 30 mariadb-admin --no-defaults -S "$R/mysql/mysqld.sock" -uroot ping
  log "mariadb up ($((SECONDS - t0)) s)"
  mariadb --no-defaults -S "$R/mysql/mysqld.sock" -uroot -e "CREATE USER 'slurm'@'127.0.0.1' IDENTIFIED BY 'slurmpw';
    CREATE DATABASE slurm_acct_db; GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';"

  dd if=/dev/urandom of="$R/etc/jwt_hs256.key" bs=32 count=1 status=none
  chmod 600 "$R/etc/jwt_hs256.key"
  local nodes="" k=30 n
  for n in $SLURM_NODES; do
    k=$((k + 1))
    nodes+="NodeName=$n NodeAddr=127.0.0.1 NodeHostname=$HOST CPUs=2 RealMemory=1000 Port=$((base + k)) State=UNKNOWN"$'\n'
  done
  cat >"$R/etc/slurm.conf" <<EOF
ClusterName=testcluster
SlurmctldHost=$HOST(127.0.0.1)
SlurmUser=root
AuthType=auth/munge
AuthInfo=socket=$R/munge/munge.sock
AuthAltTypes=auth/jwt
AuthAltParameters=jwt_key=$R/etc/jwt_hs256.key
CredType=cred/munge
SlurmctldPort=$((base + 17))
SlurmdPort=$((base + 18))
StateSaveLocation=$R/state
SlurmdSpoolDir=$R/spool/slurmd-%n
SlurmctldPidFile=$R/run/slurmctld.pid
SlurmdPidFile=$R/run/slurmd-%n.pid
SlurmctldLogFile=$R/log/slurmctld.log
SlurmdLogFile=$R/log/slurmd-%n.log
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=0
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
JobCompType=jobcomp/none
MpiDefault=none
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=$((base + 19))
AccountingStoragePass=$R/munge/munge.sock
ReturnToService=1
SlurmdTimeout=60
InactiveLimit=0
MinJobAge=300
TopologyPlugin=topology/tree
KillWait=5
Waittime=0
${nodes}PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
  # a two-leaf tree under one spine (the last node alone on leaf-2), so `scontrol show
  # topology` has something to say for the topology connector's live test
  local last=${SLURM_NODES##* }
  {
    echo "SwitchName=leaf-1 Nodes=$(echo $SLURM_NODES | tr ' ' '\n' | grep -vx "$last" | paste -sd,)"
    echo "SwitchName=leaf-2 Nodes=$last"
    echo "SwitchName=spine-1 Switches=leaf-[1-2]"
  } >"$R/etc/topology.conf"
  cat >"$R/etc/slurmdbd.conf" <<EOF
AuthType=auth/munge
AuthInfo=socket=$R/munge/munge.sock
AuthAltTypes=auth/jwt
AuthAltParameters=jwt_key=$R/etc/jwt_hs256.key
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=$((base + 19))
SlurmUser=root
PidFile=$R/run/slurmdbd.pid
LogFile=$R/log/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$myport
StorageUser=slurm
StoragePass=slurmpw
StorageLoc=slurm_acct_db
EOF
  chmod 600 "$R/etc/slurmdbd.conf"

  # order matters: dbd, then ctld, then the slurmds; all stdio detached
  slurmdbd </dev/null >>"$R/log/daemons.out" 2>&1
  wait_for 30 sacctmgr -n list cluster
  log "slurmdbd up ($((SECONDS - t0)) s)"
  slurmctld </dev/null >>"$R/log/daemons.out" 2>&1
  wait_for 30 bash -c 'scontrol ping | grep -q UP'
  log "slurmctld up ($((SECONDS - t0)) s)"
  for n in $SLURM_NODES; do slurmd -N "$n" </dev/null >>"$R/log/daemons.out" 2>&1; done
  wait_for 30 bash -c '[ -n "$(sinfo -h -N -o %T)" ] && [ -z "$(sinfo -h -N -o %T | grep -vx idle)" ]'
  log "nodes idle ($((SECONDS - t0)) s)"

  local restport=$((base + 20))
  runuser -u slurm -- bash -c "echo \$\$ > '$R/run/slurmrestd.pid'; exec env SLURM_CONF='$SLURM_CONF' SLURM_JWT=daemon \
    slurmrestd -a rest_auth/jwt -s openapi/v0.0.38,openapi/dbv0.0.38 127.0.0.1:$restport >>'$R/log/slurmrestd.log' 2>&1" \
    </dev/null >/dev/null 2>&1 &
  wait_for 30 curl -s -o /dev/null "http://127.0.0.1:$restport/"

  local tok
  tok=$(timeout 10 scontrol token username=slurm lifespan=10800 | sed -n 's/^SLURM_JWT=//p')
  [ -n "$tok" ]
  {
    printf 'export ATTRIBUTION_TEST_SLURM_CONF=%q\n' "$SLURM_CONF"
    printf 'export ATTRIBUTION_TEST_SLURMRESTD_URL=%q\n' "http://127.0.0.1:$restport"
    printf 'export ATTRIBUTION_TEST_SLURM_JWT=%q\n' "$tok"
  } >"$R/exports"
  chmod 600 "$R/exports"
  trap - ERR
  log "Slurm up in $((SECONDS - t0)) s: $SLURM_CONF, slurmrestd 127.0.0.1:$restport, nodes: $SLURM_NODES"
  exports
}

case "${1:-start}" in
  start) start ;;
  stop) stop ;;
  *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
