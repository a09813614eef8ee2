#!/usr/bin/env bash
# Slurm end to end, on this machine (docs: /work/shared/notes/slurm-on-one-machine.md):
# starts munged, slurmctld and slurmd with a private configuration (loopback, own ports, no
# systemd), then
#   1. submits a `greentrain schedule` plan with --submit slurm and checks each job's begin
#      time in squeue (PENDING, reason BeginTime, StartTime = the planned start);
#   2. plans an interruptible `greentrain train` job with `greentrain schedule --submit slurm`
#      (the real sbatch: the plan starts it now) and checks what Slurm holds (--requeue,
#      --signal=B:TERM@60, a batch script that execs the trainer); sends SIGTERM to its batch
#      step as --signal=B:TERM does (scancel --signal=TERM --batch: the trainer checkpoints, the
#      job ends with exit 143), requeues it, preempts it again with `scontrol requeue` (as a
#      cluster's PreemptMode=REQUEUE does), and checks that it resumed each time and that every
#      step's loss equals an uninterrupted run's;
#   3. with the SPANK plugin built, checks it registered --gpu-power-limit;
#   4. (checked before 3) the same through schedule for a data-parallel job of ntasks = 2 (its
#      batch script execs srun --mpi=pmix; its --signal=TERM@60 goes to the ranks, as
#      `scancel --signal=TERM` here): stopped (exit 143, checkpoint), requeued, resumed, losses
#      equal an uninterrupted 2-rank mpirun run's
#      (GT_SLURM_E2E_DIST=0 leaves it out);
#   5. (checked before 3) a CPU job with a power-limit profile: the plan's cap reaches Slurm as
#      `--set train.power_limit=W` on its command, and the trainer sets it on a stand-in RAPL
#      zone (GT_POWERCAP_ROOT) while it runs and restores it after.
# Exit 77 (ctest SKIP) when it cannot run: GT_SLURM_E2E=1 is not set, not root, the packages
# are missing and cannot be installed, or the daemons do not start.
# Usage: slurm_e2e.sh GREENTRAIN [SPANK_PLUGIN.so]
set -uo pipefail
GT=$(realpath "$1")  # absolute: the test runs from its own folder
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
  cd / || true
  # no job may outlive the test: cancel them all, let slurmd end them, then stop the daemons
  if [ -f "$D/slurmctld.pid" ]; then
    scancel --user=root >/dev/null 2>&1
    for _ in $(seq 1 20); do
      [ -z "$(squeue -h -o %i 2>/dev/null)" ] && break
      sleep 0.5
    done
  fi
  local p pid pids=""
  for p in "$D/slurmd.pid" "$D/slurmctld.pid"; do
    [ -f "$p" ] && pid=$(cat "$p") && kill "$pid" 2>/dev/null && pids="$pids $pid"
  done
  if [ -n "$STARTED_MUNGE" ] && [ -f "$D/munge/munged.pid" ]; then
    pid=$(cat "$D/munge/munged.pid") && kill "$pid" 2>/dev/null && pids="$pids $pid"
  fi
  # wait for them to exit, so that a next run finds the ports free
  for _ in $(seq 1 40); do
    local alive=""
    for pid in $pids; do kill -0 "$pid" 2>/dev/null && alive=1; done
    [ -z "$alive" ] && break
    sleep 0.25
  done
  # a trainer that escaped its job (a batch shell killed without exec) would run on: end
  # every process started from this test's own folder
  for pid in $(pgrep -f -- "$D/" 2>/dev/null); do
    [ "$pid" != $$ ] && kill "$pid" 2>/dev/null
  done
  # GT_SLURM_E2E_KEEP=1 keeps the folder (logs, runs) for a look after
  if [ "${GT_SLURM_E2E_KEEP:-0}" = 1 ]; then echo "kept $D"; else rm -rf "$D"; fi
}
trap cleanup EXIT
JOB=""
fail() {
  echo "FAIL: $*"
  if [ -n "$JOB" ] && [ -f "$D/slurm-$JOB.out" ]; then
    echo "--- last lines of slurm-$JOB.out (the job's output)"
    tail -n 20 "$D/slurm-$JOB.out"
  fi
  for f in slurmctld.log slurmd.log; do
    echo "--- last lines of $f"
    tail -n 20 "$D/$f" 2>/dev/null
  done
  echo "FAIL: $*"  # again, last: a log cut in the middle keeps its end
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
  if grep -qE "idle|mix" <<< "$(sinfo -h -o "%t" 2>/dev/null)"; then ok=1; break; fi
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

# --- parts 2, 4 and 5 submit through `greentrain schedule --submit slurm` itself ---------
# A carbon series whose current hour is the cleanest: each plan below starts its job in this
# hour, at its start (a --begin in the past: Slurm starts the job at once).
{
  echo "Time,Carbon Intensity"
  for h in 0 1 2 3 4 5 6 7 8 9; do
    ci=400; [ $h = 0 ] && ci=50
    echo "$(date -u -d "@$((T0 + h * 3600))" '+%Y-%m-%d %H:%M:%S'),$ci"
  done
} > "$D/ci-now.csv"
NOW_SLOT=$(date -u -d "@$T0" '+%Y-%m-%dT%H:%M:%S')
# the real sbatch, each call's arguments logged on one line
cat > "$D/sbatch-logged" <<SH
#!/bin/sh
printf '%s\n' "\$*" >> "$D/sbatch-calls.log"
exec sbatch "\$@"
SH
chmod +x "$D/sbatch-logged"
cd "$D" || fail "cannot enter $D"  # sbatch's default output file, slurm-JOBID.out, lands here

state_of() { scontrol show job "$1" 2>/dev/null | grep -oE "JobState=[A-Z_]+" | head -n 1 | cut -d= -f2; }
field_of() { scontrol show job "$1" 2>/dev/null | grep -oE "(^| )$2=[^ ]*" | head -n 1 | sed -E "s/^ ?$2=//"; }
last_step() { tail -n 1 "$1/metrics.jsonl" 2>/dev/null | sed -nE 's/^\{"step":([0-9]+).*/\1/p'; }
# wait_state JOB SECONDS STATE...: until the job is in one of the states (ST: the last seen)
wait_state() {
  local job=$1 n=$(( $2 * 4 )) want
  shift 2
  for _ in $(seq 1 "$n"); do
    ST=$(state_of "$job")
    for want in "$@"; do [ "$ST" = "$want" ] && return 0; done
    sleep 0.25
  done
  return 1
}
# wait_step RUN_DIR STEP SECONDS JOB: until the run's metrics reach STEP (STEP_AT: the last seen)
wait_step() {
  STEP_AT=""
  for _ in $(seq 1 $(( $3 * 4 ))); do
    STEP_AT=$(last_step "$1")
    [ -n "$STEP_AT" ] && [ "$STEP_AT" -ge "$2" ] && return 0
    case "$(state_of "$4")" in COMPLETED | FAILED | CANCELLED | TIMEOUT) break ;; esac
    sleep 0.25
  done
  fail "job $4 ($(state_of "$4")) did not reach step $2 in $1 (last step ${STEP_AT:-none}):" \
       "$(tail -n 5 "$D/slurm-$4.out" 2>/dev/null)"
}
# requeue_now JOB: scontrol requeue (a running job gets SIGTERM, KillWait, SIGKILL, and goes
# back to the queue; a finished one goes back at once), then start it now (Slurm holds a
# requeued job back for a while)
requeue_now() {
  scontrol requeue "$1" || fail "scontrol requeue $1 failed"
  wait_state "$1" 30 PENDING || fail "job $1 is $ST after scontrol requeue; expected PENDING"
  # the last run's slurmstepd must be gone first: the next run's steps have the same ids, and
  # PMIx cannot bind its socket (stepd.slurm.pmix.JOB.0) while the old one exists
  local gone=""
  for _ in $(seq 1 120); do
    grep -qE "[._]$1\.[0-9]+\$" <<< "$(ls "$D/spool" 2>/dev/null)" || { gone=1; break; }
    sleep 0.25
  done
  [ -n "$gone" ] || fail "the steps of job $1 did not end: $(ls "$D/spool")"
  scontrol update JobId="$1" StartTime=now >/dev/null 2>&1 || true
}
# submit NAME JOBS.TOML: `greentrain schedule JOBS.TOML ... --submit slurm` with the real
# sbatch; expects one sbatch call for NAME and sets JOB to its Slurm job id, ARGS to the file
# holding its sbatch arguments and SCRIPT to the batch script Slurm holds for it.
submit() {
  # --shift-to-now: the plans start at the top of this hour, which is in the past by more than
  # submission's 10-minute grace when the test runs late in the hour
  GT_SBATCH="$D/sbatch-logged" "$GT" schedule "$2" --carbon-csv "$D/ci-now.csv" \
    --utc-offset 0 --submit slurm --shift-to-now > "$D/schedule-$1.out" 2>&1 ||
    fail "greentrain schedule $2 --submit slurm failed: $(cat "$D/schedule-$1.out")"
  cat "$D/schedule-$1.out"
  [ "$(grep -c "^submitted $1 run " "$D/schedule-$1.out")" = 1 ] ||
    fail "the plan of $1 is not one sbatch call: $(grep "^submitted" "$D/schedule-$1.out")"
  JOB=$(sed -nE "s/^submitted $1 run 0 as Slurm job ([0-9]+)$/\1/p" "$D/schedule-$1.out")
  [ -n "$JOB" ] || fail "schedule printed no Slurm job id for $1"
  ARGS="$D/sbatch-$1.args"
  grep -F -- "--job-name=$1 " "$D/sbatch-calls.log" > "$ARGS" || fail "no sbatch call for $1"
  SCRIPT="$D/batch-$1.sh"
  scontrol write batch_script "$JOB" "$SCRIPT" >/dev/null 2>&1 ||
    fail "scontrol write batch_script $JOB failed"
  echo "$1 is Slurm job $JOB: sbatch $(cat "$ARGS")"
}
# expect_interruptible COMMAND: the submitted job asks for SIGTERM at its end, requeueing and
# a log appended to on requeue, and its batch script execs COMMAND (so that the trainer, or
# srun, gets B:TERM)
expect_interruptible() {  # COMMAND [SIGNAL, default --signal=B:TERM@60]
  local a
  # --time: the 600 s run, the signal's 60 s lead and the 5 min margin of a job's last run;
  # --time-min: the run's length
  for a in "${2:---signal=B:TERM@60}" --requeue --open-mode=append --time=16 --time-min=10 \
    --deadline=; do
    grep -qF -- " $a" "$ARGS" || fail "job $JOB was submitted without $a: $(cat "$ARGS")"
  done
  [ "$(field_of "$JOB" Requeue)" = 1 ] || fail "Slurm holds job $JOB with Requeue=$(field_of "$JOB" Requeue)"
  grep -qxF "exec $1" "$SCRIPT" ||
    fail "job $JOB's batch script does not exec '$1':$(printf '\n'; cat "$SCRIPT")"
}
losses() { sed -E 's/^\{"step":([0-9]+),"loss":([^,]+),.*/\1 \2/' "$1/metrics.jsonl"; }

