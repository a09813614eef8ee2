#!/usr/bin/env bash
# Slurm end to end, on this machine (docs: /work/shared/notes/slurm-on-one-machine.md):
# starts munged, slurmctld and slurmd with a private configuration (loopback, own ports, no
# systemd), then
#   1. submits a `greentrain schedule` plan with --submit slurm and checks each job's begin
#      time in squeue (PENDING, reason BeginTime, StartTime = the planned start);
#   2. runs a short `greentrain train` job under Slurm, preempts it with `scontrol requeue`
#      (SIGTERM: the trainer checkpoints and exits 143), lets Slurm start it again (it resumes
#      from the checkpoint) and checks that every step's loss equals an uninterrupted run's;
#   3. with the SPANK plugin built, checks it registered --gpu-power-limit;
#   4. (checked before 3) runs a data-parallel job of 2 tasks (srun --mpi=pmix, as `schedule
#      --submit slurm` launches a job with ntasks = 2), preempts and resumes it, and checks its
#      losses equal an uninterrupted 2-rank mpirun run's (GT_SLURM_E2E_DIST=0 leaves it out).
# Exit 77 (ctest SKIP) when it cannot run: GT_SLURM_E2E=1 is not set, not root, the packages
# are missing and cannot be installed, or the daemons do not start.
# Usage: slurm_e2e.sh GREENTRAIN [SPANK_PLUGIN.so]
set -uo pipefail
GT="$1"
SPANK="${2:-}"
skip() { echo "SKIP: $*"; exit 77; }

[ "${GT_SLURM_E2E:-0}" = 1 ] ||
  skip "set GT_SLURM_E2E=1 to run the Slurm end-to-end test (it installs Debian's slurmctld," \
       "slurmd, slurm-client and munge if missing, and starts them on this machine as root)"
[ "$(id -u)" = 0 ] || skip "needs root (munged, slurmctld and slurmd are started as root)"
[ -x "$GT" ] || { echo "FAIL: no greentrain program at $GT"; exit 1; }

if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null ||
   ! command -v sbatch >/dev/null || ! command -v munged >/dev/null; then
  echo "installing slurmctld slurmd slurm-client munge slurm-wlm-basic-plugins ..."
  export DEBIAN_FRONTEND=noninteractive
  (apt-get update -qq && apt-get install -y -qq --no-install-recommends slurmctld slurmd \
     slurm-client munge slurm-wlm-basic-plugins) >/tmp/gt-slurm-e2e-apt.log 2>&1 ||
    skip "could not install the Slurm packages (see /tmp/gt-slurm-e2e-apt.log)"
fi

export TZ=UTC  # the plan's times are UTC; slurmctld reads --begin in its local zone
D=$(mktemp -d /tmp/gt-slurm-e2e.XXXXXX)
chmod 755 "$D"  # the munge user writes its pid file below it
HOST=$(hostname -s)
STARTED_MUNGE=""
cleanup() {
  for p in "$D/slurmd.pid" "$D/slurmctld.pid"; do
    [ -f "$p" ] && kill "$(cat "$p")" 2>/dev/null
  done
  [ -n "$STARTED_MUNGE" ] && [ -f "$D/munge/munged.pid" ] &&
    kill "$(cat "$D/munge/munged.pid")" 2>/dev/null
  sleep 1
  rm -rf "$D"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  for f in slurmctld.log slurmd.log; do
    echo "--- last lines of $f"
    tail -n 20 "$D/$f" 2>/dev/null
  done
  exit 1
}

# munge: reuse a running one, else start our own.
if ! (munge -n 2>/dev/null | unmunge >/dev/null 2>&1); then
  [ -f /etc/munge/munge.key ] || {
    mkdir -p /etc/munge
    dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
    chown munge: /etc/munge/munge.key 2>/dev/null
    chmod 400 /etc/munge/munge.key
  }
  mkdir -p /run/munge /var/log/munge /var/lib/munge
  mkdir -p "$D/munge"  # for the pid file, written as the munge user
  chown munge: /run/munge /var/log/munge /var/lib/munge "$D/munge" 2>/dev/null
  runuser -u munge -- munged --pid-file="$D/munge/munged.pid" 2>"$D/munged.err" ||
    munged -f --pid-file="$D/munge/munged.pid" 2>>"$D/munged.err" ||
    skip "cannot start munged: $(cat "$D/munged.err")"
  STARTED_MUNGE=1
  sleep 1
  (munge -n | unmunge >/dev/null 2>&1) || skip "munged does not answer"
