#!/bin/sh
# End-to-end test of `greentrain schedule --submit slurm` with a fake sbatch that records its
# arguments: the table, the JSON plan, the dry run and the submission. Usage: GREENTRAIN SRC_DIR
set -eu
GT="$1"
SRC="$2"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
# the plans below are on 2020 series: they are submitted as of the start of 2020 (a plan in
# the past is refused; issue 31 §5)
GT_SCHEDULE_NOW=2020-01-01T00:00:00Z
export GT_SCHEDULE_NOW
SRC_CI="$T/ci.csv"
cat > "$T/ci.csv" <<CSV
Time,Carbon Intensity
2020-06-01 00:00:00,400
2020-06-01 01:00:00,100
2020-06-01 02:00:00,400
2020-06-01 03:00:00,50
2020-06-01 04:00:00,400
2020-06-01 05:00:00,400
CSV
cat > "$T/jobs.toml" <<TOML
[[job]]
name = "fixed"
script = "fixed.sbatch"
duration_s = 3600
power_w = 300
earliest_start = 2020-06-01T00:00:00
deadline = 2020-06-01T05:00:00

[[job]]
name = "resumable"
command = "greentrain train c.toml --out r --resume"
duration_s = 7200
power_w = 200
earliest_start = 2020-06-01T00:00:00
deadline = 2020-06-01T05:00:00
interruptible = true

[[job]]
name = "impossible"
command = "true"
duration_s = 36000
power_w = 100
earliest_start = 2020-06-01T00:00:00
deadline = 2020-06-01T05:00:00
TOML
fail() { echo "FAIL: $*"; exit 1; }
# fake_sbatch NAME LAST_ID [FAILING_ID]: writes $T/NAME, a fake sbatch that prints the job ids
# after LAST_ID in turn (counting in $T/NAME.n) and logs its arguments to $T/NAME.log; the call
# that draws FAILING_ID fails as sbatch does, logging nothing.
fake_sbatch() {
  cat > "$T/$1" <<SH
#!/bin/sh
n=\$(cat "$T/$1.n" 2>/dev/null || echo $2); n=\$((n+1)); echo \$n > "$T/$1.n"
[ "\$n" = "${3:-none}" ] && { echo "sbatch: error: Batch job submission failed" >&2; exit 1; }
echo "\$@" >> "$T/$1.log"
echo \$n
SH
  chmod +x "$T/$1"
}
# submit SBATCH NOW OUT ARG...: `greentrain schedule ARG... --submit slurm` as of NOW (an ISO
# instant for GT_SCHEDULE_NOW) through the fake $T/SBATCH; both output streams go to $T/OUT and
# the status is schedule's.
submit() {
  sb=$1 now=$2 out=$3
  shift 3
  GT_SCHEDULE_NOW=$now GT_SBATCH="$T/$sb" "$GT" schedule "$@" --submit slurm > "$T/$out" 2>&1
}
fake_sbatch sbatch 500

# Dry run: prints sbatch lines, submits nothing. Exit 3: one job could not be scheduled (review
# of `schedule`, left item 1: it was 2, a usage error's status too).
rc=0
GT_SBATCH="$T/sbatch" "$GT" schedule "$T/jobs.toml" --carbon-csv "$T/ci.csv" --utc-offset 2 \
  --cluster-tz +02:00 --strategy interrupt --json "$T/plan.json" --submit slurm --dry-run > "$T/out.txt" || rc=$?
cat "$T/out.txt"
[ "$rc" = 3 ] || fail "exit code $rc, expected 3 (a job was not scheduled)"
grep -q "impossible *NOT SCHEDULED" "$T/out.txt" || fail "unscheduled job not reported"
grep -q -- "--begin=2020-06-01T03:00:00 --deadline=2020-06-01T05:00:00" "$T/out.txt" ||
  fail "fixed job not at the 03:00 valley"