# --- 2. preempt a scheduled training job: SIGTERM, checkpoint, requeue, resume bit for bit --
export OMP_NUM_THREADS=1
cat /usr/share/common-licenses/GPL-3 /usr/share/common-licenses/Apache-2.0 > "$D/text.txt" \
  2>/dev/null || fail "no text for training"
write_config() {  # FILE MAX_STEPS
  cat > "$1" <<TOML
[model]
n_layer = 2
n_head = 2
n_embd = 64
block_size = 32
[train]
batch_size = 8
max_steps = $2
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
}
# long enough that a loaded machine cannot finish a run between the step the test waits for
# and its signal landing (a 2-rank run of 1000 steps once did, on CI): about 2 ms a step here
STEPS=3000
write_config "$D/tiny.toml" $STEPS
"$GT" train "$D/tiny.toml" --out "$D/ref" > "$D/ref.out" 2>&1 || fail "reference run failed"
TRAIN_CMD="$GT train $D/tiny.toml --out $D/run --resume"
cat > "$D/train-jobs.toml" <<TOML
[[job]]
name = "e2e-train"
command = "$TRAIN_CMD"
duration_s = 600
power_w = 100
earliest_start = $NOW_SLOT
deadline = $DEADLINE
interruptible = true
TOML
submit e2e-train "$D/train-jobs.toml"
expect_interruptible "$TRAIN_CMD"
wait_step "$D/run" 300 120 "$JOB"
S1=$STEP_AT
# what --signal=B:TERM@60 sends before the time limit: SIGTERM to the batch step only
echo "signalling job $JOB at step $S1: scancel --signal=TERM --batch"
scancel --signal=TERM --batch "$JOB" || fail "scancel --signal=TERM --batch $JOB failed"
wait_state "$JOB" 60 FAILED COMPLETED CANCELLED TIMEOUT ||
  fail "job $JOB is still $ST 60 s after SIGTERM to its batch step"
