/* sched/spank/daemon_link.h: the SPANK plugin's link to `greentrain serve` (C API over the
 * energy module's daemon client, energy/daemon_client.h). When the node daemon runs, the plugin
 * reads each step's GPU energy through it (no second reader of the GPUs on the node), records the
 * energy attributed to the step's own processes on GPUs that several jobs share, and sets
 * --gpu-power-limit as leases of its connection: if slurmstepd is killed, even with SIGKILL, the
 * daemon restores the limits. All functions return 0 on success and -1 on failure, with the
 * reason in why[0..n). */
#ifndef GREENTRAIN_SPANK_DAEMON_LINK_H
#define GREENTRAIN_SPANK_DAEMON_LINK_H
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gt_daemon gt_daemon;

/* Connects to the daemon at `socket` (NULL or "": $GT_DAEMON_SOCKET or
 * /run/greentrain/serve.sock). NULL when none answers (why says so). */
gt_daemon* gt_daemon_open(const char* socket, char* why, size_t n);
/* Takes a fresh sample of the node's sensors (the values the getters below return). */
int gt_daemon_refresh(gt_daemon* d, char* why, size_t n);
/* GPU `nvml_index`'s cumulative energy (J) in the last refreshed sample. */
int gt_daemon_gpu_energy_j(gt_daemon* d, unsigned nvml_index, double* joules);
/* GPU energy (J) attributed to the calling process's tree (slurmstepd's: the step's tasks) since
 * the daemon first saw each process; a window is the difference of two calls. */
int gt_daemon_attributed_j(gt_daemon* d, double* joules, char* why, size_t n);
/* Makes this connection's power-limit requests on behalf of user `uid` (primary group `gid`):
 * the daemon, seeing a root peer (slurmstepd), applies that user's policy rules, not root's.
 * Without it the daemon judges the connection's own user (root: the device's whole range). */
void gt_daemon_on_behalf_of(gt_daemon* d, unsigned uid, unsigned gid);
/* Sets GPU `nvml_index`'s limit to `watts`, clamped by the daemon to the range its policy allows
 * the user (gt_daemon_on_behalf_of's, else the connection's; root: the device's), as a lease of
 * this connection. *set_w: the limit set, *previous_w: the limit before, *applied_w: the GPU's
 * limit the daemon read back after setting it (-1 when it could not). All W. */
int gt_daemon_set_gpu_limit(gt_daemon* d, unsigned nvml_index, double watts, double* set_w,
                            double* previous_w, double* applied_w, char* why, size_t n);
/* Restores the limit in force before this connection's lease on the GPU. */
int gt_daemon_release_gpu_limit(gt_daemon* d, unsigned nvml_index, char* why, size_t n);
/* Closes the connection (the daemon restores any limit still leased). */
void gt_daemon_close(gt_daemon* d);

#ifdef __cplusplus
}
#endif
#endif
