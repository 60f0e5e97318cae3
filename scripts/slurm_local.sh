#!/usr/bin/env bash
# A one-node SLURM cluster on 127.0.0.1 for sweeps through hydra/launcher=slurm (docs/sweeps.md, "A one-node
# cluster on this machine"). Needs root and Debian/Ubuntu (apt-get); no systemd needed (daemons started directly).
#
#   scripts/slurm_local.sh up       install slurm-wlm, slurmdbd, munge, mariadb-server if missing; write
#                                   /etc/slurm/slurm.conf and slurmdbd.conf; start munged, MariaDB (the accounting
#                                   database behind sacct, which submitit polls), slurmdbd, slurmctld, slurmd.
#                                   A no-op that says so when the cluster is already up
#   scripts/slurm_local.sh status   print sinfo and exit 0 when the node takes jobs, exit 1 otherwise
#   scripts/slurm_local.sh down     stop slurmd, slurmctld, slurmdbd, munged, and MariaDB if `up` started it
#                                   (packages, config, accounting database and job state stay)
#   scripts/slurm_local.sh purge    down, then remove what `up` wrote: the two config files, state, logs, the
#                                   slurm_acct_db database and its MariaDB user (packages stay)
#
# Environment: SLURM_LOCAL_PARTITION (default gear), SLURM_LOCAL_KILLWAIT (default 5 s between a cancelled job's
# SIGTERM and SIGKILL; SLURM's default is 30). Exit codes: 0 ok, 1 the cluster is not up, 2 it cannot be set up.
# up, down and purge run one at a time (a lock in /run/lock): concurrent `make test` runs share one cluster. Every
# wait is bounded and says what it waited for; pid files left by killed daemons (or naming a pid the system has
# since given to another program) are removed without signalling anyone but the daemon they name.
set -euo pipefail
export PATH=$PATH:/usr/sbin:/sbin

CONF_DIR=/etc/slurm
CONF=$CONF_DIR/slurm.conf
DBD_CONF=$CONF_DIR/slurmdbd.conf
MARK="# written by gear_repro scripts/slurm_local.sh"
STATE=/var/spool/slurmctld
SPOOL=/var/spool/slurmd
LOGS=/var/log/slurm
RUN=/run/slurm
PACKAGES=(slurm-wlm slurmdbd munge mariadb-server)
PARTITION=${SLURM_LOCAL_PARTITION:-gear}
KILLWAIT=${SLURM_LOCAL_KILLWAIT:-5}
NODE=$(hostname -s)
LOCK=/run/lock/gear-slurm-local.lock

die() { echo "slurm-local: $*" >&2; exit 2; }
say() { echo "slurm-local: $*"; }

quiet() { timeout 20 "$@" >/dev/null 2>&1; }  # a check that answers within 20 s (a dead peer can hang a client)

node_up() {  # the accounting database answers (submitit reads job states with sacct), the controller answers
  # and the node takes jobs
  quiet mysqladmin ping || return 1
  quiet sacct -n -X -S now || return 1
  quiet scontrol ping || return 1
  local state
  state=$(timeout 20 sinfo -h -n "$NODE" -o %T 2>/dev/null | head -1)
  [[ $state =~ ^(idle|mixed|allocated|completing)$ ]]
}

wait_for() {  # wait_for SECONDS COMMAND...: poll COMMAND every 0.5 s for up to SECONDS; its status
  local end=$((SECONDS + $1))
  shift
  until "$@"; do
    ((SECONDS < end)) || return 1
    sleep 0.5
  done
}

install_packages() {
  local cmd
  for cmd in slurmctld slurmd slurmdbd munged mariadbd; do
    command -v "$cmd" >/dev/null || break
  done
  command -v "$cmd" >/dev/null && return 0
  command -v apt-get >/dev/null || die "no apt-get: install ${PACKAGES[*]} with this system's package manager"
  say "installing ${PACKAGES[*]} (apt-get, ~1 min)"
  local log
  log=$(mktemp)
  # an outdated package list (a fresh image) is refreshed once; apt's lock is waited for 5 min, each step 15 min
  apt_get install "${PACKAGES[@]}" >"$log" 2>&1 \
    || { apt_get update >>"$log" 2>&1 && apt_get install "${PACKAGES[@]}" >>"$log" 2>&1; } \
    || { tail -n 15 "$log" >&2; rm -f "$log"; die "apt-get install ${PACKAGES[*]} failed (its last lines above)"; }
  rm -f "$log"
}

apt_get() {
  DEBIAN_FRONTEND=noninteractive timeout 900 apt-get -y -q -o DPkg::Lock::Timeout=300 "$@"
}

ours_or_absent() {  # refuse to overwrite a config file this script did not write
  [[ ! -f $1 ]] || grep -qF "$MARK" "$1" || die "$1 exists and was not written by this script: not touching it"
}