[ "$(field_of "$JOB" ExitCode)" = "143:0" ] ||
  fail "job $JOB ended $ST with ExitCode=$(field_of "$JOB" ExitCode) after SIGTERM to its batch" \
       "step; expected 143:0 (the trainer checkpoints and exits 128+15)"
grep -q "stopped at step" "$D/slurm-$JOB.out" || fail "the trainer did not stop on SIGTERM"
[ -e "$D/run/checkpoint" ] || fail "no checkpoint in $D/run after SIGTERM"
requeue_now "$JOB"
wait_step "$D/run" $((S1 + 400)) 120 "$JOB"
S2=$STEP_AT
# what a cluster's preemption (PreemptMode=REQUEUE) does: SIGTERM to the job, back to the queue
echo "preempting job $JOB at step $S2: scontrol requeue"
requeue_now "$JOB"
wait_state "$JOB" 180 COMPLETED FAILED CANCELLED TIMEOUT || fail "job $JOB still $ST"
RESTARTS=2
# A one-node Slurm on a loaded 2-vCPU machine has once ended the requeued job FAILED (1:0)
# before its batch script ran (nothing appended to the log: no third run's "  model" line). That is a launch failure of this Slurm, not the trainer's: say so, with slurmd's
# last lines, and requeue once more. Anything the trainer printed still fails below.
if [ "$ST" = FAILED ] && [ "$(grep -c "^  model " "$D/slurm-$JOB.out")" -lt 3 ]; then
  echo "NOTE: Slurm ended job $JOB $ST ($(field_of "$JOB" ExitCode)) before its batch script" \
       "printed anything; slurmd's last lines:"
  tail -n 15 "$D/slurmd.log" 2>/dev/null || true
  requeue_now "$JOB"
  wait_state "$JOB" 180 COMPLETED FAILED CANCELLED TIMEOUT || fail "job $JOB still $ST"
  RESTARTS=3
