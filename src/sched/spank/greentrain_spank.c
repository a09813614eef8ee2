/* greentrain_spank.c: a Slurm SPANK plugin that adds `--gpu-power-limit=WATTS` to sbatch,
 * salloc and srun, and records each job step's measured GPU energy, which Slurm's own
 * accounting cannot do for NVIDIA GPUs (its NVML energy plugin reads nothing).
 *
 * In slurmstepd (the "remote" context, running as root before the tasks start) it loads NVML
 * with dlopen ($GT_NVML_LIBRARY, else libnvidia-ml.so.1; no NVML: it does nothing), finds the
 * step's GPUs (SLURM_STEP_GPUS, SLURM_JOB_GPUS or CUDA_VISIBLE_DEVICES as NVML indices; else
 * every GPU), reads their energy counters (mJ) and, when the option was given, saves each
 * GPU's power limit and sets WATTS (clamped to the GPU's allowed range). At the end of the
 * step (slurm_spank_exit, also after the tasks were killed) it restores the saved limits and
 * logs the energy, J, to slurmd's log, and appends a JSON line to
 * <energy_dir>/greentrain-gpu-energy.jsonl when plugstack.conf gives `energy_dir=DIR`:
 *
 *   optional /usr/lib/x86_64-linux-gnu/slurm/greentrain_spank.so energy_dir=/var/log/greentrain
 *
 * The line's fields (docs/serve.md, "The energy record"): job_id, step_id; gpus_expected (the
 * step's GPUs), gpus_counted (those whose energy over the step was read), gpu_indices (their
 * NVML indices); energy_j (J, the step's GPU energy: null unless every GPU of the step was read)
 * and energy_unknown_reason (why it is null; null when known); duration_s; power_limit_requested_w
 * (--gpu-power-limit, null when not given), power_limit_w (W, the limit the GPUs hold after
 * setting, read back from NVML or the daemon; null when not set, not readable, or not the same
 * on every GPU) and gpu_power_limits_w (each GPU's, in gpu_indices' order); source ("nvml" or
 * "greentrain serve"); attributed_energy_j (through the daemon, else null).
 *
 * Nested steps (srun inside a batch script) are recorded each on their own, so the batch
 * step's energy includes theirs.
 *
 * When the node daemon runs (`greentrain serve`; socket from plugstack.conf's daemon_socket=PATH,
 * else $GT_DAEMON_SOCKET or /run/greentrain/serve.sock), the plugin goes through it instead
 * (daemon_link.h): the GPUs' energy is the daemon's readings (one reader per node, however many
 * jobs share it), the line also gets the GPU energy attributed to the step's own processes
 * ("attributed_energy_j", by NVML per-process utilization), and the limit is a lease the daemon
 * restores when the step ends, even if slurmstepd is killed with SIGKILL. The limit is asked on
 * behalf of the job's user (S_JOB_UID, S_JOB_GID): the daemon's policy ([[allow]] ranges) for
 * that user applies, not root's; a user no rule grants gets no limit. Without a daemon the
 * plugin sets the limit itself, as root, within the GPU's own range (no policy). Without a daemon,
 * a slurmstepd killed with SIGKILL leaves the limit set (nothing can catch SIGKILL); the next step
 * with the option sets its own. */
#include <dlfcn.h>
#include <errno.h>
#include <slurm/spank.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "daemon_link.h"

SPANK_PLUGIN(greentrain, 1);

#define GT_MAX_GPUS 64

typedef int (*nvml_void_f)(void);
typedef int (*nvml_count_f)(unsigned*);
typedef int (*nvml_handle_f)(unsigned, void**);
typedef int (*nvml_uint_f)(void*, unsigned*);
typedef int (*nvml_pair_f)(void*, unsigned*, unsigned*);
typedef int (*nvml_set_f)(void*, unsigned);
typedef int (*nvml_energy_f)(void*, unsigned long long*);

static struct {
  void* lib;
  nvml_void_f init, shutdown;
  nvml_count_f count;
  nvml_handle_f handle;
  nvml_uint_f get_limit;
  nvml_pair_f constraints;
  nvml_set_f set_limit;
  nvml_energy_f energy;
} nv;

