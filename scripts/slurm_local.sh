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

die() { echo "slurm-local: $*" >&2; exit 2; }
say() { echo "slurm-local: $*"; }

node_up() {  # the accounting database answers (submitit reads job states with sacct), the controller answers
  # and the node takes jobs
  mysqladmin ping >/dev/null 2>&1 || return 1
  sacct -n -X -S now >/dev/null 2>&1 || return 1
  scontrol ping >/dev/null 2>&1 || return 1
  local state
  state=$(sinfo -h -n "$NODE" -o %T 2>/dev/null | head -1)
  [[ $state =~ ^(idle|mixed|allocated|completing)$ ]]
}

install_packages() {
  local cmd
  for cmd in slurmctld slurmd slurmdbd munged mariadbd; do
    command -v "$cmd" >/dev/null || break
  done
  command -v "$cmd" >/dev/null && return 0
  command -v apt-get >/dev/null || die "no apt-get: install ${PACKAGES[*]} with this system's package manager"
  say "installing ${PACKAGES[*]} (apt-get)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${PACKAGES[@]}" >/dev/null 2>&1 \
    || { apt-get update -q >/dev/null 2>&1 \
         && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${PACKAGES[@]}" >/dev/null; } \
    || die "apt-get install ${PACKAGES[*]} failed"
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
  munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && return 0
  [[ -s /etc/munge/munge.key ]] || mungekey --create --force >/dev/null 2>&1 \
    || dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key 2>/dev/null
  chown munge:munge /etc/munge/munge.key && chmod 400 /etc/munge/munge.key
  mkdir -p /run/munge && chown munge:munge /run/munge
  runuser -u munge -- munged || die "munged did not start"
  for _ in $(seq 1 20); do munge -n | unmunge >/dev/null 2>&1 && return 0; sleep 0.25; done
  die "munged started but munge -n | unmunge fails"
}

start_mariadb() {  # the accounting database; a MariaDB already running is used as it is
  local pass
  if ! mysqladmin ping >/dev/null 2>&1; then
    /etc/init.d/mariadb start >/dev/null 2>&1 || die "MariaDB did not start (/etc/init.d/mariadb start)"
    touch "$RUN/started-mariadb"
  fi
  pass=$(sed -n 's/^StoragePass=//p' "$DBD_CONF")
  mysql -e "CREATE DATABASE IF NOT EXISTS slurm_acct_db; CREATE USER IF NOT EXISTS 'slurm'@'localhost';
            ALTER USER 'slurm'@'localhost' IDENTIFIED BY '$pass';
            GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';" || die "cannot create the slurm_acct_db database"
}

start_slurmdbd() {
  slurmdbd || die "slurmdbd did not start (see $LOGS/slurmdbd.log)"
  for _ in $(seq 1 60); do sacctmgr -n list cluster >/dev/null 2>&1 && break; sleep 0.5; done
  sacctmgr -n -P list cluster format=cluster 2>/dev/null | grep -qx gearlocal \
    || sacctmgr -i add cluster gearlocal >/dev/null || die "sacctmgr add cluster gearlocal failed (see $LOGS/slurmdbd.log)"
}

stop_pidfile() {  # stop the daemon whose pid file is $1 (only that pid), wait for it to exit
  local pid
  [[ -f $1 ]] || return 0
  pid=$(cat "$1")
  if [[ -n $pid ]] && kill "$pid" 2>/dev/null; then
    for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
  fi
  rm -f "$1"
}

up() {
  if node_up; then
    say "cluster is up (node $NODE, partition $PARTITION); nothing to do"
    sinfo
    return 0
  fi
  [[ $EUID -eq 0 ]] || die "setting up and starting the SLURM daemons needs root"
  install_packages
  write_conf
  start_munge
  # daemons left from an earlier `up` (e.g. slurmd without its controller): restart them in order
  stop_pidfile "$RUN/slurmd.pid"
  stop_pidfile "$RUN/slurmctld.pid"
  stop_pidfile "$RUN/slurmdbd.pid"
  start_mariadb
  start_slurmdbd
  slurmctld || die "slurmctld did not start (see $LOGS/slurmctld.log)"
  slurmd || die "slurmd did not start (see $LOGS/slurmd.log)"
  for _ in $(seq 1 60); do
    if node_up; then
      say "cluster is up (node $NODE, $(nproc) CPUs, partition $PARTITION)"
      sinfo
      return 0
    fi
    scontrol update nodename="$NODE" state=resume >/dev/null 2>&1 || true
    sleep 0.5
  done
  die "node $NODE did not take jobs within 30 s: $(sinfo -h -N -o '%T %E' 2>&1 | head -1); logs in $LOGS"
}

down() {
  stop_pidfile "$RUN/slurmd.pid"
  stop_pidfile "$RUN/slurmctld.pid"
  stop_pidfile "$RUN/slurmdbd.pid"
  stop_pidfile /run/munge/munged.pid
  if [[ -f $RUN/started-mariadb ]]; then
    /etc/init.d/mariadb stop >/dev/null 2>&1 || true
    rm -f "$RUN/started-mariadb"
  fi
  say "stopped slurmd, slurmctld, slurmdbd, munged (and MariaDB if up started it)"
}

purge() {
  if mysqladmin ping >/dev/null 2>&1; then
    mysql -e "DROP DATABASE IF EXISTS slurm_acct_db; DROP USER IF EXISTS 'slurm'@'localhost';" || true
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
  up) up ;;
  down) down ;;
  purge) purge ;;
  status) if node_up; then sinfo; else echo "slurm-local: cluster is not up" >&2; exit 1; fi ;;
  *) echo "usage: $0 up|down|status|purge" >&2; exit 2 ;;
esac