fi
cat "$D/slurm-$JOB.out"
[ "$ST" = COMPLETED ] || fail "job $JOB ended $ST ($(field_of "$JOB" ExitCode))"
[ "$(field_of "$JOB" Restarts)" = $RESTARTS ] ||
  fail "job $JOB restarted $(field_of "$JOB" Restarts) times; expected $RESTARTS"
# the log holds all three runs (--open-mode=append): two stops, two resumes
[ "$(grep -c "^stopped at step" "$D/slurm-$JOB.out")" = 2 ] ||
  fail "the log of job $JOB does not show two stops (SIGTERM, then scontrol requeue)"
[ "$(grep -c "resumed  from step" "$D/slurm-$JOB.out")" = 2 ] ||
  fail "the log of job $JOB does not show two resumes"
losses "$D/ref" > "$D/ref.loss"
losses "$D/run" > "$D/run.loss"
[ "$(wc -l < "$D/ref.loss")" = $STEPS ] || fail "reference has $(wc -l < "$D/ref.loss") steps"
cmp -s "$D/ref.loss" "$D/run.loss" ||
  fail "losses differ from the uninterrupted run: $(diff "$D/ref.loss" "$D/run.loss" | head -n 5)"
echo "PASS: scheduled job $JOB stopped by SIGTERM at step $S1 (exit 143, checkpoint) and" \
     "preempted at step $S2, requeued twice, resumed; all $STEPS losses equal"

