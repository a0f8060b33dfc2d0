#!/usr/bin/env bash
# The servers the backend tests talk to, on 127.0.0.1 only, with throwaway keys:
#   sshd (port $PRIMENB_SSH_PORT, default 2222) accepting a fresh key for root@127.0.0.1, and a
#   single-node SLURM cluster (munge + slurmctld + slurmd) sized from `slurmd -C`.
# Usage: .ci/services.sh start | stop | status | sshd-stop | sshd-start
# Tests read $PRIMENB_SERVICES_DIR/services.env (default /tmp/primenb-services); without it they
# skip, except under CI=true where they fail.
set -euo pipefail

DIR=${PRIMENB_SERVICES_DIR:-/tmp/primenb-services}
SSH_PORT=${PRIMENB_SSH_PORT:-2222}
SLURM_CONF=/etc/slurm/slurm.conf
MARK="# written by primenb .ci/services.sh"

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

install() {
    local need=()
    command -v sshd >/dev/null 2>&1 || [ -x /usr/sbin/sshd ] || need+=(openssh-server)
    command -v ssh >/dev/null 2>&1 || need+=(openssh-client)
    command -v slurmctld >/dev/null 2>&1 || [ -x /usr/sbin/slurmctld ] || need+=(slurm-wlm)
    command -v munged >/dev/null 2>&1 || [ -x /usr/sbin/munged ] || need+=(munge)
    if [ ${#need[@]} -gt 0 ]; then
        as_root apt-get update -qq
        DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "${need[@]}" >/dev/null
    fi
}

start_sshd() {
    mkdir -p "$DIR/ssh" && chmod 700 "$DIR" "$DIR/ssh"
    [ -f "$DIR/ssh/host_key" ] || ssh-keygen -q -t ed25519 -N '' -f "$DIR/ssh/host_key"
    [ -f "$DIR/ssh/client_key" ] || ssh-keygen -q -t ed25519 -N '' -C primenb-ci -f "$DIR/ssh/client_key"
    cp "$DIR/ssh/client_key.pub" "$DIR/ssh/authorized_keys"
    cat > "$DIR/ssh/sshd_config" <<EOF
ListenAddress 127.0.0.1
Port $SSH_PORT
HostKey $DIR/ssh/host_key
PidFile $DIR/ssh/sshd.pid
AuthorizedKeysFile $DIR/ssh/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
StrictModes no
UsePAM no
MaxSessions 64
MaxStartups 64:30:128
EOF
    # The client side: tests pass ssh_args="-F $DIR/ssh/config" and use host primenb-ci.
    cat > "$DIR/ssh/config" <<EOF
Host primenb-ci
    HostName 127.0.0.1
    Port $SSH_PORT
    User $(id -un)
    IdentityFile $DIR/ssh/client_key
    IdentitiesOnly yes
    StrictHostKeyChecking no
    UserKnownHostsFile $DIR/ssh/known_hosts
    LogLevel ERROR
EOF
    as_root mkdir -p /run/sshd
    if [ -f "$DIR/ssh/sshd.pid" ] && kill -0 "$(cat "$DIR/ssh/sshd.pid")" 2>/dev/null; then return; fi
    as_root /usr/sbin/sshd -f "$DIR/ssh/sshd_config" -E "$DIR/ssh/sshd.log"
    for _ in $(seq 50); do
        ssh -F "$DIR/ssh/config" -o BatchMode=yes -o ConnectTimeout=2 primenb-ci true 2>/dev/null && return
        sleep 0.2
    done
    echo "sshd did not come up on 127.0.0.1:$SSH_PORT; see $DIR/ssh/sshd.log" >&2
    return 1
}

stop_sshd() {
    if [ -f "$DIR/ssh/sshd.pid" ]; then
        as_root kill "$(cat "$DIR/ssh/sshd.pid")" 2>/dev/null || true
        rm -f "$DIR/ssh/sshd.pid"
    fi
}

start_slurm() {
    mkdir -p "$DIR/slurm/state" "$DIR/slurm/spool"
    # munge: the cluster's authentication (a key made at install time, else here).
    as_root mkdir -p /run/munge /var/log/munge /var/lib/munge /etc/munge
    [ -f /etc/munge/munge.key ] || as_root mungekey -c -k /etc/munge/munge.key 2>/dev/null \
        || as_root dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 status=none
    as_root chown -R munge:munge /run/munge /var/log/munge /var/lib/munge /etc/munge
    as_root chmod 700 /etc/munge && as_root chmod 400 /etc/munge/munge.key
    if ! pgrep -x munged >/dev/null; then as_root runuser -u munge -- /usr/sbin/munged; fi

    local node cpus mem
    node=$(hostname -s)
    cpus=$(slurmd -C | sed -n 's/.*CPUs=\([0-9]*\).*/\1/p' | head -1)
    mem=$(slurmd -C | sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p' | head -1)
    if [ -f "$SLURM_CONF" ] && ! grep -q "$MARK" "$SLURM_CONF"; then
        echo "$SLURM_CONF exists and was not written by primenb; leaving it (and this cluster) alone" >&2
    else
        as_root mkdir -p /etc/slurm
        as_root tee "$SLURM_CONF" >/dev/null <<EOF
$MARK
ClusterName=primenb-ci
SlurmctldHost=$node(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$DIR/slurm/state
SlurmdSpoolDir=$DIR/slurm/spool
SlurmctldPidFile=$DIR/slurm/slurmctld.pid
SlurmdPidFile=$DIR/slurm/slurmd.pid
SlurmctldLogFile=$DIR/slurm/slurmctld.log
SlurmdLogFile=$DIR/slurm/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MinJobAge=3600
KillWait=20
SchedulerParameters=sched_interval=2
MpiDefault=none
NodeName=$node NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=$node Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
EOF
    fi
    pgrep -x slurmctld >/dev/null || as_root /usr/sbin/slurmctld -i
    pgrep -x slurmd >/dev/null || as_root /usr/sbin/slurmd
    for _ in $(seq 60); do
        if sinfo -h -o '%T' 2>/dev/null | grep -qE '^(idle|mixed|allocated)'; then return; fi
        as_root scontrol update nodename="$node" state=resume 2>/dev/null || true
        sleep 0.5
    done
    echo "slurm did not come up; see $DIR/slurm/*.log" >&2
    sinfo >&2 || true
    return 1
}

stop_slurm() {
    scancel --user="$(id -un)" 2>/dev/null || true
    for f in slurmd slurmctld; do
        if [ -f "$DIR/slurm/$f.pid" ]; then as_root kill "$(cat "$DIR/slurm/$f.pid")" 2>/dev/null || true; fi
    done
    if [ -f /run/munge/munged.pid ]; then as_root kill "$(cat /run/munge/munged.pid)" 2>/dev/null || true; fi
}

write_env() {
    cat > "$DIR/services.env" <<EOF
PRIMENB_SSH_HOST=primenb-ci
PRIMENB_SSH_CONFIG=$DIR/ssh/config
PRIMENB_SSH_PORT=$SSH_PORT
PRIMENB_SERVICES_SCRIPT=$(cd "$(dirname "$0")" && pwd)/services.sh
PRIMENB_SLURM=1
EOF
}

case "${1:-}" in
    start) install; start_sshd; start_slurm; write_env; echo "services up: sshd 127.0.0.1:$SSH_PORT, slurm $(sinfo -h -o '%P %T %c' | head -1)";;
    stop) stop_sshd; stop_slurm; rm -f "$DIR/services.env"; echo "services stopped";;
    sshd-stop) stop_sshd;;
    sshd-start) start_sshd;;
    status) cat "$DIR/services.env" 2>/dev/null; sinfo 2>/dev/null || true;;
    *) echo "usage: $0 start|stop|status|sshd-stop|sshd-start" >&2; exit 2;;
esac
