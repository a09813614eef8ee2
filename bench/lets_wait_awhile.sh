#!/usr/bin/env bash
# bench/lets_wait_awhile.sh: reruns the two scenarios of Wiesner et al., "Let's Wait Awhile: How
# Temporal Workload Shifting Can Reduce Carbon Emissions in the Cloud" (Middleware '21) with
# `greentrain schedule`, for Germany, Great Britain and France, and prints greentrain's savings
# beside the published ones (shared/data/carbon/lets_wait_awhile_2020/published_results.csv),
# the difference in percentage points, and the planning time.
#
#   bench/lets_wait_awhile.sh [GREENTRAIN] [DATA_DIR] [JOBS_IN_PARALLEL]
#
# GREENTRAIN defaults to build/src/cli/greentrain (or build/greentrain), DATA_DIR to
# ../shared/data/carbon/lets_wait_awhile_2020, JOBS_IN_PARALLEL to the number of CPUs.
#
# The settings are the paper's (shared/data/carbon/README.md, section 3), each expressed with
# greentrain's own options, not special-cased in the planner:
#  - the series from 2020-01-01 00:00 (the simulator's start), read at 30-minute slots, each the
#    value at the slot's start (--slot-s 1800 --slot-value start: the simulator keeps the rows
#    at minute 0 and 30 of the 15-minute German series);
#  - scenario I: 365 jobs of 30 min at 01:00 (a job CSV; the nominal start), --window-h w for
#    w = 0 .. 8 in half hours, --strategy shift. The simulator does not run a job whose window
#    opens before its start (the 1 January job for w >= 1.5 h) but still divides by 365: that
#    job is left out of the job list for those windows, and every saving is against the 365
#    jobs at 01:00;
#  - scenario II: the 3,387 jobs of ml_jobs_seed0.csv, --deadline-rule next-workday or
#    semi-weekly, --strategy shift (non-interruptible) or interrupt with --interruptible. The
#    simulator's window holds one slot after the rule's deadline (--deadline-grace-s 1800), and
#    so does its baseline (forecast 0), which thus starts at arrival or 30 min later, whichever
#    is lower: the saving is against that baseline (greentrain's own, each job exactly at its
#    arrival, is printed in each run's "vs baseline" line);
#  - forecast error e %: Gaussian noise of sd e % of the series mean per slot, seeds 0..9, the
#    saving of the mean emissions (the simulator uses numpy's generator, greentrain its own, so
#    the noise differs draw by draw, not in distribution).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
gt=${1:-}
if [[ -z $gt ]]; then
  for c in "$here/build/src/cli/greentrain" "$here/build/greentrain" "$here/build/bin/greentrain"; do
    [[ -x $c ]] && gt=$c && break
  done