# --- 4. a scheduled data-parallel job of 2 tasks (exec srun): preempted and resumed --------
if [ "${GT_SLURM_E2E_DIST:-1}" = 1 ] && command -v mpirun >/dev/null; then
  write_config "$D/dist.toml" $STEPS
  mpirun --oversubscribe --allow-run-as-root --bind-to none -np 2 "$GT" train "$D/dist.toml" \
    --out "$D/dref" > "$D/dref.out" 2>&1 || fail "2-rank reference run failed: $(tail -n 5 "$D/dref.out")"
  DIST_CMD="$GT train $D/dist.toml --out $D/drun --resume"
  cat > "$D/dist-jobs.toml" <<TOML
[[job]]
name = "e2e-dist"
command = "$DIST_CMD"
duration_s = 600
power_w = 200
earliest_start = $NOW_SLOT
deadline = $DEADLINE
interruptible = true
ntasks = 2
nodes = 1
TOML
  submit e2e-dist "$D/dist-jobs.toml"
  # SIGTERM goes to the ranks, not to the batch shell: srun answers a SIGTERM by SIGKILLing
  # its tasks ("srun: forcing job termination"), so B:TERM would lose the checkpoint
  expect_interruptible "srun --mpi=pmix --kill-on-bad-exit=1 $DIST_CMD" --signal=TERM@60
  grep -qF -- " --ntasks=2 --nodes=1" "$ARGS" || fail "job $JOB was not submitted with 2 tasks"
  wait_step "$D/drun" 200 120 "$JOB"
  S1=$STEP_AT
  # what --signal=TERM@60 sends before the time limit: SIGTERM to the job's steps (the ranks)
  echo "signalling job $JOB at step $S1: scancel --signal=TERM (its steps, not the batch shell)"
  scancel --signal=TERM "$JOB" || fail "scancel --signal=TERM $JOB failed"
  wait_state "$JOB" 60 FAILED COMPLETED CANCELLED TIMEOUT ||
    fail "job $JOB is still $ST 60 s after SIGTERM to its ranks"
  [ "$(field_of "$JOB" ExitCode)" = "143:0" ] ||
    fail "job $JOB ended $ST with ExitCode=$(field_of "$JOB" ExitCode); expected 143:0"
  grep -q "2 ranks" "$D/slurm-$JOB.out" || fail "the job did not run as 2 ranks"
  grep -q "stopped at step" "$D/slurm-$JOB.out" || fail "the 2 ranks did not stop on SIGTERM"
  [ -e "$D/drun/checkpoint" ] || fail "no checkpoint in $D/drun after SIGTERM"
  requeue_now "$JOB"
  wait_state "$JOB" 120 COMPLETED FAILED CANCELLED TIMEOUT || fail "job $JOB still $ST"
  cat "$D/slurm-$JOB.out"
  [ "$ST" = COMPLETED ] || fail "the 2-task job ended $ST ($(field_of "$JOB" ExitCode))"
  grep -q "resumed  from step" "$D/slurm-$JOB.out" || fail "the requeued 2-task job did not resume"
  losses "$D/dref" > "$D/dref.loss"
  losses "$D/drun" > "$D/drun.loss"
  [ "$(wc -l < "$D/dref.loss")" = $STEPS ] || fail "2-rank reference has $(wc -l < "$D/dref.loss") steps"
  cmp -s "$D/dref.loss" "$D/drun.loss" ||
    fail "2-task losses differ from the uninterrupted 2-rank run: $(diff "$D/dref.loss" "$D/drun.loss" | head -n 5)"
  echo "PASS: scheduled 2-task job $JOB stopped by SIGTERM to its ranks at step $S1 (exit 143)," \
       "requeued, resumed; losses equal the 2-rank run's"