static int opt_limit_w = 0;        /* --gpu-power-limit, W (0: not given) */
static char energy_dir[1024] = ""; /* plugstack.conf energy_dir= */
static int n_gpus = 0;
static unsigned gpu_index[GT_MAX_GPUS];
static void* gpu[GT_MAX_GPUS];
static unsigned saved_mw[GT_MAX_GPUS];
static int limit_set[GT_MAX_GPUS];
static unsigned long long start_mj[GT_MAX_GPUS];
static int energy_ok[GT_MAX_GPUS];    /* its counter was read at the start */
static int counted_ok[GT_MAX_GPUS];   /* its energy over the step was read */
static double applied_w[GT_MAX_GPUS]; /* its limit read back after setting, W (-1: not known) */
static char unknown_why[512];         /* why the step's energy is unknown ("" : known) */
static double start_s = 0;
static int active = 0;
static char daemon_socket[1024] = ""; /* plugstack.conf daemon_socket= */
static gt_daemon* dm = NULL;          /* the node daemon, when one answers */
static double start_j[GT_MAX_GPUS];   /* its cumulative GPU energy at the start (J) */
static double start_attr_j = 0;       /* energy attributed to the step's processes (J) */
static int attr_ok = 0;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int opt_cb(int val, const char* arg, int remote) {
  char* end = NULL;
  long w;
  (void)val;
  (void)remote;
  errno = 0;
  w = arg ? strtol(arg, &end, 10) : 0;
  if (!arg || errno || end == arg || *end != '\0' || w < 1 || w > 100000) {
    slurm_error("greentrain: --gpu-power-limit=%s is not valid; expected whole watts, e.g. 250",
                arg ? arg : "");
    return -1;
  }
  opt_limit_w = (int)w;
  return 0;
}

static struct spank_option gpu_power_limit_option = {
    "gpu-power-limit",
    "WATTS",
    "Cap each GPU of the job at WATTS during each step, restored after it (greentrain)",
    1,
    0,
    opt_cb};

static int load_nvml(void) {
  const char* path = getenv("GT_NVML_LIBRARY");
  if (!path || !*path) path = "libnvidia-ml.so.1";
  nv.lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!nv.lib) {
    slurm_debug("greentrain: no NVML (%s): GPU energy not recorded", dlerror());
    return -1;
  }
  nv.init = (nvml_void_f)dlsym(nv.lib, "nvmlInit_v2");
  nv.shutdown = (nvml_void_f)dlsym(nv.lib, "nvmlShutdown");
  nv.count = (nvml_count_f)dlsym(nv.lib, "nvmlDeviceGetCount_v2");
  nv.handle = (nvml_handle_f)dlsym(nv.lib, "nvmlDeviceGetHandleByIndex_v2");
  nv.get_limit = (nvml_uint_f)dlsym(nv.lib, "nvmlDeviceGetPowerManagementLimit");
  nv.constraints = (nvml_pair_f)dlsym(nv.lib, "nvmlDeviceGetPowerManagementLimitConstraints");
  nv.set_limit = (nvml_set_f)dlsym(nv.lib, "nvmlDeviceSetPowerManagementLimit");
  nv.energy = (nvml_energy_f)dlsym(nv.lib, "nvmlDeviceGetTotalEnergyConsumption");
  if (!nv.init || !nv.shutdown || !nv.count || !nv.handle || !nv.energy || nv.init() != 0) {
    slurm_error("greentrain: %s lacks NVML functions or nvmlInit_v2 failed", path);
    dlclose(nv.lib);
    nv.lib = NULL;
    return -1;
  }
  return 0;
}

/* The step's GPUs as NVML indices among `total`: a comma list of integers, or every GPU. */
static void find_gpus(spank_t sp, unsigned total) {
  static const char* vars[] = {"SLURM_STEP_GPUS", "SLURM_JOB_GPUS", "CUDA_VISIBLE_DEVICES"};
  char buf[1024];
  unsigned i;
  int v, have_list = 0;
  n_gpus = 0;
  for (v = 0; v < 3 && !have_list; ++v) {
    char *p, *save = NULL;
    if (spank_getenv(sp, vars[v], buf, sizeof buf) != ESPANK_SUCCESS || !buf[0]) continue;
    have_list = 1;
    for (p = strtok_r(buf, ",", &save); p && n_gpus < GT_MAX_GPUS; p = strtok_r(NULL, ",", &save)) {
      char* end = NULL;
      long k = strtol(p, &end, 10);
      if (end == p || *end || k < 0 || (unsigned)k >= total) {
        slurm_error("greentrain: %s entry '%s' is not an NVML index; GPU energy not recorded",
                    vars[v], p);
        n_gpus = 0;
        return;
      }
      gpu_index[n_gpus++] = (unsigned)k;
    }
  }
  if (!have_list)
    for (i = 0; i < total && n_gpus < GT_MAX_GPUS; ++i) gpu_index[n_gpus++] = i;
}