grep -q -- "--begin=2020-06-01T01:00:00" "$T/out.txt" || fail "resumable run 0 not at 01:00"
grep -q -- "--dependency=afterany:\"\$PREV_JOBID\"" "$T/out.txt" || fail "no dependency line"
[ ! -e "$T/sbatch.log" ] || fail "dry run called sbatch"
grep -q '"unscheduled"' "$T/plan.json" || fail "no JSON plan"
ls "$T" | grep -q tmp && fail "temporary JSON file left behind"
# the same plan with a usage error (--utc-offset missing, an unknown option) exits 2, an error
# in what is read (a carbon CSV that is not there) 1: each status tells one thing
for opts in "--strategy interrupt" "--utc-offset 2 --strategy interrupt --no-such-option"; do
  rc=0
  # shellcheck disable=SC2086
  "$GT" schedule "$T/jobs.toml" --carbon-csv "$T/ci.csv" $opts > "$T/usage.txt" 2>&1 || rc=$?
  [ "$rc" = 2 ] || fail "schedule $opts: exit $rc, expected 2 (a usage error): $(cat "$T/usage.txt")"
done
rc=0
"$GT" schedule "$T/jobs.toml" --carbon-csv "$T/absent.csv" --utc-offset 2 > "$T/usage.txt" 2>&1 || rc=$?
[ "$rc" = 1 ] || fail "a carbon CSV that is not there: exit $rc, expected 1: $(cat "$T/usage.txt")"

# Submission through the fake sbatch.
rc=0
GT_SBATCH="$T/sbatch" "$GT" schedule "$T/jobs.toml" --carbon-csv "$T/ci.csv" --utc-offset 2 \
  --cluster-tz +02:00 --strategy interrupt --submit slurm > "$T/out2.txt" || rc=$?
cat "$T/out2.txt" "$T/sbatch.log"
[ "$rc" = 3 ] || fail "exit code $rc, expected 3 (a job was not scheduled; the others submitted)"
[ "$(wc -l < "$T/sbatch.log")" = 3 ] || fail "expected 3 sbatch calls"
grep -q "submitted resumable run 1 as Slurm job 503" "$T/out2.txt" || fail "ids not reported"
grep -q -- "--dependency=afterany:502" "$T/sbatch.log" || fail "run 1 not chained to 502"
grep -q -- "--signal=B:TERM@60 --requeue" "$T/sbatch.log" || fail "no preemption signal"

# Issue 17.1: the times given to sbatch are in the zone sbatch reads them in (the host's, here
# Berlin's CEST, UTC+2), not the CSV's: the 03:00 (UTC+2) valley is 01:00 UTC, 03:00 in Berlin.
printf 'Time,Carbon Intensity\n2020-05-31 22:00:00,400\n2020-05-31 23:00:00,100\n2020-06-01 00:00:00,400\n2020-06-01 01:00:00,50\n2020-06-01 02:00:00,400\n2020-06-01 03:00:00,400\n' \
  > "$T/ci_utc.csv"
rc=0
TZ=Europe/Berlin GT_SBATCH="$T/sbatch" "$GT" schedule "$T/jobs.toml" --carbon-csv "$T/ci_utc.csv" \
  --utc-offset 0 --strategy interrupt --submit slurm --dry-run > "$T/out_tz.txt" || rc=$?
cat "$T/out_tz.txt"
if [ -e /usr/share/zoneinfo/Europe/Berlin ]; then
  grep -q "wall clock in the local zone of this host (TZ=Europe/Berlin)" "$T/out_tz.txt" ||
    fail "dry run does not say which zone its times are in"
  # job times in jobs.toml are now read at UTC+0: 2020-06-01T00:00 .. 05:00 UTC
  grep -q -- "--begin=2020-06-01T03:00:00 --deadline=2020-06-01T07:00:00" "$T/out_tz.txt" ||
    fail "--begin/--deadline not in the host's zone (Berlin, UTC+2)"
fi

# Bad input: a CSV without the Carbon Intensity column.
printf 'Time,CI\n2020-06-01 00:00:00,1\n' > "$T/bad.csv"
if "$GT" schedule "$T/jobs.toml" --carbon-csv "$T/bad.csv" --utc-offset 0 2> "$T/err.txt"; then
  fail "bad CSV accepted"