fi

# --- 5. a planned CPU power limit reaches the trainer through Slurm -------------------------
# A power profile as `greentrain tune` writes it: at 60 W each step takes 20 % longer and half
# the energy, so the plan caps the job at 60 W. The RAPL zone is a stand-in (this machine may
# have no writable powercap): a package zone whose limit file the trainer sets and restores.
mkdir -p "$D/powercap/intel-rapl:0"
echo package-0 > "$D/powercap/intel-rapl:0/name"
echo 200000000 > "$D/powercap/intel-rapl:0/constraint_0_max_power_uw"
echo 150000000 > "$D/powercap/intel-rapl:0/constraint_0_power_limit_uw"
cat > "$D/profile.json" <<JSON
{"format": "greentrain-power-profile-1",
 "points": [{"limit_w": 150, "time_per_step_s": 0.010, "energy_per_step_j": 1.2},
            {"limit_w": 60, "time_per_step_s": 0.012, "energy_per_step_j": 0.6}]}
JSON
write_config "$D/cap.toml" 600
CAP_CMD="$GT train $D/cap.toml --out $D/caprun"
cat > "$D/cap-jobs.toml" <<TOML
[[job]]
name = "e2e-cap"
command = "$CAP_CMD"
power_profile = "$D/profile.json"
steps = 600
cap_device = "cpu"
earliest_start = $NOW_SLOT
deadline = $DEADLINE
TOML
export GT_POWERCAP_ROOT="$D/powercap"  # sbatch passes the environment to the job
submit e2e-cap "$D/cap-jobs.toml"
unset GT_POWERCAP_ROOT
grep -qxF "$CAP_CMD --set train.power_limit=60 --set train.power_limit_device=cpu" "$SCRIPT" ||
  fail "job $JOB's batch script does not run '$CAP_CMD --set train.power_limit=60 --set" \
       "train.power_limit_device=cpu':" \
       "$(printf '\n'; cat "$SCRIPT")"
seen=""
for _ in $(seq 1 240); do
  [ "$(cat "$D/powercap/intel-rapl:0/constraint_0_power_limit_uw")" = 60000000 ] && seen=1
  case "$(state_of "$JOB")" in COMPLETED | FAILED | CANCELLED | TIMEOUT) break ;; esac
  sleep 0.25
done
cat "$D/slurm-$JOB.out"
[ "$(state_of "$JOB")" = COMPLETED ] || fail "the capped job ended $(state_of "$JOB") ($(field_of "$JOB" ExitCode))"
grep -q "limit 60 W applied" "$D/slurm-$JOB.out" || fail "the trainer did not apply the planned 60 W"
[ -n "$seen" ] || fail "the RAPL limit was never 60 W while job $JOB ran"
[ "$(cat "$D/powercap/intel-rapl:0/constraint_0_power_limit_uw")" = 150000000 ] ||
  fail "the RAPL limit was not restored to 150 W after the job"
echo "PASS: planned cap of 60 W submitted as --set train.power_limit=60 --set" \
     "train.power_limit_device=cpu, set while job $JOB ran, restored after"

# --- 3. the SPANK plugin ------------------------------------------------------------------
if [ -n "$PLUGSTACK" ]; then
  # the whole help first: under pipefail, `sbatch --help | grep -q` fails whenever grep exits
  # at its match before sbatch has written the rest (SIGPIPE)
  help=$(sbatch --help 2>&1)
  grep -q -- "--gpu-power-limit" <<< "$help" || fail "sbatch has no --gpu-power-limit"
  echo "PASS: the SPANK plugin adds --gpu-power-limit to sbatch"
fi
echo "PASS"