int slurm_spank_init(spank_t sp, int ac, char** av) {
  int i;
  opt_limit_w = 0; /* the option's callback, after this, sets it for this step */
  for (i = 0; i < ac; ++i)
    if (strncmp(av[i], "energy_dir=", 11) == 0)
      snprintf(energy_dir, sizeof energy_dir, "%s", av[i] + 11);
    else if (strncmp(av[i], "daemon_socket=", 14) == 0)
      snprintf(daemon_socket, sizeof daemon_socket, "%s", av[i] + 14);
  if (spank_option_register(sp, &gpu_power_limit_option) != ESPANK_SUCCESS)
    slurm_error("greentrain: cannot register --gpu-power-limit");
  return 0;
}

/* The daemon's start of the step: its GPUs, their energy, the limit as a lease. */
static void start_with_daemon(spank_t sp) {
  char why[512];
  unsigned total = 0;
  double j, set_w, prev_w;
  int i;
  uid_t job_uid = 0;
  gid_t job_gid = 0;
  if (gt_daemon_refresh(dm, why, sizeof why) != 0) {
    slurm_error("greentrain: the daemon did not answer (%s); GPU energy not recorded", why);
    return;
  }
  while (total < GT_MAX_GPUS && gt_daemon_gpu_energy_j(dm, total, &j) == 0) ++total;
  find_gpus(sp, total);
  for (i = 0; i < n_gpus; ++i) {
    limit_set[i] = 0;
    applied_w[i] = -1;
    energy_ok[i] = gt_daemon_gpu_energy_j(dm, gpu_index[i], &start_j[i]) == 0;
  }
  attr_ok = gt_daemon_attributed_j(dm, &start_attr_j, why, sizeof why) == 0;
  start_s = now_s();
  active = 1;
  if (opt_limit_w <= 0) return;
  /* slurmstepd is root: the daemon would grant the device's whole range. The request is the job
   * user's, so the daemon applies that user's rules (its policy's [[allow]] ranges). */
  if (spank_get_item(sp, S_JOB_UID, &job_uid) != ESPANK_SUCCESS ||
      spank_get_item(sp, S_JOB_GID, &job_gid) != ESPANK_SUCCESS) {
    slurm_error(
        "greentrain: cannot learn the job's user (S_JOB_UID, S_JOB_GID): --gpu-power-limit not "
        "applied (the daemon's policy is judged for the job's user)");
    return;
  }
  gt_daemon_on_behalf_of(dm, (unsigned)job_uid, (unsigned)job_gid);
  for (i = 0; i < n_gpus; ++i) {
    if (gt_daemon_set_gpu_limit(dm, gpu_index[i], opt_limit_w, &set_w, &prev_w, &applied_w[i], why,
                                sizeof why)) {
      slurm_error(
          "greentrain: GPU %u: setting the power limit to %d W through the daemon failed: %s",
          gpu_index[i], opt_limit_w, why);
      continue;
    }
    limit_set[i] = 1;
    slurm_info(
        "greentrain: GPU %u power limit %.0f W (was %.0f W), leased from greentrain serve for "
        "uid %u",
        gpu_index[i], set_w, prev_w, (unsigned)job_uid);
  }
}

int slurm_spank_init_post_opt(spank_t sp, int ac, char** av) {
  int i;
  unsigned total = 0;
  char why[512];
  (void)ac;
  (void)av;
  if (!spank_remote(sp)) return 0;
  dm = gt_daemon_open(daemon_socket, why, sizeof why);
  if (dm) {
    start_with_daemon(sp);
    return 0;
  }
  slurm_debug("greentrain: no node daemon (%s): reading NVML directly", why);
  if (load_nvml() != 0) return 0;
  if (nv.count(&total) != 0) return 0;
  find_gpus(sp, total);
  for (i = 0; i < n_gpus; ++i) {
    limit_set[i] = 0;
    applied_w[i] = -1;
    energy_ok[i] = 0;
    if (nv.handle(gpu_index[i], &gpu[i]) != 0) {
      gpu[i] = NULL;
      continue;
    }
    energy_ok[i] = nv.energy(gpu[i], &start_mj[i]) == 0;
  }
  start_s = now_s();
  active = 1;
  if (opt_limit_w <= 0) return 0;
  if (!nv.get_limit || !nv.constraints || !nv.set_limit) {
    slurm_error("greentrain: NVML lacks the power-limit functions; --gpu-power-limit ignored");
    return 0;
  }
  for (i = 0; i < n_gpus; ++i) {
    unsigned lo = 0, hi = 0, want = (unsigned)opt_limit_w * 1000u;
    int rc;
    if (!gpu[i] || nv.get_limit(gpu[i], &saved_mw[i]) != 0) continue;
    if (nv.constraints(gpu[i], &lo, &hi) == 0) {
      if (want < lo) want = lo;
      if (want > hi) want = hi;
    }
    rc = nv.set_limit(gpu[i], want);
    if (rc == 0) {
      unsigned got = 0;
      limit_set[i] = 1;
      /* what the GPU holds now (the driver may round): the record's power_limit_w */
      applied_w[i] = nv.get_limit(gpu[i], &got) == 0 ? (double)got / 1000.0 : -1;
      slurm_info("greentrain: GPU %u power limit %u W (was %u W)", gpu_index[i], want / 1000,
                 saved_mw[i] / 1000);
    } else {
      slurm_error("greentrain: GPU %u: setting the power limit to %u W failed (NVML error %d%s)",
                  gpu_index[i], want / 1000, rc, rc == 4 ? ": slurmstepd must run as root" : "");
    }
  }
  return 0;
}

