#!/usr/bin/env bash
# A single-node Slurm on this machine, for the Slurm tests (tests/test_slurm.py) and CI (.ci/run):
#
#   tools/slurm.sh start    # install Debian's slurm-wlm and munge when missing, start munged, slurmctld, slurmd; wait until idle
#   tools/slurm.sh status   # exit 0 when the node answers idle/mixed/allocated (prints sinfo)
#   tools/slurm.sh stop     # kill the daemons and remove the folder
#   tools/slurm.sh env      # print `export SLURM_CONF=...` (eval "$(tools/slurm.sh env)")
#
# Everything lives under one folder, FAIRNEG_SLURM_DIR (default /tmp/fairneg-slurm): slurm.conf, munge key and
# socket, state, spool, logs and pid files. Nothing is written under /etc: the client commands (sbatch, squeue,
# scancel, sinfo) find the cluster through SLURM_CONF=$FAIRNEG_SLURM_DIR/slurm.conf, which tests/test_slurm.py sets
# itself when this folder exists (and .ci/run exports). Jobs run as the submitting user (root here) and inherit the
# submitter's environment (sbatch --export=ALL, Slurm's default), so they run with the same .venv Python.
# Settings: proctrack/linuxproc and task/none (no cgroups), no accounting storage (sacct then fails; submitit only
# warns), one node named after `hostname -s` with CPUs=$(nproc) (and 90% of its memory), one partition, Default=YES,
# MaxTime=INFINITE; EnforcePartLimits=ALL makes sbatch refuse a job the node can never run (more CPUs than it has, a GPU)
# instead of leaving it pending for ever.
set -euo pipefail
D=${FAIRNEG_SLURM_DIR:-/tmp/fairneg-slurm}
CONF=$D/slurm.conf
HOST=$(hostname -s)
export SLURM_CONF=$CONF

log() { echo "slurm.sh: $*" >&2; }
as_root() { if [[ "$(id -u)" == 0 ]]; then "$@"; else sudo "$@"; fi; }
pid_alive() { [[ -f "$1" ]] && [[ -d "/proc/$(cat "$1")" ]]; }   # /proc, not kill -0: a daemon of root is visible to anyone

install() {
  local missing=()
  for c in munged slurmctld slurmd sbatch; do command -v "$c" >/dev/null || PATH=$PATH:/usr/sbin command -v "$c" >/dev/null || missing+=("$c"); done
  [[ ${#missing[@]} == 0 ]] && return
  log "installing slurm-wlm and munge (missing: ${missing[*]})"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm munge >/dev/null
}

write_conf() {
  mkdir -p "$D"/{state,spool,log,munge}
  chmod 700 "$D/munge"
  cat >"$CONF.tmp" <<EOF
# Written by tools/slurm.sh: a single-node cluster for fairneg's Slurm tests. Removed by \`tools/slurm.sh stop\`.
ClusterName=fairneg
SlurmctldHost=$HOST(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$D/munge/munge.socket
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
EnforcePartLimits=ALL
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
SlurmctldTimeout=30
MinJobAge=3600
SlurmdTimeout=30
StateSaveLocation=$D/state
SlurmdSpoolDir=$D/spool
SlurmctldPidFile=$D/slurmctld.pid
SlurmdPidFile=$D/slurmd.pid
SlurmctldLogFile=$D/log/slurmctld.log
SlurmdLogFile=$D/log/slurmd.log
NodeName=$HOST NodeAddr=127.0.0.1 CPUs=$(nproc) RealMemory=$(( $(awk '/^MemTotal:/ {print $2}' /proc/meminfo) * 9 / 10240 )) State=UNKNOWN
PartitionName=main Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
EOF
  mv "$CONF.tmp" "$CONF"
}

node_state() { sinfo -h -N -n "$HOST" -o %T 2>/dev/null | head -1; }   # idle, mixed, allocated, down*, ...

status() {
  command -v sinfo >/dev/null && [[ -f "$CONF" ]] || { log "not running (no sinfo or no $CONF)"; return 1; }
  local s; s=$(node_state)
  case "$s" in
    idle|mixed|allocated|completing) sinfo; return 0 ;;
    *) log "node $HOST: ${s:-no answer from slurmctld}"; return 1 ;;
  esac
}

start() {
  if status >/dev/null 2>&1; then log "already running ($CONF)"; env_line; return 0; fi
  install
  export PATH=$PATH:/usr/sbin
  write_conf
  if ! pid_alive "$D/munge/munged.pid"; then
    [[ -s "$D/munge/munge.key" ]] || { dd if=/dev/urandom of="$D/munge/munge.key" bs=1024 count=1 status=none; chmod 400 "$D/munge/munge.key"; }
    as_root munged --force --key-file="$D/munge/munge.key" --socket="$D/munge/munge.socket" --pid-file="$D/munge/munged.pid" \
           --log-file="$D/log/munged.log" --seed-file="$D/munge/munged.seed"
  fi
  pid_alive "$D/slurmctld.pid" || as_root slurmctld -f "$CONF"
  pid_alive "$D/slurmd.pid" || as_root slurmd -f "$CONF"
  for _ in $(seq 120); do
    case "$(node_state)" in
      idle|mixed|allocated) sinfo; env_line; return 0 ;;
      down*|drain*) scontrol update NodeName="$HOST" State=RESUME 2>/dev/null || true ;;
    esac
    sleep 0.5
  done
  log "the node did not become idle in 60 s; logs in $D/log:"; tail -n 20 "$D"/log/*.log >&2 || true
  return 1
}

stop() {
  if [[ -f "$CONF" ]] && command -v squeue >/dev/null; then   # end the jobs first: slurmstepd outlives slurmd
    local ids; ids=$(squeue -h -o %i 2>/dev/null || true)
    if [[ -n "$ids" ]]; then
      scancel $ids 2>/dev/null || true
      for _ in $(seq 40); do [[ -z "$(squeue -h -o %i 2>/dev/null)" ]] && break; sleep 0.25; done
    fi
  fi
  for p in "$D/slurmd.pid" "$D/slurmctld.pid" "$D/munge/munged.pid"; do
    if pid_alive "$p"; then
      local pid; pid=$(cat "$p"); as_root kill "$pid" 2>/dev/null || true
      for _ in $(seq 40); do [[ -d "/proc/$pid" ]] || break; sleep 0.25; done
      as_root kill -9 "$pid" 2>/dev/null || true
    fi
  done
  as_root rm -rf "$D"
  log "stopped; removed $D"
}

env_line() { echo "export SLURM_CONF=$CONF"; }

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  env) env_line ;;
  *) echo "usage: $0 start|stop|status|env" >&2; exit 2 ;;
esac