fi

mkdir -p "$D/state" "$D/spool"
NODE_LINE=$(slurmd -C 2>/dev/null | head -n 1)
[ -n "$NODE_LINE" ] || skip "slurmd -C printed nothing"
PLUGSTACK=""
if [ -n "$SPANK" ] && [ -f "$SPANK" ]; then
  echo "optional $SPANK energy_dir=$D" > "$D/plugstack.conf"
  PLUGSTACK="PlugStackConfig=$D/plugstack.conf"
fi
cat > "$D/slurm.conf" <<CONF
ClusterName=gte2e
SlurmctldHost=$HOST
SlurmctldPort=26817
SlurmdPort=26818
AuthType=auth/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$D/state
SlurmdSpoolDir=$D/spool
SlurmctldPidFile=$D/slurmctld.pid
SlurmdPidFile=$D/slurmd.pid
SlurmctldLogFile=$D/slurmctld.log
SlurmdLogFile=$D/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MpiDefault=none
MailProg=/bin/true
ReturnToService=2
KillWait=60
$PLUGSTACK
$NODE_LINE State=UNKNOWN
PartitionName=e2e Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
export SLURM_CONF="$D/slurm.conf"
slurmctld 2>"$D/slurmctld.err" || skip "cannot start slurmctld: $(cat "$D/slurmctld.err")"
slurmd 2>"$D/slurmd.err" || skip "cannot start slurmd: $(cat "$D/slurmd.err")"
ok=""
for _ in $(seq 1 60); do
  if sinfo -h -o "%t" 2>/dev/null | grep -qE "idle|mix"; then ok=1; break; fi
  scontrol update nodename="${NODE_LINE#NodeName=}" state=resume >/dev/null 2>&1 || true
  sleep 1
done
[ -n "$ok" ] || skip "the Slurm node did not become idle: $(sinfo 2>&1 | tail -n 2)"
echo "Slurm is up: $(sinfo -h -o '%P %a %D %t %c CPUs')"

# --- 1. a plan submitted with sbatch --begin ---------------------------------------------
T0=$(( $(date -u +%s) / 3600 * 3600 ))
{
  echo "Time,Carbon Intensity"
  for h in 0 1 2 3 4 5 6 7 8 9; do
    ci=400; [ $h = 3 ] && ci=100; [ $h = 5 ] && ci=50
    echo "$(date -u -d "@$((T0 + h * 3600))" '+%Y-%m-%d %H:%M:%S'),$ci"
  done
} > "$D/ci.csv"
EARLIEST=$(date -u -d "@$((T0 + 3600))" '+%Y-%m-%dT%H:%M:%S')
DEADLINE=$(date -u -d "@$((T0 + 8 * 3600))" '+%Y-%m-%dT%H:%M:%S')
cat > "$D/jobs.toml" <<TOML
[[job]]
name = "e2e-shift"
command = "sleep 1"
duration_s = 3600
power_w = 300
earliest_start = $EARLIEST
deadline = $DEADLINE

[[job]]
name = "e2e-pieces"
command = "sleep 1"
duration_s = 7200
power_w = 200
earliest_start = $EARLIEST
deadline = $DEADLINE
interruptible = true
TOML
"$GT" schedule "$D/jobs.toml" --carbon-csv "$D/ci.csv" --utc-offset 0 --strategy interrupt \
  --json "$D/plan.json" --submit slurm > "$D/schedule.out" 2>&1 ||
  fail "greentrain schedule --submit slurm failed: $(cat "$D/schedule.out")"
cat "$D/schedule.out"
want_shift=$(date -u -d "@$((T0 + 5 * 3600))" '+%Y-%m-%dT%H:%M:%S')
want_piece1=$(date -u -d "@$((T0 + 3 * 3600))" '+%Y-%m-%dT%H:%M:%S')
squeue -h -o "%i %j %T %r %S" > "$D/squeue.txt"
echo "squeue:"; cat "$D/squeue.txt"
grep -qE "e2e-shift PENDING BeginTime $want_shift" "$D/squeue.txt" ||
  fail "e2e-shift is not pending until $want_shift"
grep -qE "e2e-pieces PENDING (BeginTime|Dependency) $want_piece1" "$D/squeue.txt" ||
  fail "the first run of e2e-pieces is not pending until $want_piece1"
[ "$(grep -c e2e-pieces "$D/squeue.txt")" = 2 ] || fail "e2e-pieces should be 2 runs"
scancel --name=e2e-shift >/dev/null 2>&1; scancel --name=e2e-pieces >/dev/null 2>&1
echo "PASS: plan submitted, begin times in squeue as planned"