/* The step's GPU energy through the daemon (J): the sum over the GPUs it read (counted_ok[i]);
 * unknown_why says why when the final reading failed. Limits released; *attr_j: the energy
 * attributed to the step's processes, or -1 when unknown. */
static double finish_with_daemon(double* attr_j) {
  char why[512];
  double e = 0, j;
  int i, fresh;
  for (i = 0; i < n_gpus; ++i)
    if (limit_set[i] && gt_daemon_release_gpu_limit(dm, gpu_index[i], why, sizeof why) != 0)
      slurm_error("greentrain: GPU %u: the daemon could not restore the power limit: %s",
                  gpu_index[i], why);
  fresh = gt_daemon_refresh(dm, why, sizeof why) == 0;
  if (!fresh)
    snprintf(unknown_why, sizeof unknown_why,
             "the daemon's reading at the end of the step failed: %s", why);
  for (i = 0; i < n_gpus; ++i) {
    counted_ok[i] = fresh && energy_ok[i] && gt_daemon_gpu_energy_j(dm, gpu_index[i], &j) == 0 &&
                    j >= start_j[i];
    if (counted_ok[i]) e += j - start_j[i];
  }
  *attr_j = -1;
  if (attr_ok && gt_daemon_attributed_j(dm, &j, why, sizeof why) == 0) *attr_j = j - start_attr_j;
  gt_daemon_close(dm);
  dm = NULL;
  return e;
}

/* Appends printf-formatted text to buf[0..n) (cut at its end). */
static void append(char* buf, size_t n, const char* fmt, ...) {
  size_t len = strlen(buf);
  va_list ap;
  if (len + 1 >= n) return;
  va_start(ap, fmt);
  vsnprintf(buf + len, n - len, fmt, ap);
  va_end(ap);
}

/* Appends `text` as a JSON string ("..." with ", \ and control characters escaped). */
static void append_json_string(char* buf, size_t n, const char* text) {
  const unsigned char* p;
  append(buf, n, "\"");
  for (p = (const unsigned char*)text; *p; ++p) {
    if (*p == '"' || *p == '\\')
      append(buf, n, "\\%c", *p);
    else if (*p < 0x20)
      append(buf, n, "\\u%04x", *p);
    else
      append(buf, n, "%c", *p);
  }
  append(buf, n, "\"");
}

/* Why the step's energy is unknown when the counted GPUs are not all of them ("" : known). */
static void explain_unknown(int counted) {
  int i;
  if (unknown_why[0]) return;
  if (n_gpus == 0) {
    snprintf(unknown_why, sizeof unknown_why,
             "no GPU of the step was found (NVML lists none, or SLURM_STEP_GPUS, SLURM_JOB_GPUS "
             "or CUDA_VISIBLE_DEVICES names no NVML index; see slurmd's log)");
    return;
  }
  if (counted == n_gpus) return;
  snprintf(unknown_why, sizeof unknown_why, "%d of the step's %d GPU(s) could not be read (GPU",
           n_gpus - counted, n_gpus);
  for (i = 0; i < n_gpus; ++i)
    if (!counted_ok[i]) append(unknown_why, sizeof unknown_why, " %u", gpu_index[i]);
  append(unknown_why, sizeof unknown_why,
         ": its energy counter at the start or the end of the step); the others' sum is not the "
         "step's energy");
}