fi
grep -q "no column 'Carbon Intensity'" "$T/err.txt" || fail "unclear error: $(cat "$T/err.txt")"
# Issue 12.6: the energy module's reader: a byte order mark, CRLF and rows with their own offset
# are read (they were refused), and a hole in the series is warned about on the console and in
# the JSON plan instead of being bridged silently.
printf '\357\273\277Time,Carbon Intensity\r\n2020-06-01T00:00:00+02:00,400\r\n2020-06-01T01:00:00+02:00,100\r\n2020-06-01T04:00:00+02:00,50\r\n2020-06-01T05:00:00+02:00,400\r\n' > "$T/hole.csv"
rc=0
"$GT" schedule "$T/jobs.toml" --carbon-csv "$T/hole.csv" --utc-offset 2 --json "$T/hole.json" \
  > "$T/out3.txt" 2>&1 || rc=$?
cat "$T/out3.txt"
[ "$rc" = 3 ] || fail "exit code $rc with the offset CSV, expected 3 (a job was not scheduled)"
grep -q "warning: carbon series $T/hole.csv: no rows from 2020-06-01T00:00:00Z to 2020-06-01T02:00:00Z" \
  "$T/out3.txt" || fail "hole not warned about on the console"
grep -q '"carbon_warnings"' "$T/hole.json" || fail "no carbon_warnings in the JSON plan"
grep -q 'no rows from 2020-06-01T00:00:00Z' "$T/hole.json" || fail "hole not in the JSON plan"
# Issue 17.2: a job CSV with a +-30 min window around each nominal start (the baseline), 30-min
# slots at their start value, and several seeds of the forecast noise in one run.
printf 'name,nominal_start,duration_s\nn1,2020-06-01 02:00:00,1800\n' > "$T/jobs.csv"
"$GT" schedule "$T/jobs.csv" --carbon-csv "$SRC_CI" --utc-offset 0 --slot-s 1800 \
  --slot-value start --job-power-w 1000 --window-h 0.5 --strategy shift --forecast-error 5 \
  --seed 0 --seeds 3 --json "$T/w.json" > "$T/out4.txt" 2>&1 || fail "job CSV run failed: $(cat "$T/out4.txt")"
cat "$T/out4.txt"
# nominal 02:00 (400 g/kWh); the +-30 min window opens at 01:30 (100 g/kWh), before it
grep -q '"start": "2020-06-01T01:30:00+00:00"' "$T/w.json" || fail "plan did not use the window before the nominal start"
grep -q '"start": "2020-06-01T02:00:00+00:00"' "$T/w.json" || fail "baseline is not at the nominal start"
[ "$(grep -c '^seed [0-9]*: ' "$T/out4.txt")" = 3 ] || fail "--seeds 3 did not print 3 plans"
grep -q '^mean over 3 seeds: ' "$T/out4.txt" || fail "no mean over the seeds"
rc=0
"$GT" schedule "$T/jobs.csv" --carbon-csv "$SRC_CI" --utc-offset 0 --job-power-w 1 --seeds 2 \
  --forecast-error 5 --submit slurm --dry-run > "$T/err2.txt" 2>&1 || rc=$?