# --- 2. preempt a training job with SIGTERM, requeue, resume bit for bit -----------------
export OMP_NUM_THREADS=1
cat /usr/share/common-licenses/GPL-3 /usr/share/common-licenses/Apache-2.0 > "$D/text.txt" \
  2>/dev/null || fail "no text for training"
cat > "$D/tiny.toml" <<TOML
[model]
n_layer = 2
n_head = 2
n_embd = 64
block_size = 32
[train]
batch_size = 8
max_steps = 2000
learning_rate = 2e-3
min_lr = 2e-4
warmup_steps = 20
grad_clip = 1.0
eval_interval = 100000
eval_steps = 2
checkpoint_interval = 100000
log_interval = 200
seed = 7
[data]
path = "$D/text.txt"
format = "text"
tokenizer = "char"
val_fraction = 0.1
TOML
"$GT" train "$D/tiny.toml" --out "$D/ref" > "$D/ref.out" 2>&1 || fail "reference run failed"
cat > "$D/train.sbatch" <<SH
#!/bin/sh
#SBATCH --job-name=e2e-train
#SBATCH --output=$D/train-%j.out
#SBATCH --open-mode=append
export OMP_NUM_THREADS=1
echo "start, restart count \${SLURM_RESTART_COUNT:-0}"
if [ -e "$D/run/checkpoint" ] || [ -e "$D/run/checkpoint.old" ]; then
  exec "$GT" train --out "$D/run" --resume
fi
exec "$GT" train "$D/tiny.toml" --out "$D/run"
SH
JOB=$(sbatch --parsable --requeue --signal=B:TERM@60 "$D/train.sbatch") || fail "sbatch failed"
echo "training job $JOB submitted"
for _ in $(seq 1 120); do
  s=$(tail -n 1 "$D/run/metrics.jsonl" 2>/dev/null | sed -E 's/^\{"step":([0-9]+).*/\1/')
  [ -n "$s" ] && [ "$s" -ge 200 ] 2>/dev/null && break
  sleep 0.5
done
[ -n "${s:-}" ] || fail "the training job did not start: $(squeue -j "$JOB" 2>&1)"
echo "preempting job $JOB at step $s: scontrol requeue (SIGTERM, then requeue)"
scontrol requeue "$JOB" || fail "scontrol requeue failed"
# Slurm holds a requeued job back for a while (BeginTime); let it start at once.
for _ in $(seq 1 30); do
  if scontrol show job "$JOB" 2>/dev/null | grep -q "JobState=PENDING"; then
    scontrol update JobId="$JOB" StartTime=now >/dev/null 2>&1 || true
    break
  fi
  sleep 0.5
done
done_ok=""
for _ in $(seq 1 240); do
  st=$(scontrol show job "$JOB" 2>/dev/null | grep -oE "JobState=[A-Z_]+" | head -n 1)
  rc=$(scontrol show job "$JOB" 2>/dev/null | grep -oE "Restarts=[0-9]+" | head -n 1)
  if [ "$st" = "JobState=COMPLETED" ]; then done_ok=1; break; fi
  case "$st" in JobState=FAILED|JobState=CANCELLED|JobState=TIMEOUT) break ;; esac
  sleep 1
done
cat "$D"/train-*.out
[ -n "$done_ok" ] || fail "training job ended as ${st:-?} ($rc)"
[ "${rc#Restarts=}" -ge 1 ] 2>/dev/null || fail "the job was not requeued ($rc)"
grep -q "resumed  from step" "$D"/train-*.out || fail "the requeued job did not resume"
grep -q "stopped at step" "$D"/train-*.out || fail "the first run did not stop on SIGTERM"
sed -E 's/^\{"step":([0-9]+),"loss":([^,]+),.*/\1 \2/' "$D/ref/metrics.jsonl" > "$D/ref.loss"
sed -E 's/^\{"step":([0-9]+),"loss":([^,]+),.*/\1 \2/' "$D/run/metrics.jsonl" > "$D/run.loss"
[ "$(wc -l < "$D/ref.loss")" = 2000 ] || fail "reference has $(wc -l < "$D/ref.loss") steps"
cmp -s "$D/ref.loss" "$D/run.loss" ||
  fail "losses differ from the uninterrupted run: $(diff "$D/ref.loss" "$D/run.loss" | head -n 5)"