int slurm_spank_exit(spank_t sp, int ac, char** av) {
  uint32_t job = 0, step = 0;
  double energy_j = 0, secs, attr_j = -1, common_w = -1;
  int i, counted = 0, limits_agree;
  const int via_daemon = dm != NULL;
  char energy_text[64] = "null", attr_text[64] = "null", limit_text[64] = "null";
  char requested_text[32] = "null";
  (void)ac;
  (void)av;
  if (!active || !spank_remote(sp)) return 0;
  active = 0;
  unknown_why[0] = '\0';
  secs = now_s() - start_s;
  if (via_daemon) {
    energy_j = finish_with_daemon(&attr_j);
  } else {
    for (i = 0; i < n_gpus; ++i)
      if (limit_set[i] && nv.set_limit(gpu[i], saved_mw[i]) != 0)
        slurm_error("greentrain: GPU %u: could not restore the power limit to %u W", gpu_index[i],
                    saved_mw[i] / 1000);
    for (i = 0; i < n_gpus; ++i) {
      unsigned long long mj = 0;
      counted_ok[i] = energy_ok[i] && nv.energy(gpu[i], &mj) == 0 && mj >= start_mj[i];
      if (counted_ok[i]) energy_j += (double)(mj - start_mj[i]) * 1e-3;
    }
  }
  for (i = 0; i < n_gpus; ++i) counted += counted_ok[i];
  /* unknown is null with a reason, never 0 nor the sum of some of the GPUs */
  explain_unknown(counted);
  if (!unknown_why[0]) snprintf(energy_text, sizeof energy_text, "%.3f", energy_j);
  if (attr_j >= 0) snprintf(attr_text, sizeof attr_text, "%.3f", attr_j);
  if (opt_limit_w > 0) snprintf(requested_text, sizeof requested_text, "%d", opt_limit_w);
  /* power_limit_w: the limit every GPU of the step holds after setting, read back */
  limits_agree = opt_limit_w > 0 && n_gpus > 0;
  for (i = 0; i < n_gpus && limits_agree; ++i) {
    if (!limit_set[i] || applied_w[i] < 0 || (common_w >= 0 && applied_w[i] != common_w))
      limits_agree = 0;
    common_w = applied_w[i];
  }
  if (limits_agree) snprintf(limit_text, sizeof limit_text, "%.6g", common_w);
  spank_get_item(sp, S_JOB_ID, &job);
  spank_get_item(sp, S_JOB_STEPID, &step);
  if (unknown_why[0])
    slurm_info(
        "greentrain: job %u step %u: GPU energy unknown (%s) over %.1f s, power limit %s W "
        "(asked %s W)",
        job, step, unknown_why, secs, limit_text, requested_text);
  else
    slurm_info(
        "greentrain: job %u step %u: GPU energy %.1f J over %.1f s on %d GPU(s), power limit %s W "
        "(asked %s W)",
        job, step, energy_j, secs, counted, limit_text, requested_text);
  if (energy_dir[0]) {
    char path[1200], line[8192];
    FILE* f;
    line[0] = '\0';
    append(line, sizeof line,
           "{\"job_id\": %u, \"step_id\": %u, \"gpus_expected\": %d, \"gpus_counted\": %d, "
           "\"gpu_indices\": [",
           job, step, n_gpus, counted);
    for (i = 0; i < n_gpus; ++i) append(line, sizeof line, "%s%u", i ? ", " : "", gpu_index[i]);
    append(line, sizeof line, "], \"energy_j\": %s, \"energy_unknown_reason\": ", energy_text);
    if (unknown_why[0])
      append_json_string(line, sizeof line, unknown_why);
    else
      append(line, sizeof line, "null");
    append(line, sizeof line,
           ", \"duration_s\": %.3f, \"power_limit_requested_w\": %s, \"power_limit_w\": %s, "
           "\"gpu_power_limits_w\": [",
           secs, requested_text, limit_text);
    for (i = 0; i < n_gpus; ++i) {
      if (limit_set[i] && applied_w[i] >= 0)
        append(line, sizeof line, "%s%.6g", i ? ", " : "", applied_w[i]);
      else
        append(line, sizeof line, "%snull", i ? ", " : "");
    }
    append(line, sizeof line, "], \"source\": \"%s\", \"attributed_energy_j\": %s}\n",
           via_daemon ? "greentrain serve" : "nvml", attr_text);
    snprintf(path, sizeof path, "%s/greentrain-gpu-energy.jsonl", energy_dir);
    f = fopen(path, "a");
    if (f) {
      fputs(line, f);
      fclose(f);
    } else {
      slurm_error("greentrain: cannot append to %s: %s", path, strerror(errno));
    }
  }
  if (!via_daemon) {
    nv.shutdown();
    dlclose(nv.lib);
    nv.lib = NULL;
  }
  return 0;
}
