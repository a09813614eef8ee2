/* tests/energy/fake_rocm_smi.cpp: a stand-in for librocm_smi64.so, loaded through
 * GT_ROCM_SMI_LIBRARY. Behaviour from environment variables, read at every call:
 *   FAKE_RSMI_INIT_RC=N        rsmi_init returns N
 *   FAKE_RSMI_DEVICES=N        number of GPUs (default 1)
 *   FAKE_RSMI_TICKS_FILE=path  energy counter ticks of GPU i = line i of this file
 *                              (without it the counter advances at FAKE_RSMI_POWER_UW)
 *   FAKE_RSMI_RESOLUTION=r     uJ per tick (default 15.3, as on MI250X)
 *   FAKE_RSMI_NO_ENERGY=1      rsmi_dev_energy_count_get -> RSMI_STATUS_NOT_SUPPORTED (2)
 *   FAKE_RSMI_POWER_UW=N       average power in uW (default 100000000 = 100 W)
 * rsmi_dev_unique_id_get gives GPU i the unique id 0xA1B2C3D4000 + i.
 */
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>

extern "C" {

static double t0 = 0;
static double now_s() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}
static long long env_ll(const char* k, long long d) {
  const char* v = getenv(k);
  return v && *v ? strtoll(v, nullptr, 10) : d;
}
static double resolution() {
  const char* v = getenv("FAKE_RSMI_RESOLUTION");
  return v && *v ? atof(v) : 15.3;
}

int rsmi_init(uint64_t) {
  t0 = now_s();
  return (int)env_ll("FAKE_RSMI_INIT_RC", 0);
}
int rsmi_shut_down() { return 0; }
int rsmi_num_monitor_devices(uint32_t* n) {
  *n = (uint32_t)env_ll("FAKE_RSMI_DEVICES", 1);
  return 0;
}
int rsmi_status_string(int rc, const char** s) {
  *s = rc == 0   ? "RSMI_STATUS_SUCCESS"
       : rc == 2 ? "RSMI_STATUS_NOT_SUPPORTED"
                 : "RSMI_STATUS_ERROR";
  return 0;
}
int rsmi_dev_energy_count_get(uint32_t i, uint64_t* ticks, float* res, uint64_t* ts) {
  if (env_ll("FAKE_RSMI_NO_ENERGY", 0)) return 2;
  *res = (float)resolution();
  *ts = (uint64_t)(now_s() * 1e9);
  const char* p = getenv("FAKE_RSMI_TICKS_FILE");
  if (p && *p) {
    FILE* f = fopen(p, "r");
    if (!f) return 8;
    unsigned long long v = 0;
    int ok = 0;
    for (uint32_t k = 0; k <= i; ++k) ok = fscanf(f, "%llu", &v) == 1;
    fclose(f);
    if (!ok) return 8;
    *ticks = v;
    return 0;
  }
  double uj = (double)env_ll("FAKE_RSMI_POWER_UW", 100000000) * (now_s() - t0);
  *ticks = (uint64_t)(uj / resolution());
  return 0;
}
int rsmi_dev_unique_id_get(uint32_t i, uint64_t* id) {
  *id = 0xA1B2C3D4000ull + i;
  return 0;
}
int rsmi_dev_power_ave_get(uint32_t, uint32_t, uint64_t* uw) {
  *uw = (uint64_t)env_ll("FAKE_RSMI_POWER_UW", 100000000);
  return 0;
}

}  // extern "C"