echo "PASS: preempted at step $s with SIGTERM, requeued ($rc), resumed; all 2000 losses equal"

# --- 4. a data-parallel job of 2 tasks: srun starts the ranks, preempted and resumed -------
if [ "${GT_SLURM_E2E_DIST:-1}" = 1 ] && command -v mpirun >/dev/null; then
  sed -i "s/^max_steps = 2000/max_steps = 300/" "$D/tiny.toml"
  mpirun --oversubscribe --allow-run-as-root --bind-to none -np 2 "$GT" train "$D/tiny.toml" \
    --out "$D/dref" > "$D/dref.out" 2>&1 || fail "2-rank reference run failed: $(tail -n 5 "$D/dref.out")"
  # as `greentrain schedule --submit slurm` submits a job of ntasks = 2 (sched/slurm.h)
  cat > "$D/dist.sbatch" <<SH
#!/bin/sh
#SBATCH --job-name=e2e-dist
#SBATCH --output=$D/dist-%j.out
#SBATCH --open-mode=append
#SBATCH --ntasks=2
#SBATCH --nodes=1
export OMP_NUM_THREADS=1
exec srun --mpi=pmix --kill-on-bad-exit=1 "$GT" train "$D/tiny.toml" --out "$D/drun" --resume
SH
  DJOB=$(sbatch --parsable --requeue --signal=B:TERM@60 "$D/dist.sbatch") || fail "sbatch (2 tasks) failed"
  echo "data-parallel job $DJOB submitted (2 tasks)"
  s=""
  for _ in $(seq 1 240); do
    s=$(tail -n 1 "$D/drun/metrics.jsonl" 2>/dev/null | sed -E 's/^\{"step":([0-9]+).*/\1/')
    [ -n "$s" ] && [ "$s" -ge 100 ] 2>/dev/null && break
    sleep 0.5
  done
  [ -n "$s" ] || fail "the 2-task job did not start: $(cat "$D"/dist-*.out 2>/dev/null | tail -n 20)"
  echo "preempting job $DJOB at step $s: scontrol requeue"
  scontrol requeue "$DJOB" || fail "scontrol requeue (2 tasks) failed"
  for _ in $(seq 1 30); do
    if scontrol show job "$DJOB" 2>/dev/null | grep -q "JobState=PENDING"; then
      scontrol update JobId="$DJOB" StartTime=now >/dev/null 2>&1 || true
      break
    fi
    sleep 0.5
  done
  done_ok=""
  for _ in $(seq 1 240); do
    st=$(scontrol show job "$DJOB" 2>/dev/null | grep -oE "JobState=[A-Z_]+" | head -n 1)
    rc=$(scontrol show job "$DJOB" 2>/dev/null | grep -oE "Restarts=[0-9]+" | head -n 1)
    if [ "$st" = "JobState=COMPLETED" ]; then done_ok=1; break; fi
    case "$st" in JobState=FAILED|JobState=CANCELLED|JobState=TIMEOUT) break ;; esac
    sleep 1
  done
  cat "$D"/dist-*.out
  [ -n "$done_ok" ] || fail "the 2-task job ended as ${st:-?} ($rc)"
  [ "${rc#Restarts=}" -ge 1 ] 2>/dev/null || fail "the 2-task job was not requeued ($rc)"
  grep -q "2 ranks" "$D"/dist-*.out || fail "the job did not run as 2 ranks"
  grep -q "resumed  from step" "$D"/dist-*.out || fail "the requeued 2-task job did not resume"
  sed -E 's/^\{"step":([0-9]+),"loss":([^,]+),.*/\1 \2/' "$D/dref/metrics.jsonl" > "$D/dref.loss"
  sed -E 's/^\{"step":([0-9]+),"loss":([^,]+),.*/\1 \2/' "$D/drun/metrics.jsonl" > "$D/drun.loss"
  cmp -s "$D/dref.loss" "$D/drun.loss" ||
    fail "2-task losses differ from the uninterrupted 2-rank run: $(diff "$D/dref.loss" "$D/drun.loss" | head -n 5)"
  echo "PASS: 2-task job preempted at step $s, requeued ($rc), resumed; losses equal the 2-rank run's"
fi

# --- 3. the SPANK plugin ------------------------------------------------------------------
if [ -n "$PLUGSTACK" ]; then
  sbatch --help 2>&1 | grep -q -- "--gpu-power-limit" || fail "sbatch has no --gpu-power-limit"
  echo "PASS: the SPANK plugin adds --gpu-power-limit to sbatch"
fi
echo "PASS"
