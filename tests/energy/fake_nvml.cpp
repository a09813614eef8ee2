/* tests/energy/fake_nvml.cpp: a stand-in for libnvidia-ml.so.1, loaded by greentrain through
 * GT_NVML_LIBRARY=<path to libfake_nvml.so>. It implements the NVML functions greentrain calls
 * (energy/nvml.h) with behaviour scripted by environment variables, read at every call so a test
 * can change them between reads. No real GPU is touched.
 *
 *   FAKE_NVML_INIT_RC=N         nvmlInit_v2 returns N (e.g. 9 = NVML_ERROR_DRIVER_NOT_LOADED)
 *   FAKE_NVML_DEVICES=N         number of GPUs (default 1, at most 16)
 *   FAKE_NVML_UUIDS=a,b,...     their UUIDs (default GPU-00000000-0000-0000-0000-00000000000<i>)
 *   FAKE_NVML_MIG=uuid@i[/g/c/s],...  MIG devices: the index of their GPU, and optionally their
 *                               GPU instance id g, compute instance id c and compute slices s
 *                               (defaults: g = the MIG device's order, c = 0, s = 1). A GPU
 *                               with MIG devices is in MIG mode: nvmlDeviceGetMigMode says so and
 *                               nvmlDeviceGetProcessUtilization answers NOT_SUPPORTED (3), as
 *                               NVML does on MIG-enabled GPUs
 *   FAKE_NVML_PROCS_FILE=path   nvmlDeviceGetComputeRunningProcesses_v2/_v3: lines "<uuid> <pid>"
 *                               put a process on the GPU or MIG device of that UUID (read afresh
 *                               each call); a GPU's list includes its MIG devices' processes
 *   FAKE_NVML_NO_ENERGY=all|i,j nvmlDeviceGetTotalEnergyConsumption -> NOT_SUPPORTED (3)
 *   FAKE_NVML_NO_POWER=all|i,j  nvmlDeviceGetPowerUsage -> NOT_SUPPORTED (3)
 *   FAKE_NVML_POWER_MW=p0,p1    power per GPU in mW (default 100000); the energy counter
 *                               integrates it over real time since nvmlInit_v2
 *   FAKE_NVML_ENERGY_FILE=path  if set, the energy counter (mJ) of GPU i is line i of this file
 *                               (write it to script wraps or a counter that goes backwards)
 *   FAKE_NVML_LIMIT_MW=N        initial power limit (default 300000 mW)
 *   FAKE_NVML_MIN_LIMIT_MW=N    constraint min (default 100000), FAKE_NVML_MAX_LIMIT_MW=N (400000)
 *   FAKE_NVML_SET_RC=N          nvmlDeviceSetPowerManagementLimit returns N (e.g. 4 =
 * NO_PERMISSION) FAKE_NVML_SET_LOG=path      every SetPowerManagementLimit call appends "<index>
 * <mW> <rc>\n" FAKE_NVML_LIMIT_FILE=path   current limits persist here (one mW per line) so several
 *                               processes see the same limits, as with a real driver
 *   FAKE_NVML_DRAW_MW=N         simulated workload: it would draw N mW uncapped; the reported
 *                               power is min(limit, N) (FAKE_NVML_POWER_MW is then ignored), and
 *                               fake_nvml_speed_factor(i) = min(1,
 * limit/N)^FAKE_NVML_SPEED_EXPONENT (default exponent 0.5) is the throughput relative to uncapped.
 * Limits out of [min, max] return NVML_ERROR_INVALID_ARGUMENT (2).
 *   FAKE_NVML_PROC_UTIL_FILE=path  nvmlDeviceGetProcessUtilization: lines "<gpu index> <pid>
 *                               <smUtil %>" give each process's utilization at every call (read
 *                               afresh each call; a GPU with no line answers NOT_FOUND, NVML's
 *                               "no sample since lastSeenTimeStamp")
 *   FAKE_NVML_PROC_UTIL_RC=N    nvmlDeviceGetProcessUtilization returns N (e.g. 3 = NOT_SUPPORTED)
 */
#include <pthread.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