[ "$rc" != 0 ] && grep -q -- "--seeds > 1" "$T/err2.txt" || fail "--submit with --seeds 2 was not refused"
# Review of `schedule`, item 5: options that would be ignored are usage errors (exit 2) naming
# them, before anything is read: --dry-run, --cluster-tz, --shift-to-now without --submit (the
# plan was printed, nothing said), --seed and --seeds N without --forecast-error (N identical
# plans).
for case in "--dry-run|--dry-run applies to --submit only" \
            "--cluster-tz +02:00|--cluster-tz applies to --submit only" \
            "--shift-to-now|--shift-to-now applies to --submit only" \
            "--dry-run --cluster-tz 0 --shift-to-now|--dry-run, --cluster-tz and --shift-to-now apply to --submit only" \
            "--seeds 3|--seeds 3 applies to --forecast-error only" \
            "--seed 7|--seed applies to --forecast-error only" \
            "--forecast-error 0 --seed 7 --seeds 2|--seed and --seeds 2 apply to --forecast-error only" \
            "--energy-weight 10|--energy-weight applies to --objective weighted only"; do
  opts=${case%%|*}
  want=${case#*|}
  rc=0
  # shellcheck disable=SC2086
  "$GT" schedule "$T/jobs.csv" --carbon-csv "$SRC_CI" --utc-offset 0 --job-power-w 1 $opts \
    > "$T/ignored.txt" 2>&1 || rc=$?
  [ "$rc" = 2 ] || fail "schedule $opts: exit $rc, expected 2 (a usage error): $(cat "$T/ignored.txt")"
  grep -qF -- "$want" "$T/ignored.txt" || fail "schedule $opts: $(cat "$T/ignored.txt")"
  grep -q "carbon series" "$T/ignored.txt" && fail "schedule $opts: refused after reading the series"
done
# Issue 17.3: a named zone (--tz, the same option as --utc-offset) for the CSV, the job times and
# the output. The CSV's local times repeat 02:00 on 2020-10-25 (read in order: 00:00Z, then
# 01:00Z); the 04:00 CET valley is 03:00Z, and sbatch gets Berlin's wall clock.
if [ -e /usr/share/zoneinfo/Europe/Berlin ]; then
  printf 'Time,Carbon Intensity\n2020-10-25 01:00:00,400\n2020-10-25 02:00:00,400\n2020-10-25 02:00:00,400\n2020-10-25 03:00:00,400\n2020-10-25 04:00:00,50\n2020-10-25 05:00:00,400\n' \
    > "$T/berlin.csv"
  printf '[[job]]\nname = "b"\nscript = "b.sbatch"\nduration_s = 3600\npower_w = 100\nearliest_start = 2020-10-25T01:00:00\ndeadline = 2020-10-25T06:00:00\n' \
    > "$T/berlin.toml"
  GT_SBATCH="$T/sbatch" "$GT" schedule "$T/berlin.toml" --carbon-csv "$T/berlin.csv" \
    --tz Europe/Berlin --cluster-tz Europe/Berlin --json "$T/berlin.json" --submit slurm \
    --dry-run > "$T/out5.txt" 2>&1 || fail "Europe/Berlin run failed: $(cat "$T/out5.txt")"
  cat "$T/out5.txt"
  grep -q -- "--begin=2020-10-25T04:00:00 --deadline=2020-10-25T06:00:00" "$T/out5.txt" ||
    fail "--begin/--deadline not at the 04:00 CET valley in Berlin's wall clock"
  grep -q "wall clock in Europe/Berlin" "$T/out5.txt" || fail "dry run does not name Europe/Berlin"
  grep -q '"start": "2020-10-25T04:00:00+01:00"' "$T/berlin.json" || fail "JSON start not in CET"
  grep -q '"time_zone": "Europe/Berlin"' "$T/berlin.json" || fail "JSON does not name the zone"
  if "$GT" schedule "$T/berlin.toml" --carbon-csv "$T/berlin.csv" --tz Mars/Olympus_Mons \
    2> "$T/err5.txt"; then
    fail "unknown zone accepted"
  fi
  grep -q -- "--utc-offset 'Mars/Olympus_Mons': no such time zone" "$T/err5.txt" ||
    fail "unclear error for an unknown zone: $(cat "$T/err5.txt")"
fi
# Issue 17.3: --objective weighted with --energy-weight is named in the table and the JSON, which
# gives energy and gCO2e of plan and baseline; an unknown objective is refused, named.
"$GT" schedule "$T/jobs.csv" --carbon-csv "$SRC_CI" --utc-offset 0 --job-power-w 1000 \
  --window-h 0.5 --objective weighted --energy-weight 120 --json "$T/o.json" > "$T/out6.txt" 2>&1 ||
  fail "--objective weighted failed: $(cat "$T/out6.txt")"
grep -q "objective weighted (gCO2e + 120 gCO2e/kWh x kWh)" "$T/out6.txt" || fail "objective not in the table"
grep -q '"objective": "weighted"' "$T/o.json" || fail "objective not in the JSON"
grep -q '"energy_weight_g_per_kwh": 120' "$T/o.json" || fail "energy weight not in the JSON"
grep -q '"baseline_energy_j"' "$T/o.json" || fail "baseline energy not in the JSON"
rc=0
"$GT" schedule "$T/jobs.csv" --carbon-csv "$SRC_CI" --utc-offset 0 --job-power-w 1 \
  --objective money > "$T/err3.txt" 2>&1 || rc=$?
[ "$rc" != 0 ] && grep -q -- "--objective 'money' is not known" "$T/err3.txt" || fail "unknown objective not refused"
# Issue 31 §5: a plan whose starts lie in the past (a 2020 series submitted in 2026) is refused,
# naming the job; --shift-to-now starts it now; a passed deadline is refused even then.
printf '[[job]]\nname = "late"\nscript = "late.sbatch"\nduration_s = 3600\npower_w = 100\nearliest_start = 2020-06-01T00:00:00\ndeadline = 2030-01-01T00:00:00\n' \
  > "$T/late.toml"
rc=0
GT_SCHEDULE_NOW=2026-06-01T00:00:00Z GT_SBATCH="$T/sbatch" "$GT" schedule "$T/late.toml" \
  --carbon-csv "$T/ci.csv" --utc-offset 0 --cluster-tz 0 --submit slurm --dry-run \
  > "$T/past.txt" 2>&1 || rc=$?
cat "$T/past.txt"
[ "$rc" != 0 ] || fail "a plan in the past was submitted"
grep -q "job 'late': its planned start 2020-06-01T03:00:00+00:00 is in the past" "$T/past.txt" ||
  fail "the refusal does not name the job and its start: $(cat "$T/past.txt")"
GT_SCHEDULE_NOW=2026-06-01T00:00:00Z GT_SBATCH="$T/sbatch" "$GT" schedule "$T/late.toml" \
  --carbon-csv "$T/ci.csv" --utc-offset 0 --cluster-tz 0 --submit slurm --dry-run --shift-to-now \
  > "$T/shift.txt" 2>&1 || fail "--shift-to-now failed: $(cat "$T/shift.txt")"
grep -q -- "--begin=2026-06-01T00:00:00 " "$T/shift.txt" || fail "not shifted to now: $(cat "$T/shift.txt")"
grep -q "note: job 'late': planned to start at 2020-06-01T03:00:00+00:00, in the past: shifted" \
  "$T/shift.txt" || fail "the shift is not said"
rc=0
GT_SCHEDULE_NOW=2026-06-01T00:00:00Z "$GT" schedule "$T/jobs.toml" --carbon-csv "$T/ci.csv" \
  --utc-offset 2 --submit slurm --dry-run --shift-to-now > "$T/dead.txt" 2>&1 || rc=$?
[ "$rc" != 0 ] && grep -q "job 'fixed': its deadline 2020-06-01T03:00:00+00:00 has passed" "$T/dead.txt" ||
  fail "a passed deadline was not refused: $(cat "$T/dead.txt")"

# Issue 31 §5: a planned start in the repeated autumn hour (2020-10-25 00:00Z is 02:00 CEST,
# and 02:00 CET is 01:00Z, the dirty slot) is written so that Slurm reads the planned instant.
if [ -e /usr/share/zoneinfo/Europe/Berlin ]; then
  printf 'Time,Carbon Intensity\n2020-10-24 23:00:00,400\n2020-10-25 00:00:00,10\n2020-10-25 01:00:00,900\n2020-10-25 02:00:00,400\n2020-10-25 03:00:00,400\n' \
    > "$T/autumn.csv"
  printf '[[job]]\nname = "a"\nscript = "a.sbatch"\nduration_s = 3600\npower_w = 100\nearliest_start = 2020-10-24T23:00:00\ndeadline = 2020-10-25T04:00:00\n' \
    > "$T/autumn.toml"
  GT_SBATCH="$T/sbatch" "$GT" schedule "$T/autumn.toml" --carbon-csv "$T/autumn.csv" \
    --utc-offset 0 --cluster-tz Europe/Berlin --submit slurm --dry-run > "$T/autumn.txt" 2>&1 ||
    fail "autumn run failed: $(cat "$T/autumn.txt")"
  cat "$T/autumn.txt"
  grep -q -- "--begin=2020-10-25T02:00:00 --deadline" "$T/autumn.txt" &&
    fail "an ambiguous --begin was written as a wall clock Slurm may read as 01:00Z"
  grep -q -- "--begin=now+\"\$((1603584000 - \$(date +%s)))\"" "$T/autumn.txt" ||
    fail "the ambiguous start is not written as the exact instant"
  grep -q "note: --begin=2020-10-25T02:00:00 is ambiguous in Europe/Berlin" "$T/autumn.txt" ||
    fail "the ambiguous start is not said"
  # submitted: sbatch gets now+N, N the seconds from the call to 00:00Z
  GT_SBATCH="$T/sbatch" "$GT" schedule "$T/autumn.toml" --carbon-csv "$T/autumn.csv" \
    --utc-offset 0 --cluster-tz Europe/Berlin --submit slurm > "$T/autumn2.txt" 2>&1 ||
    fail "autumn submission failed: $(cat "$T/autumn2.txt")"
  grep -q -- "--begin=now+[0-9]" "$T/sbatch.log" || fail "sbatch did not get now+N: $(tail -1 "$T/sbatch.log")"
fi

# Issue 31 §6: sbatch fails on the second of three calls: the first is said with its id and
# recorded, and the rerun submits only the other two.
fake_sbatch sbatch-flaky 700 702
cp "$T/jobs.toml" "$T/three.toml"
# the arguments of both runs
set -- "$T/three.toml" --carbon-csv "$T/ci.csv" --utc-offset 2 --cluster-tz +02:00 --strategy interrupt
rc=0
submit sbatch-flaky "$GT_SCHEDULE_NOW" flaky1.txt "$@" || rc=$?
cat "$T/flaky1.txt"
[ "$rc" != 0 ] || fail "a failed sbatch was not an error"
grep -q "job 'fixed' run 0: Slurm job 701" "$T/flaky1.txt" || fail "the job already queued is not said"
[ -e "$T/three.toml.submitted.json" ] || fail "no submission record"
submit sbatch-flaky "$GT_SCHEDULE_NOW" flaky2.txt "$@" || rc=$?
cat "$T/flaky2.txt" "$T/sbatch-flaky.log"
grep -q "job 'fixed' run 0: already submitted as Slurm job 701" "$T/flaky2.txt" ||
  fail "the rerun did not skip the job already queued"
[ "$(grep -c -- "--job-name=fixed" "$T/sbatch-flaky.log")" = 1 ] || fail "'fixed' was submitted twice"
[ "$(wc -l < "$T/sbatch-flaky.log")" = 3 ] || fail "expected 3 sbatch calls in all"
grep -q -- "--dependency=afterany:703" "$T/sbatch-flaky.log" || fail "run 1 not chained to run 0 (703)"

# Review of `schedule`, item 1: the retry submits only the rest, also (a) when the start of the
# job Slurm has has passed (the retry was refused: "its planned start ... is in the past"), and
# (b) with --shift-to-now, whose --begin is the retry's now (the job Slurm had was submitted
# again: the record's key held --begin).
fake_sbatch sbatch-flaky2 800 802
# retry NOW TOML OUT [OPTION...]: TOML submitted on retry.csv (UTC) as of NOW through sbatch-flaky2
retry() {
  now=$1 toml=$2 out=$3
  shift 3
  submit sbatch-flaky2 "$now" "$out" "$T/$toml" --carbon-csv "$T/retry.csv" --utc-offset 0 \
    --cluster-tz 0 "$@"
}
# a runs at 00:00 (the clean hour; deadline 05:00), b at 03:00 (its window: 03:00 to 04:00)
printf 'Time,Carbon Intensity\n2020-06-01 00:00:00,10\n2020-06-01 01:00:00,400\n2020-06-01 02:00:00,400\n2020-06-01 03:00:00,400\n2020-06-01 04:00:00,400\n' \
  > "$T/retry.csv"
printf '[[job]]\nname = "a"\nscript = "a.sbatch"\nduration_s = 3600\npower_w = 100\nearliest_start = 2020-06-01T00:00:00\ndeadline = 2020-06-01T05:00:00\n\n[[job]]\nname = "b"\nscript = "b.sbatch"\nduration_s = 3600\npower_w = 100\nearliest_start = 2020-06-01T03:00:00\ndeadline = 2020-06-01T04:00:00\n' \
  > "$T/retry.toml"
rc=0
retry 2020-05-31T23:00:00Z retry.toml retry1.txt || rc=$?
cat "$T/retry1.txt"
[ "$rc" != 0 ] || fail "a failed sbatch was not an error"
# an hour and a half after a's start
retry 2020-06-01T01:30:00Z retry.toml retry2.txt ||
  fail "the retry after a's start was refused: $(cat "$T/retry2.txt")"
cat "$T/retry2.txt" "$T/sbatch-flaky2.log"
grep -q "job 'a' run 0: already submitted as Slurm job 801" "$T/retry2.txt" || fail "a is not said to be queued"
grep -q "submitted b run 0 as Slurm job 803" "$T/retry2.txt" || fail "b was not submitted"
[ "$(wc -l < "$T/sbatch-flaky2.log")" = 2 ] || fail "expected 2 sbatch calls in all"
rm -f "$T/sbatch-flaky2.n" "$T/sbatch-flaky2.log"
sed 's/deadline = .*/deadline = 2030-01-01T00:00:00/' "$T/retry.toml" > "$T/shift.toml"
rc=0
retry 2026-06-01T00:00:00Z shift.toml retry3.txt --shift-to-now || rc=$?
cat "$T/retry3.txt"
[ "$rc" != 0 ] || fail "a failed sbatch was not an error"
# a dry run of the retry says what Slurm has, and shows only the rest
retry 2026-06-01T00:02:00Z shift.toml retry4.txt --shift-to-now --dry-run ||
  fail "the dry run of the retry failed: $(cat "$T/retry4.txt")"
cat "$T/retry4.txt"
grep -q "^# job 'a' run 0: already submitted as Slurm job 801" "$T/retry4.txt" ||
  fail "the dry run does not say a is queued"
[ "$(grep -c "^'*$T/sbatch-flaky2'* " "$T/retry4.txt")" = 1 ] || fail "the dry run shows other calls than b's"
retry 2026-06-01T00:02:00Z shift.toml retry5.txt --shift-to-now ||
  fail "the shifted retry failed: $(cat "$T/retry5.txt")"
cat "$T/retry5.txt" "$T/sbatch-flaky2.log"
[ "$(grep -c -- "--job-name=a " "$T/sbatch-flaky2.log")" = 1 ] || fail "'a' was submitted twice with --shift-to-now"
grep -q -- "--job-name=b --begin=2026-06-01T00:02:00" "$T/sbatch-flaky2.log" || fail "b not submitted at the retry's now"
# Review of `schedule`, left item 4: a record written before the time limits changed
# (greentrain-submitted-1; its keys hold the arguments of then: no --time for a job in one
# piece, no --time-min) matched no call, and the retry submitted every job again, the queued one
# twice. It is refused (exit 1), naming the record, its job and what to do; sbatch is not run.
cp "$T/retry.toml" "$T/old.toml"
printf '{"format": "greentrain-submitted-1", "submitted": [{"job": "a", "run": 0, "job_id": "801", "key": "a#0\\u001f--parsable\\u001f--job-name=a\\u001f--begin=2020-06-01T00:00:00\\u001f--deadline=2020-06-01T05:00:00\\u001f--comment=greentrain planned_power_w=100\\u001f'"$T/a.sbatch"'"}]}\n' \
  > "$T/old.toml.submitted.json"
rm -f "$T/sbatch.log"
for dry in "" "--dry-run"; do
  rc=0
  # shellcheck disable=SC2086
  GT_SCHEDULE_NOW=2020-05-31T23:00:00Z GT_SBATCH="$T/sbatch" "$GT" schedule "$T/old.toml" \
    --carbon-csv "$T/retry.csv" --utc-offset 0 --cluster-tz 0 --submit slurm $dry > "$T/old.txt" 2>&1 || rc=$?
  cat "$T/old.txt"
  [ "$rc" = 1 ] || fail "a retry with an old-format record: exit $rc, expected 1 (refused)"
  grep -qF "$T/old.toml.submitted.json: a submission record written by an earlier greentrain" "$T/old.txt" ||
    fail "the refusal does not name the old record"
  grep -qF "job 'a' run 0: Slurm job 801" "$T/old.txt" || fail "the refusal does not name the queued job"
  grep -qF 'squeue -j 801' "$T/old.txt" || fail "the refusal does not say to check squeue"
  [ ! -e "$T/sbatch.log" ] || fail "sbatch ran with an old-format record: $(cat "$T/sbatch.log")"
done
echo "PASS"
