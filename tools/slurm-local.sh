#!/usr/bin/env bash
# A one-node Slurm on localhost for normlab's Slurm test (tests/slurm.rs), as CI runs it:
#   eval "$(tools/slurm-local.sh start)"   # installs (Debian) if needed, starts, prints exports
#   tools/slurm-local.sh stop
# It uses its own state directory and ports (16817/16818), a private munge socket and
# proctrack/linuxproc + task/none, so it needs no systemd, cgroups or network.
set -euo pipefail
D=${NORMLAB_SLURM_DIR:-/tmp/normlab-slurm}
conf=$D/slurm.conf

install() {
  if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
    echo "installing slurm-wlm and munge (Debian packages)" >&2
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      slurmctld slurmd slurm-client munge >&2
  fi
}

write_conf() {
  local host; host=$(hostname -s)
  mkdir -p "$D"/{spool,state,log,munge}
  cat > "$conf" <<CONF
ClusterName=normlab
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$D/munge/munge.socket.2
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmctldPort=16817
SlurmdPort=16818
StateSaveLocation=$D/state
SlurmdSpoolDir=$D/spool
SlurmctldPidFile=$D/slurmctld.pid
SlurmdPidFile=$D/slurmd.pid
SlurmctldLogFile=$D/log/slurmctld.log
SlurmdLogFile=$D/log/slurmd.log
ReturnToService=2
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
KillWait=5
MinJobAge=300
NodeName=$host CPUs=$(nproc) State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
}

start() {
  install
  stop >/dev/null 2>&1 || true
  write_conf
  [ -f /etc/munge/munge.key ] || (umask 077; head -c 128 /dev/urandom > /etc/munge/munge.key)
  munged --force --socket="$D/munge/munge.socket.2" --pid-file="$D/munge/munged.pid" \
    --log-file="$D/log/munged.log" --key-file=/etc/munge/munge.key
  setsid slurmctld -D -f "$conf" > "$D/log/ctld.out" 2>&1 < /dev/null &
  sleep 1
  setsid slurmd -D -f "$conf" > "$D/log/d.out" 2>&1 < /dev/null &
  for _ in $(seq 60); do
    if SLURM_CONF=$conf sinfo -h -o %T 2>/dev/null | grep -q idle; then
      echo "export SLURM_CONF=$conf NORMLAB_SLURM_TEST=1"
      return 0
    fi
    sleep 1
  done
  echo "slurm did not come up; see $D/log" >&2
  return 1
}

stop() {
  for p in slurmd slurmctld munge/munged; do
    [ -f "$D/$p.pid" ] && kill "$(cat "$D/$p.pid")" 2>/dev/null || true
  done
  pkill -f "slurmctld -D -f $conf" 2>/dev/null || true
  pkill -f "slurmd -D -f $conf" 2>/dev/null || true
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