extern "C" {

#define MAXD 16
typedef struct fake_dev {
  int index;
  int mig;                 /* 1: a MIG device */
  int parent;              /* GPU index of a MIG device */
  unsigned gi, ci, slices; /* a MIG device's GPU and compute instance ids, compute slices */
  char uuid[96];
} fake_dev;
typedef fake_dev* nvmlDevice_t;

static fake_dev gpus[MAXD], migs[MAXD];
static int n_migs = 0;
static double energy_mj[MAXD], last_t[MAXD];
static unsigned limit_mw[MAXD];
static int inited = 0;
/* greentrain's sampling thread reads power while another thread sets a limit: every function
 * that touches the limits or the energy counters holds this lock, so a read of the limit file
 * cannot land between a set's new limit and its save (which once saved the stale limit). */
static pthread_mutex_t mu = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
struct fake_lock {
  fake_lock() { pthread_mutex_lock(&mu); }
  ~fake_lock() { pthread_mutex_unlock(&mu); }
};
#define FAKE_LOCK fake_lock fake_lock_
/* A fork while the sampling thread holds the lock would leave it held forever in the child
 * (tests fork children that exit through greentrain's finalizers): fork takes it first, and the
 * child starts a fresh one (its thread id is not the owner's, so it cannot unlock the old). */
__attribute__((constructor)) static void fake_register_atfork(void) {
  pthread_atfork([] { pthread_mutex_lock(&mu); }, [] { pthread_mutex_unlock(&mu); },
                 [] { mu = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP; });
}

static const char* env(const char* k) { return getenv(k); }
static long env_long(const char* k, long d) {
  const char* v = env(k);
  return v && *v ? strtol(v, NULL, 10) : d;
}
static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}
static int n_devices(void) {
  long n = env_long("FAKE_NVML_DEVICES", 1);
  return n < 0 ? 0 : (n > MAXD ? MAXD : (int)n);
}
/* 1 if index i is in the comma list (or the list is "all"). */
static int in_list(const char* k, int i) {
  const char* v = env(k);
  if (!v || !*v) return 0;
  if (!strcmp(v, "all")) return 1;
  char buf[256];
  snprintf(buf, sizeof buf, "%s", v);
  for (char *sp = NULL, *t = strtok_r(buf, ",", &sp); t; t = strtok_r(NULL, ",", &sp))
    if (atoi(t) == i) return 1;
  return 0;
}
/* The i-th comma field of env k as long, or d. */
static long field_long(const char* k, int i, long d) {
  const char* v = env(k);
  if (!v || !*v) return d;
  char buf[512];
  snprintf(buf, sizeof buf, "%s", v);
  int j = 0;
  long last = d;
  for (char *sp = NULL, *t = strtok_r(buf, ",", &sp); t; t = strtok_r(NULL, ",", &sp), ++j) {
    last = strtol(t, NULL, 10);
    if (j == i) return last;
  }
  return last; /* fewer fields than GPUs: the last one applies to the rest */
}
static void load_limits(void) {
  const char* p = env("FAKE_NVML_LIMIT_FILE");
  FILE* f = p && *p ? fopen(p, "r") : NULL;
  if (!f) return;
  for (int i = 0; i < MAXD && fscanf(f, "%u", &limit_mw[i]) == 1; ++i) {
  }
  fclose(f);
}
/* Written to a temporary name and renamed, so another process never reads a truncated file. */
static void save_limits(void) {
  const char* p = env("FAKE_NVML_LIMIT_FILE");
  if (!p || !*p) return;
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s.tmp.%ld", p, (long)getpid());
  FILE* f = fopen(tmp, "w");
  if (!f) return;
  for (int i = 0; i < n_devices(); ++i) fprintf(f, "%u\n", limit_mw[i]);
  if (fclose(f) == 0) rename(tmp, p);
}
static unsigned power_of(int i) {
  FAKE_LOCK;
  load_limits();
  long draw = env_long("FAKE_NVML_DRAW_MW", -1);
  if (draw >= 0) return (unsigned)(draw < (long)limit_mw[i] ? draw : (long)limit_mw[i]);
  return (unsigned)field_long("FAKE_NVML_POWER_MW", i, 100000);
}
static void advance(int i) {
  FAKE_LOCK;
  double t = now_s();
  energy_mj[i] += power_of(i) * (t - last_t[i]); /* mW x s = mJ */
  last_t[i] = t;
}
static fake_dev* gpu_of(nvmlDevice_t d) {
  if (!inited || !d || d->mig || d->index < 0 || d->index >= n_devices()) return NULL;
  return d;
}

/* NVML counts its users: every nvmlInit_v2 needs its nvmlShutdown, and only the last one
 * shuts the library down (NVML API reference, nvmlShutdown: "the NVML library is reference
 * counted"); a second nvmlInit_v2 changes nothing. */
static int users = 0;