write_conf() {
  local cpus mem pass
  cpus=$(nproc)
  mem=$(free -m | awk '/^Mem:/ {print $2}')
  mkdir -p "$CONF_DIR" "$STATE" "$SPOOL" "$LOGS" "$RUN"
  ours_or_absent "$CONF"
  ours_or_absent "$DBD_CONF"
  cat >"$CONF.tmp" <<EOF
$MARK (docs/sweeps.md); scripts/slurm_local.sh purge removes it
ClusterName=gearlocal
SlurmctldHost=$NODE(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=$STATE
SlurmdSpoolDir=$SPOOL
SlurmctldPidFile=$RUN/slurmctld.pid
SlurmdPidFile=$RUN/slurmd.pid
SlurmctldLogFile=$LOGS/slurmctld.log
SlurmdLogFile=$LOGS/slurmd.log
# no cgroups (containers, VMs without delegation): processes tracked through /proc, no CPU binding
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=5
# accounting through slurmdbd (MariaDB): sacct, which submitit polls for the state of every job
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
KillWait=$KILLWAIT
MinJobAge=300
SlurmctldTimeout=30
SlurmdTimeout=30
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=$PARTITION Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
EOF
  mv "$CONF.tmp" "$CONF"
  pass=$(sed -n 's/^StoragePass=//p' "$DBD_CONF" 2>/dev/null || true)
  [[ -n $pass ]] || pass=$(head -c 24 /dev/urandom | base64 | tr -dc 'A-Za-z0-9')
  (umask 077 && cat >"$DBD_CONF.tmp" <<EOF
$MARK (docs/sweeps.md); scripts/slurm_local.sh purge removes it
AuthType=auth/munge
DbdHost=localhost
DbdAddr=127.0.0.1
SlurmUser=root
PidFile=$RUN/slurmdbd.pid
LogFile=$LOGS/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageUser=slurm
StoragePass=$pass
StorageLoc=slurm_acct_db
EOF
  )
  mv "$DBD_CONF.tmp" "$DBD_CONF"
}

start_munge() {
  munge_works && return 0
  [[ -s /etc/munge/munge.key ]] || mungekey --create --force >/dev/null 2>&1 \
    || dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key 2>/dev/null
  chown munge:munge /etc/munge/munge.key && chmod 400 /etc/munge/munge.key
  mkdir -p /run/munge && chown munge:munge /run/munge
  stop_pidfile /run/munge/munged.pid munged
  pid_of munged >/dev/null || rm -f /run/munge/munge.socket.2 /run/munge/munge.socket.2.lock  # a killed munged's
  runuser -u munge -- munged 9>&- || die "munged did not start (/var/log/munge/munged.log)"
  wait_for 10 munge_works || die "munged started but munge -n | unmunge fails within 10 s (/var/log/munge/munged.log)"
}

munge_works() { munge -n 2>/dev/null | unmunge >/dev/null 2>&1; }

start_mariadb() {  # the accounting database; a MariaDB already running is used as it is
  local pass out sock
  if ! quiet mysqladmin ping; then
    if ! pid_of mariadbd >/dev/null; then  # a killed MariaDB's socket and pid file would stop the new one
      sock=$(my_print_defaults --mysqld 2>/dev/null | sed -n 's/^--socket=//p' | tail -n 1)
      rm -f "${sock:-/run/mysqld/mysqld.sock}" /run/mysqld/mysqld.pid
    fi
    # mysqld_safe, as the mysql user, writes its start log under $TMPDIR: a caller's private TMPDIR would stop it
    out=$(TMPDIR=/tmp timeout 120 /etc/init.d/mariadb start 2>&1 9>&-) \
      || { tail -n 5 <<<"$out" >&2; die "MariaDB did not start within 120 s (/etc/init.d/mariadb start; its output above)"; }
    touch "$RUN/started-mariadb"
  fi
  pass=$(sed -n 's/^StoragePass=//p' "$DBD_CONF")
  timeout 60 mysql -e "CREATE DATABASE IF NOT EXISTS slurm_acct_db; CREATE USER IF NOT EXISTS 'slurm'@'localhost';
            ALTER USER 'slurm'@'localhost' IDENTIFIED BY '$pass';
            GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';" || die "cannot create the slurm_acct_db database"
}

start_slurmdbd() {
  slurmdbd 9>&- || die "slurmdbd did not start (see $LOGS/slurmdbd.log)"
  wait_for 60 quiet sacctmgr -n list cluster || die "slurmdbd does not answer sacctmgr within 60 s (see $LOGS/slurmdbd.log)"
  timeout 20 sacctmgr -n -P list cluster format=cluster 2>/dev/null | grep -qx gearlocal \
    || quiet sacctmgr -i add cluster gearlocal \
    || die "sacctmgr add cluster gearlocal failed (see $LOGS/slurmdbd.log)"
}

stop_pidfile() {  # stop_pidfile FILE NAME: stop the process FILE names if it is NAME (a pid file left by a killed
  # daemon may name a pid since given to another program: that one is left alone), wait for it to exit, remove FILE
  local pid
  [[ -f $1 ]] || return 0
  pid=$(cat "$1")
  if [[ $pid =~ ^[0-9]+$ && $(cat "/proc/$pid/comm" 2>/dev/null) == "$2" ]]; then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 40); do [[ -d /proc/$pid ]] || break; sleep 0.25; done
    [[ ! -d /proc/$pid ]] || kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$1"
}

