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
static int energy_ok[GT_MAX_GPUS];
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
    if (gt_daemon_set_gpu_limit(dm, gpu_index[i], opt_limit_w, &set_w, &prev_w, why, sizeof why)) {
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
      limit_set[i] = 1;
      slurm_info("greentrain: GPU %u power limit %u W (was %u W)", gpu_index[i], want / 1000,
                 saved_mw[i] / 1000);
    } else {
      slurm_error("greentrain: GPU %u: setting the power limit to %u W failed (NVML error %d%s)",
                  gpu_index[i], want / 1000, rc, rc == 4 ? ": slurmstepd must run as root" : "");
    }
  }
  return 0;
}

/* The step's GPU energy through the daemon (J); limits released; *attr_j: the energy
 * attributed to the step's processes, or -1 when unknown. */
static double finish_with_daemon(int* counted, double* attr_j) {
  char why[512];
  double e = 0, j;
  int i, fresh;
  for (i = 0; i < n_gpus; ++i)
    if (limit_set[i] && gt_daemon_release_gpu_limit(dm, gpu_index[i], why, sizeof why) != 0)
      slurm_error("greentrain: GPU %u: the daemon could not restore the power limit: %s",
                  gpu_index[i], why);
  fresh = gt_daemon_refresh(dm, why, sizeof why) == 0;
  for (i = 0; fresh && i < n_gpus; ++i)
    if (energy_ok[i] && gt_daemon_gpu_energy_j(dm, gpu_index[i], &j) == 0 && j >= start_j[i]) {
      e += j - start_j[i];
      ++*counted;
    }
  *attr_j = -1;
  if (attr_ok && gt_daemon_attributed_j(dm, &j, why, sizeof why) == 0) *attr_j = j - start_attr_j;
  gt_daemon_close(dm);
  dm = NULL;
  return e;
}

int slurm_spank_exit(spank_t sp, int ac, char** av) {
  uint32_t job = 0, step = 0;
  double energy_j = 0, secs, attr_j = -1;
  int i, counted = 0;
  const int via_daemon = dm != NULL;
  char attr_text[64] = "null";
  (void)ac;
  (void)av;
  if (!active || !spank_remote(sp)) return 0;
  active = 0;
  secs = now_s() - start_s;
  if (via_daemon) {
    energy_j = finish_with_daemon(&counted, &attr_j);
  } else {
    for (i = 0; i < n_gpus; ++i)
      if (limit_set[i] && nv.set_limit(gpu[i], saved_mw[i]) != 0)
        slurm_error("greentrain: GPU %u: could not restore the power limit to %u W", gpu_index[i],
                    saved_mw[i] / 1000);
    for (i = 0; i < n_gpus; ++i) {
      unsigned long long mj = 0;
      if (energy_ok[i] && nv.energy(gpu[i], &mj) == 0 && mj >= start_mj[i]) {
        energy_j += (double)(mj - start_mj[i]) * 1e-3;
        ++counted;
      }
    }
  }
  if (attr_j >= 0) snprintf(attr_text, sizeof attr_text, "%.3f", attr_j);
  spank_get_item(sp, S_JOB_ID, &job);
  spank_get_item(sp, S_JOB_STEPID, &step);
  slurm_info(
      "greentrain: job %u step %u: GPU energy %.1f J over %.1f s on %d GPU(s), power "
      "limit %d W",
      job, step, energy_j, secs, counted, opt_limit_w);
  if (energy_dir[0]) {
    char path[1200];
    FILE* f;
    snprintf(path, sizeof path, "%s/greentrain-gpu-energy.jsonl", energy_dir);
    f = fopen(path, "a");
    if (f) {
      fprintf(f,
              "{\"job_id\": %u, \"step_id\": %u, \"gpus\": %d, \"energy_j\": %.3f, "
              "\"duration_s\": %.3f, \"power_limit_w\": %d, \"source\": \"%s\", "
              "\"attributed_energy_j\": %s}\n",
              job, step, counted, energy_j, secs, opt_limit_w,
              via_daemon ? "greentrain serve" : "nvml", attr_text);
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