int nvmlInit_v2(void) {
  FAKE_LOCK;
  int rc = (int)env_long("FAKE_NVML_INIT_RC", 0);
  if (rc) return rc;
  if (users++ > 0) return 0;
  unsigned lim = (unsigned)env_long("FAKE_NVML_LIMIT_MW", 300000);
  for (int i = 0; i < MAXD; ++i) {
    gpus[i].index = i;
    gpus[i].mig = 0;
    snprintf(gpus[i].uuid, sizeof gpus[i].uuid, "GPU-00000000-0000-0000-0000-%012d", i);
    energy_mj[i] = 0;
    last_t[i] = now_s();
    limit_mw[i] = lim;
  }
  load_limits();
  const char* u = env("FAKE_NVML_UUIDS");
  if (u && *u) {
    char buf[2048];
    snprintf(buf, sizeof buf, "%s", u);
    int i = 0;
    for (char *sp = NULL, *t = strtok_r(buf, ",", &sp); t && i < MAXD;
         t = strtok_r(NULL, ",", &sp), ++i)
      snprintf(gpus[i].uuid, sizeof gpus[i].uuid, "%s", t);
  }
  n_migs = 0;
  const char* m = env("FAKE_NVML_MIG");
  if (m && *m) {
    char buf[2048];
    snprintf(buf, sizeof buf, "%s", m);
    for (char *sp = NULL, *t = strtok_r(buf, ",", &sp); t && n_migs < MAXD;
         t = strtok_r(NULL, ",", &sp)) {
      char* at = strchr(t, '@');
      if (!at) continue;
      *at = 0;
      migs[n_migs].index = n_migs;
      migs[n_migs].mig = 1;
      migs[n_migs].parent = atoi(at + 1);
      migs[n_migs].gi = (unsigned)n_migs;
      migs[n_migs].ci = 0;
      migs[n_migs].slices = 1;
      unsigned g, c, sl;
      if (sscanf(at + 1, "%*d/%u/%u/%u", &g, &c, &sl) == 3) {
        migs[n_migs].gi = g;
        migs[n_migs].ci = c;
        migs[n_migs].slices = sl;
      }
      snprintf(migs[n_migs].uuid, sizeof migs[n_migs].uuid, "%s", t);
      ++n_migs;
    }
  }
  inited = 1;
  return 0;
}
int nvmlShutdown(void) {
  FAKE_LOCK;
  if (users == 0) return 1; /* NVML_ERROR_UNINITIALIZED */
  if (--users == 0) inited = 0;
  return 0;
}
const char* nvmlErrorString(int rc) {
  switch (rc) {
    case 0:
      return "Success";
    case 1:
      return "Uninitialized";
    case 2:
      return "Invalid Argument";
    case 3:
      return "Not Supported";
    case 4:
      return "Insufficient Permissions";
    case 6:
      return "Not Found";
    case 9:
      return "Driver Not Loaded";
    default:
      return "Unknown Error";
  }
}
int nvmlDeviceGetCount_v2(unsigned* n) {
  if (!inited) return 1;
  *n = (unsigned)n_devices();
  return 0;
}
int nvmlDeviceGetHandleByIndex_v2(unsigned i, nvmlDevice_t* d) {
  if (!inited) return 1;
  if ((int)i >= n_devices()) return 2;
  *d = &gpus[i];
  return 0;
}
int nvmlDeviceGetHandleByUUID(const char* uuid, nvmlDevice_t* d) {
  if (!inited) return 1;
  for (int i = 0; i < n_devices(); ++i)
    if (!strcmp(gpus[i].uuid, uuid)) return *d = &gpus[i], 0;
  for (int i = 0; i < n_migs; ++i)
    if (!strcmp(migs[i].uuid, uuid)) return *d = &migs[i], 0;
  return 6;
}
int nvmlDeviceGetUUID(nvmlDevice_t d, char* buf, unsigned len) {
  if (!inited || !d) return 2;
  snprintf(buf, len, "%s", d->uuid);
  return 0;
}
int nvmlDeviceGetName(nvmlDevice_t d, char* buf, unsigned len) {
  if (!inited || !d) return 2;
  snprintf(buf, len, d->mig ? "Fake MIG 1g.10gb" : "Fake GPU %d", d->index);
  return 0;
}
int nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t d, unsigned long long* mj) {
  FAKE_LOCK;
  fake_dev* g = gpu_of(d);
  if (!g) return 2;
  if (in_list("FAKE_NVML_NO_ENERGY", g->index)) return 3;
  const char* p = env("FAKE_NVML_ENERGY_FILE");
  if (p && *p) {
    FILE* f = fopen(p, "r");
    if (!f) return 999; /* NVML_ERROR_UNKNOWN */
    unsigned long long v = 0;
    int ok = 0;
    for (int i = 0; i <= g->index; ++i) ok = fscanf(f, "%llu", &v) == 1;
    fclose(f);
    if (!ok) return 999;
    *mj = v;
    return 0;
  }
  advance(g->index);
  *mj = (unsigned long long)energy_mj[g->index];
  return 0;
}
int nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned* mw) {
  fake_dev* g = gpu_of(d);
  if (!g) return 2;
  if (in_list("FAKE_NVML_NO_POWER", g->index)) return 3;
  *mw = power_of(g->index);
  return 0;
}
int nvmlDeviceGetPowerManagementLimit(nvmlDevice_t d, unsigned* mw) {
  FAKE_LOCK;
  fake_dev* g = gpu_of(d);
  if (!g) return 2;
  load_limits();
  *mw = limit_mw[g->index];
  return 0;
}
int nvmlDeviceGetPowerManagementLimitConstraints(nvmlDevice_t d, unsigned* lo, unsigned* hi) {
  fake_dev* g = gpu_of(d);
  if (!g) return 2;
  *lo = (unsigned)env_long("FAKE_NVML_MIN_LIMIT_MW", 100000);
  *hi = (unsigned)env_long("FAKE_NVML_MAX_LIMIT_MW", 400000);
  return 0;
}
int nvmlDeviceSetPowerManagementLimit(nvmlDevice_t d, unsigned mw) {
  FAKE_LOCK;
  fake_dev* g = gpu_of(d);
  int rc = 0;
  if (!g)
    rc = 2;
  else if ((rc = (int)env_long("FAKE_NVML_SET_RC", 0)) == 0) {
    if (mw < (unsigned)env_long("FAKE_NVML_MIN_LIMIT_MW", 100000) ||
        mw > (unsigned)env_long("FAKE_NVML_MAX_LIMIT_MW", 400000))
      rc = 2;
    else {
      advance(g->index); /* energy so far at the old limit */
      limit_mw[g->index] = mw;
      save_limits();
    }
  }
  const char* p = env("FAKE_NVML_SET_LOG");
  FILE* f = p && *p ? fopen(p, "a") : NULL;
  if (f) {
    fprintf(f, "%d %u %d\n", d ? d->index : -1, mw, rc);
    fclose(f);
  }
  return rc;
}
int nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t mig, nvmlDevice_t* gpu) {
  if (!inited || !mig || !mig->mig) return 2;
  *gpu = &gpus[mig->parent];
  return 0;
}
int nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t d, unsigned* n) {
  fake_dev* g = gpu_of(d);
  if (!g) return 2;
  *n = 0;
  for (int i = 0; i < n_migs; ++i) *n += migs[i].parent == g->index;
  return 0;
}
int nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t d, unsigned k, nvmlDevice_t* mig) {
  fake_dev* g = gpu_of(d);
  if (!g) return 2;
  unsigned j = 0;
  for (int i = 0; i < n_migs; ++i)
    if (migs[i].parent == g->index && j++ == k) return *mig = &migs[i], 0;
  return 6;
}
static int mig_mode_of(int gpu_index) {
  for (int i = 0; i < n_migs; ++i)
    if (migs[i].parent == gpu_index) return 1;
  return 0;
}
int nvmlDeviceGetMigMode(nvmlDevice_t d, unsigned* current, unsigned* pending) {
  fake_dev* g = gpu_of(d);
  if (!inited || !d || !current || !pending) return 2;
  if (!g) return 3; /* a MIG device handle */
  *current = *pending = (unsigned)mig_mode_of(g->index);
  return 0;
}
int nvmlDeviceGetGpuInstanceId(nvmlDevice_t d, unsigned* id) {
  if (!inited || !d || !d->mig || !id) return 2;
  *id = d->gi;
  return 0;
}
int nvmlDeviceGetComputeInstanceId(nvmlDevice_t d, unsigned* id) {
  if (!inited || !d || !d->mig || !id) return 2;
  *id = d->ci;
  return 0;
}
typedef struct {
  unsigned multiprocessorCount, sharedCopyEngineCount, sharedDecoderCount, sharedEncoderCount,
      sharedJpegCount, sharedOfaCount, gpuInstanceSliceCount, computeInstanceSliceCount;
  unsigned long long memorySizeMB;
} fake_attributes;
int nvmlDeviceGetAttributes_v2(nvmlDevice_t d, fake_attributes* a) {
  if (!inited || !d || !a) return 2;
  if (!d->mig) return 3; /* NVML: MIG device handles only */
  memset(a, 0, sizeof *a);
  a->multiprocessorCount = 14 * d->slices; /* an A100's 1g slice has 14 SMs */
  a->gpuInstanceSliceCount = d->slices;
  a->computeInstanceSliceCount = d->slices;
  a->memorySizeMB = 10240ull * d->slices;
  return 0;
}
typedef struct {
  unsigned pid;
  unsigned long long usedGpuMemory;
  unsigned gpuInstanceId, computeInstanceId;
} fake_process_info;
int nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned* count,
                                            fake_process_info* out) {
  if (!inited || !d || !count) return 2;
  fake_process_info s[64];
  unsigned n = 0;
  const char* p = env("FAKE_NVML_PROCS_FILE");
  FILE* f = p && *p ? fopen(p, "r") : NULL;
  if (f) {
    char uuid[96];
    unsigned pid;
    while (n < 64 && fscanf(f, "%95s %u", uuid, &pid) == 2) {
      const fake_dev* on = NULL; /* the device the line names, if it is d or one of d's MIGs */
      if (!strcmp(uuid, d->uuid)) on = d;
      for (int i = 0; !on && !d->mig && i < n_migs; ++i)
        if (migs[i].parent == d->index && !strcmp(uuid, migs[i].uuid)) on = &migs[i];
      if (!on) continue;
      s[n].pid = pid;
      s[n].usedGpuMemory = 1ull << 30;
      s[n].gpuInstanceId = on->mig ? on->gi : 0xFFFFFFFFu;
      s[n].computeInstanceId = on->mig ? on->ci : 0xFFFFFFFFu;
      ++n;
    }
    fclose(f);
  }
  if (*count < n || (n && !out)) {
    *count = n;
    return 7; /* NVML_ERROR_INSUFFICIENT_SIZE */
  }
  if (n) memcpy(out, s, n * sizeof s[0]);
  *count = n;
  return 0;
}
int nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t d, unsigned* count,
                                            fake_process_info* out) {
  return nvmlDeviceGetComputeRunningProcesses_v3(d, count, out);
}
typedef struct {
  unsigned pid;
  unsigned long long timeStamp;
  unsigned smUtil, memUtil, encUtil, decUtil;
} fake_util_sample;
int nvmlDeviceGetProcessUtilization(nvmlDevice_t d, fake_util_sample* out, unsigned* count,
                                    unsigned long long last_seen) {
  fake_dev* g = gpu_of(d);
  (void)last_seen;
  if (!g || !count) return 2;
  int rc = (int)env_long("FAKE_NVML_PROC_UTIL_RC", 0);
  if (rc) return rc;
  if (mig_mode_of(g->index)) return 3; /* NVML: not supported on MIG-enabled GPUs */
  fake_util_sample s[64];
  unsigned n = 0;
  const char* p = env("FAKE_NVML_PROC_UTIL_FILE");
  FILE* f = p && *p ? fopen(p, "r") : NULL;
  if (f) {
    int gi;
    unsigned pid, sm;
    while (n < 64 && fscanf(f, "%d %u %u", &gi, &pid, &sm) == 3)
      if (gi == g->index) {
        s[n].pid = pid;
        s[n].timeStamp = (unsigned long long)(now_s() * 1e6);
        s[n].smUtil = sm;
        s[n].memUtil = s[n].encUtil = s[n].decUtil = 0;
        ++n;
      }
    fclose(f);
  }
  if (n == 0) return 6; /* NVML_ERROR_NOT_FOUND: no sample */
  if (!out || *count < n) {
    *count = n;
    return 7; /* NVML_ERROR_INSUFFICIENT_SIZE */
  }
  memcpy(out, s, n * sizeof s[0]);
  *count = n;
  return 0;
}

/* Not NVML: throughput of GPU i relative to uncapped, in the FAKE_NVML_DRAW_MW mode (else 1). */
double fake_nvml_speed_factor(unsigned i) {
  FAKE_LOCK;
  long draw = env_long("FAKE_NVML_DRAW_MW", -1);
  if (draw <= 0 || (int)i >= MAXD) return 1.0;
  load_limits();
  double r = (double)limit_mw[i] / (double)draw;
  if (r >= 1) return 1.0;
  const char* e = env("FAKE_NVML_SPEED_EXPONENT");
  return pow(r, e && *e ? atof(e) : 0.5);
}

}  // extern "C"