pid_of() {  # print the pid of a process named $1; status 1 when none runs
  local comm pid
  for comm in /proc/[0-9]*/comm; do
    [[ $(cat "$comm" 2>/dev/null) == "$1" ]] || continue
    pid=${comm#/proc/}
    echo "${pid%/comm}"
    return 0
  done
  return 1
}

not_running() {  # die if a daemon named $1 runs that no pid file of ours named (another set-up's): ours cannot start
  local pid
  if pid=$(pid_of "$1"); then
    die "$1 (pid $pid) is running but was not started by this script (no $RUN/$1.pid): stop it first"
  fi
}

start_slurm_daemons() {
  local daemon
  for daemon in slurmd slurmctld slurmdbd; do  # daemons left from an earlier `up`: restarted in order
    stop_pidfile "$RUN/$daemon.pid" "$daemon"
    not_running "$daemon"
  done
  start_mariadb
  start_slurmdbd
  slurmctld 9>&- || die "slurmctld did not start (see $LOGS/slurmctld.log)"
  wait_for 60 quiet scontrol ping || die "slurmctld does not answer scontrol ping within 60 s (see $LOGS/slurmctld.log)"
  slurmd 9>&- || die "slurmd did not start (see $LOGS/slurmd.log)"
}

node_idle() {  # the node takes jobs; a node left DOWN by a killed slurmd is resumed
  node_up && return 0
  quiet scontrol update nodename="$NODE" state=resume
  return 1
}

locked() {  # run "$@" as root holding $LOCK (one up/down/purge at a time); the daemons are started without fd 9
  [[ $EUID -eq 0 ]] || die "starting or stopping the SLURM daemons needs root"
  mkdir -p "${LOCK%/*}"
  exec 9>"$LOCK"
  flock -w 900 9 || die "another scripts/slurm_local.sh held $LOCK for 15 min"
  "$@"
}

is_up() {
  node_up || return 1
  say "cluster is up (node $NODE, partition $PARTITION); nothing to do"
  sinfo
}

up() {
  is_up && return 0  # another `up` may have started it while this one waited for the lock
  install_packages
  write_conf
  start_munge
  start_slurm_daemons
  wait_for 60 node_idle || die "node $NODE does not take jobs within 60 s (sinfo: $(timeout 20 sinfo -h -N -o '%T %E' \
    2>&1 | head -1); sacct: $(timeout 20 sacct -n -X -S now 2>&1 | head -1)); logs in $LOGS"
  say "cluster is up (node $NODE, $(nproc) CPUs, partition $PARTITION)"
  sinfo
}

down() {
  stop_pidfile "$RUN/slurmd.pid" slurmd
  stop_pidfile "$RUN/slurmctld.pid" slurmctld
  stop_pidfile "$RUN/slurmdbd.pid" slurmdbd
  stop_pidfile /run/munge/munged.pid munged
  if [[ -f $RUN/started-mariadb ]]; then
    timeout 120 /etc/init.d/mariadb stop >/dev/null 2>&1 || true
    rm -f "$RUN/started-mariadb"
  fi
  say "stopped slurmd, slurmctld, slurmdbd, munged (and MariaDB if up started it)"
}

purge() {
  if quiet mysqladmin ping; then
    timeout 60 mysql -e "DROP DATABASE IF EXISTS slurm_acct_db; DROP USER IF EXISTS 'slurm'@'localhost';" || true
  fi
  down
  local f
  for f in "$CONF" "$DBD_CONF"; do
    if [[ -f $f ]] && grep -qF "$MARK" "$f"; then rm -f "$f"; fi
  done
  rm -rf "$STATE" "$SPOOL" "$LOGS" "$RUN"
  say "removed $CONF, $DBD_CONF, $STATE, $SPOOL, $LOGS and the slurm_acct_db database (packages stay:" \
      "apt-get purge ${PACKAGES[*]} removes them)"
}

case "${1:-}" in
  up) is_up || locked up ;;
  down) locked down ;;
  purge) locked purge ;;
  status) if node_up; then sinfo; else echo "slurm-local: cluster is not up" >&2; exit 1; fi ;;
  *) echo "usage: $0 up|down|status|purge" >&2; exit 2 ;;
esac