fi
[[ -n $gt && -x $gt ]] || { echo "greentrain binary not found; give its path as the first argument" >&2; exit 1; }
data=${2:-$here/../shared/data/carbon/lets_wait_awhile_2020}
par=${3:-$(nproc)}
[[ -f $data/published_results.csv ]] || { echo "$data/published_results.csv not found" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
t_start=$(date +%s.%N)

regions=(DE GB FR)
declare -A file=([DE]=ger_ci.csv [GB]=gb_ci.csv [FR]=fr_ci.csv)
for r in "${regions[@]}"; do  # the simulator's series: from 2020-01-01 00:00
  awk -F, 'NR == 1 || $1 >= "2020-01-01"' "$data/${file[$r]}" > "$tmp/$r.csv"
done

# Scenario I's jobs: one 30-minute job a day at 01:00 UTC; without 1 January (windows >= 1.5 h).
{
  echo "name,nominal_start,duration_s"
  seq 0 364 | sed 's/.*/2020-01-01 +& days/' | date -u -f - +'%F 01:00:00' | awk '{print "night" NR "," $0 ",1800"}'
} > "$tmp/nightly.csv"
{ head -1 "$tmp/nightly.csv"; tail -n +3 "$tmp/nightly.csv"; } > "$tmp/nightly_no_jan1.csv"

common="--utc-offset 0 --slot-s 1800 --slot-value start --job-power-w 1000"
seeds="--seed 0 --seeds 10"  # one process plans all 10 seeds (each prints its own totals)
# One line per greentrain run: KEY|ARGS (KEY names the result file).
{
  for r in "${regions[@]}"; do
    for w in $(seq 0 16); do
      wh=$(awk -v w="$w" 'BEGIN { printf "%.1f", w / 2 }')
      jobs=$tmp/nightly.csv
      ((w >= 3)) && jobs=$tmp/nightly_no_jan1.csv
      echo "I_${r}_${wh}_0|$jobs --carbon-csv $tmp/$r.csv $common --strategy shift --window-h $wh"
      echo "I_${r}_${wh}_5|$jobs --carbon-csv $tmp/$r.csv $common --strategy shift --window-h $wh --forecast-error 5 $seeds"
    done
    ml=$data/ml_jobs_seed0.csv
    echo "II_${r}_base|$ml --carbon-csv $tmp/$r.csv $common --strategy shift --deadline-rule none --deadline-grace-s 1800"
    for rule in next-workday semi-weekly; do
      for intr in no yes; do
        opts="--strategy shift"
        [[ $intr == yes ]] && opts="--strategy interrupt --interruptible"
        echo "II_${r}_${rule}_${intr}_0|$ml --carbon-csv $tmp/$r.csv $common $opts --deadline-rule $rule --deadline-grace-s 1800"
        for e in 5 10; do
          echo "II_${r}_${rule}_${intr}_${e}|$ml --carbon-csv $tmp/$r.csv $common $opts --deadline-rule $rule --deadline-grace-s 1800 --forecast-error $e $seeds"
        done
      done
    done
  done
} > "$tmp/runs.txt"
mkdir -p "$tmp/out"
export gt tmp
# shellcheck disable=SC2016
tr '\n' '\0' < "$tmp/runs.txt" | xargs -0 -P "$par" -I{} sh -c '
  line="$1"; key=${line%%|*}; args=${line#*|}
  "$gt" schedule $args > "$tmp/out/$key.txt" 2>&1 || { echo "run $key failed:"; cat "$tmp/out/$key.txt"; exit 255; }' _ {}
runs=$(wc -l < "$tmp/runs.txt")
# Per plan (KEY_SEED): its total gCO2e and its planning time.
for f in "$tmp"/out/*.txt; do
  k=$(basename "$f" .txt)
  awk -v k="$k" '/^total:/ { for (i = 1; i <= NF; ++i) if ($i == "gCO2e") g = $(i - 1) }
                 /^planned in/ { p = $3 }
                 /^seed [0-9]+:/ { s = $2; sub(/:/, "", s); ++n; print k "_" s, $3, $(NF - 1) }
                 END { if (n == 0) print k "_0", g, p }' "$f"
done > "$tmp/results.txt"
t_end=$(date +%s.%N)

awk -v runs="$runs" -v wall="$(awk -v a="$t_start" -v b="$t_end" 'BEGIN { printf "%.1f", b - a }')" \
    -v par="$par" -F'[ ,]' '
  FNR == NR {  # results.txt: key g planning_s
    split($1, k, "_"); g[$1] = $2; plan[$1] = $3; next
  }
  FNR == 1 { next }
  {  # published_results.csv (no commas inside its first columns up to FR)
    line = $0; n = split(line, f, ",")
    if (f[2] != "savings_pct") next
    if (f[1] == "I") {
      e = (f[3] ~ /^0pct/) ? 0 : 5
      w = f[4]; sub(/^\+-/, "", w); sub(/h$/, "", w)
      pub["I", e, w, "DE"] = f[5]; pub["I", e, w, "GB"] = f[6]; pub["I", e, w, "FR"] = f[7]
    } else {
      split(f[3], c, " "); rule = c[1]; gsub(/_/, "-", rule)
      intr = (c[2] == "interruptible") ? "yes" : "no"
      e = f[4]; sub(/%.*/, "", e)
      pub["II", rule, intr, e, "DE"] = f[5]; pub["II", rule, intr, e, "GB"] = f[6]
      pub["II", rule, intr, e, "FR"] = f[7]
      note["II", rule, intr, e] = (f[4] ~ /derived/) ? "d" : (f[4] ~ /reproduced/) ? "r" : ""
    }
  }
  function mean_g(prefix, e,   s, n, i) {
    if (e == 0) return g[prefix "_0_0"]
    s = 0; n = 0
    for (i = 0; i <= 9; ++i) { s += g[prefix "_" e "_" i]; ++n }
    return s / n
  }
  function plan_ms(prefix, e,   s, i) {
    if (e == 0) return 1000 * plan[prefix "_0_0"]
    s = 0
    for (i = 0; i <= 9; ++i) s += plan[prefix "_" e "_" i]
    return 1000 * s / 10
  }
  function cell(mine, theirs) {
    if (theirs == "") return sprintf(" %6.2f %6s %5s", mine, "-", "-")
    d = mine - theirs; if (d < 0 && -d > worst || d >= 0 && d > worst) worst = (d < 0 ? -d : d)
    return sprintf(" %6.2f %6.2f %+5.2f", mine, theirs, d)
  }
  END {
    worst = 0
    print "Scenario I (nightly job at 01:00, +-w h window): saving % (greentrain, published, difference pp)"
    printf "%-10s %-5s", "window", "error"
    for (r = 1; r <= 3; ++r) printf " |%-20s", " " substr("DEGBFR", 2 * r - 1, 2) "  gt    paper  diff"
    printf " | plan ms (DE/GB/FR, per run)\n"
    for (e = 0; e <= 5; e += 5)
      for (w2 = 0; w2 <= 16; ++w2) {
        w = sprintf("%.1f", w2 / 2)
        printf "+-%-8s %-5s", w "h", e "%"
        split("DE GB FR", R, " "); ms = ""
        for (r = 1; r <= 3; ++r) {
          base = g["I_" R[r] "_0.0_0_0"]
          mine = 100 * (1 - mean_g("I_" R[r] "_" w, e) / base)
          printf " |%s", cell(mine, pub["I", e, w, R[r]])
          ms = ms sprintf("%s%.1f", r > 1 ? "/" : "", plan_ms("I_" R[r] "_" w, e))
        }
        printf " | %s\n", ms
      }
    print ""
    print "Scenario II (3,387 ad-hoc jobs): saving % vs the simulator baseline (d: published value derived from the notebook; r: reproduced, not published)"
    printf "%-13s %-6s %-5s", "deadline", "interr", "error"
    for (r = 1; r <= 3; ++r) printf " |%-20s", " " substr("DEGBFR", 2 * r - 1, 2) "  gt    paper  diff"
    printf " | plan ms (DE/GB/FR, per run)\n"
    split("next-workday semi-weekly", RU, " "); split("no yes", IN, " ")
    for (a = 1; a <= 2; ++a) for (b = 1; b <= 2; ++b) for (ei = 0; ei <= 2; ++ei) {
      e = 5 * ei
      printf "%-13s %-6s %-5s", RU[a], IN[b], e "%" note["II", RU[a], IN[b], e]
      split("DE GB FR", R, " "); ms = ""
      for (r = 1; r <= 3; ++r) {
        p = "II_" R[r] "_" RU[a] "_" IN[b]
        mine = 100 * (1 - mean_g(p, e) / g["II_" R[r] "_base_0"])
        printf " |%s", cell(mine, pub["II", RU[a], IN[b], e, R[r]])
        ms = ms sprintf("%s%.1f", r > 1 ? "/" : "", plan_ms(p, e))
      }
      printf " | %s\n", ms
    }
    printf "\nlargest |difference|: %.2f percentage points; %d greentrain runs (816 plans) in %s s wall (%d in parallel)\n", worst, runs, wall, par
  }' "$tmp/results.txt" "$data/published_results.csv"
