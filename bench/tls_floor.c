/* tls_floor.c: see tls_floor.h.
 *
 * The ceilings, with ns = CPU ns per payload byte (medians of the run):
 *  - server CPU: plain / (plain + aead). A TLS whose only cost is its
 *    cipher makes the server spend exactly aead ns more per byte.
 *  - wall time, both ends on the same cores: (srv + peer plain) /
 *    (srv + peer plain + both aeads). When the cores are the bottleneck,
 *    throughput goes as the inverse of the CPU both ends spend per byte.
 *    It is a bound only for a run that keeps the cores busy; `busy` (cores
 *    kept busy on average) says how far that holds, and a wall ratio above
 *    its ceiling is flagged rather than believed.
 * ratio_of_ceiling = measured / ceiling: 1 means nothing is spent beyond
 * the cipher. The goal (TLS costs at most 15%) is reachable only when a
 * ceiling is >= 0.85; each *-of-ceiling line's bar is 0.85 / ceiling,
 * above 1 when not even a perfect TLS could reach it.
 */
#include "config.h"

#include "tls_floor.h"

#include <dirent.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>

#define REC 16385u /* a full TLS 1.3 record's plaintext: 16 KiB + type */
#define AAD 5u     /* the record header */
#define NREC 6000u /* records per pass (~98 MB, ~25 ms with AES-NI) */
#define GOAL 0.85

int tls_floor_cipher_by_name(const char *name) {
  if (name != NULL && strstr(name, "CHACHA20") != NULL)
    return GNUTLS_CIPHER_CHACHA20_POLY1305;
  if (name != NULL &&
      (strstr(name, "AES_128_GCM") != NULL || strstr(name, "AES-128-GCM")))
    return GNUTLS_CIPHER_AES_128_GCM;
  return GNUTLS_CIPHER_AES_256_GCM;
}

const char *tls_floor_cipher_name(int cipher) {
  const char *n = gnutls_cipher_get_name((gnutls_cipher_algorithm_t)cipher);
  return n != NULL ? n : "?";
}

static double thread_cpu_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

double tls_floor_median(double *v, int n) {
  if (n <= 0)
    return 0;
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The median of one field (at byte offset off) over n rounds. */
static double round_median(const tls_floor_round *r, int n, size_t off) {
  if (n <= 0)
    return 0;
  double *v = malloc((size_t)n * sizeof *v);
  if (v == NULL)
    return 0;
  for (int i = 0; i < n; i++)
    memcpy(&v[i], (const char *)&r[i] + off, sizeof *v);
  double m = tls_floor_median(v, n);
  free(v);
  return m;
}

void tls_floor_fig_of(tls_floor_fig *f, const char *id, int cipher,
                      const tls_floor_round *r, int n) {
#define MED(field) round_median(r, n, offsetof(tls_floor_round, field))
  *f = (tls_floor_fig){
      .id = id,
      .cipher = tls_floor_cipher_name(cipher),
      .srv_aead_ns = MED(srv_aead_ns),
      .peer_aead_ns = MED(peer_aead_ns),
      .srv_plain_ns = MED(srv_plain_ns),
      .srv_tls_ns = MED(srv_tls_ns),
      .peer_plain_ns = MED(peer_plain_ns),
      .peer_tls_ns = MED(peer_tls_ns),
      .wall_ratio = MED(wall_ratio),
      .busy_plain = MED(busy_plain),
      .busy_tls = MED(busy_tls),
      .loop_plain_ns = MED(loop_plain_ns),
      .loop_tls_ns = MED(loop_tls_ns),
  };
#undef MED
}

int tls_floor_aead(int cipher, double *enc_ns, double *dec_ns) {
  gnutls_cipher_algorithm_t a = (gnutls_cipher_algorithm_t)cipher;
  size_t klen = gnutls_cipher_get_key_size(a);
  size_t tag = (size_t)gnutls_cipher_get_tag_size(a);
  uint8_t key[32] = {0}, nonce[12] = {0}, aad[AAD] = {0x17, 3, 3, 0x40, 0x11};
  if (klen == 0 || klen > sizeof key || tag == 0)
    return -1;
  for (size_t i = 0; i < klen; i++)
    key[i] = (uint8_t)(i * 37 + 1);
  gnutls_datum_t k = {key, (unsigned)klen};
  gnutls_aead_cipher_hd_t h;
  if (gnutls_aead_cipher_init(&h, a, &k) < 0)
    return -1;
  uint8_t *pt = malloc(REC + 64), *ct = malloc(REC + 64);
  int rc = -1;
  if (pt == NULL || ct == NULL)
    goto out;
  for (size_t i = 0; i < REC; i++)
    pt[i] = (uint8_t)(i * 131 + (i >> 9));
  double enc[3], dec[3];
  for (int pass = 0; pass < 3; pass++) {
    size_t clen = 0, plen = 0;
    double t0 = thread_cpu_s();
    for (unsigned r = 0; r < NREC; r++) {
      nonce[11] = (uint8_t)r; /* the sequence number, as TLS 1.3 */
      clen = REC + 64;
      if (gnutls_aead_cipher_encrypt(h, nonce, sizeof nonce, aad, AAD, tag, pt,
                                     REC, ct, &clen) < 0)
        goto out;
    }
    double t1 = thread_cpu_s();
    /* Open the last record sealed, again and again (a valid tag each
     * time: a failed check would stop early and time less). */
    for (unsigned r = 0; r < NREC; r++) {
      plen = REC + 64;
      if (gnutls_aead_cipher_decrypt(h, nonce, sizeof nonce, aad, AAD, tag, ct,
                                     clen, pt, &plen) < 0)
        goto out;
    }
    double t2 = thread_cpu_s();
    enc[pass] = (t1 - t0) * 1e9 / ((double)NREC * REC);
    dec[pass] = (t2 - t1) * 1e9 / ((double)NREC * REC);
  }
  *enc_ns = tls_floor_median(enc, 3);
  *dec_ns = tls_floor_median(dec, 3);
  rc = 0;
out:
  free(pt);
  free(ct);
  gnutls_aead_cipher_deinit(h);
  return rc;
}

/* First field of a schedstat file: ns on the CPU. */
static double schedstat_s(const char *path) {
  FILE *f = fopen(path, "r");
  unsigned long long ns = 0;
  int ok = f != NULL && fscanf(f, "%llu", &ns) == 1;
  if (f != NULL)
    fclose(f);
  return ok ? (double)ns / 1e9 : -1;
}

double tls_floor_proc_cpu_s(pid_t pid, double *loop_s) {
  char path[96];
  snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
  DIR *d = opendir(path);
  if (d == NULL)
    return -1;
  double sum = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.')
      continue;
    snprintf(path, sizeof path, "/proc/%d/task/%.16s/schedstat", (int)pid,
             e->d_name);
    double s = schedstat_s(path);
    if (s > 0)
      sum += s;
    if (loop_s != NULL && atoi(e->d_name) == (int)pid)
      *loop_s = s;
  }
  closedir(d);
  return sum;
}

static void of_ceiling(const char *id, const char *what, double measured,
                       double ceiling) {
  double roc = ceiling > 0 ? measured / ceiling : 0;
  double bar = ceiling > 0 ? GOAL / ceiling : 0;
  printf("BENCH id=%s-%s-of-ceiling value=%.2f unit=ratio(TLS/plain,%s) "
         "baseline=zero-overhead-TLS:%.2f ratio=%.2f bar=%.2f pass=%d\n",
         id, what, measured, what, ceiling, roc, bar,
         ceiling > 0 && roc >= bar);
}

void tls_floor_print(const tls_floor_fig *f) {
  double sp = f->srv_plain_ns, pp = f->peer_plain_ns;
  double sa = f->srv_aead_ns, pa = f->peer_aead_ns;
  double ceil_cpu = sp > 0 ? sp / (sp + sa) : 0;
  double ceil_wall = sp + pp > 0 ? (sp + pp) / (sp + pp + sa + pa) : 0;
  /* Each end on its own core, nothing else running: the slower end. */
  double par_plain = sp > pp ? sp : pp;
  double par_tls = sp + sa > pp + pa ? sp + sa : pp + pa;
  double ceil_par = par_tls > 0 ? par_plain / par_tls : 0;
  double cpu_ratio = f->srv_tls_ns > 0 ? sp / f->srv_tls_ns : 0;
  /* The cipher's throughput against the plain path's: for a perfect TLS
   * to cost at most 15%, the cipher must run 0.85/0.15 = 5.67 times as
   * fast as the server's whole plain path. */
  printf("BENCH id=%s-aead value=%.0f unit=MB/cpu-s(%s,16KiB-records) "
         "baseline=plain-server-cpu:%.0f ratio=%.2f bar=%.2f pass=%d\n",
         f->id, sa > 0 ? 1e3 / sa : 0, f->cipher, sp > 0 ? 1e3 / sp : 0,
         sa > 0 ? sp / sa : 0, GOAL / (1 - GOAL),
         sa > 0 && sp / sa >= GOAL / (1 - GOAL));
  printf("BENCH id=%s-ceiling value=%.2f unit=ratio(zero-overhead-TLS,"
         "server-cpu) baseline=goal:%.2f ratio=%.2f bar=1.00 pass=%d\n",
         f->id, ceil_cpu, GOAL, ceil_cpu / GOAL, ceil_cpu >= GOAL);
  printf("BENCH id=%s-ceiling-wall value=%.2f unit=ratio(zero-overhead-TLS,"
         "shared-cores) baseline=goal:%.2f ratio=%.2f bar=1.00 pass=%d\n",
         f->id, ceil_wall, GOAL, ceil_wall / GOAL, ceil_wall >= GOAL);
  of_ceiling(f->id, "cpu", cpu_ratio, ceil_cpu);
  of_ceiling(f->id, "wall", f->wall_ratio, ceil_wall);
  /* The accounts, per payload byte. */
  double srv_beyond = f->srv_tls_ns - sp - sa;
  double peer_beyond = f->peer_tls_ns - pp - pa;
  printf("tls_floor: %s cipher %s: AEAD %.3f ns/B (server side) %.3f ns/B "
         "(peer side); server CPU plain %.3f TLS %.3f ns/B (+%.3f = cipher "
         "%.3f + beyond %.3f); peer CPU plain %.3f TLS %.3f ns/B (+%.3f = "
         "cipher %.3f + beyond %.3f); cores busy plain %.2f TLS %.2f\n",
         f->id, f->cipher, sa, pa, sp, f->srv_tls_ns, f->srv_tls_ns - sp, sa,
         srv_beyond, pp, f->peer_tls_ns, f->peer_tls_ns - pp, pa, peer_beyond,
         f->busy_plain, f->busy_tls);
  printf("tls_floor: %s ceilings: server CPU %.2f, wall on shared cores "
         "%.2f (one core each end: %.2f); measured CPU %.2f "
         "(ratio_of_ceiling %.2f), wall %.2f (ratio_of_ceiling %.2f)\n",
         f->id, ceil_cpu, ceil_wall, ceil_par, cpu_ratio,
         ceil_cpu > 0 ? cpu_ratio / ceil_cpu : 0, f->wall_ratio,
         ceil_wall > 0 ? f->wall_ratio / ceil_wall : 0);
  /* Figures that do not add up are said, not smoothed over. */
  if (srv_beyond < -0.02 * (sp + sa))
    printf("tls_floor: %s DOES NOT ADD UP: the server's TLS run cost less "
           "than its plain run plus the cipher alone (%.3f < %.3f ns/B)\n",
           f->id, f->srv_tls_ns, sp + sa);
  if (peer_beyond < -0.02 * (pp + pa))
    printf("tls_floor: %s DOES NOT ADD UP: the peer's TLS run cost less "
           "than its plain run plus the cipher alone (%.3f < %.3f ns/B)\n",
           f->id, f->peer_tls_ns, pp + pa);
  if (f->loop_tls_ns > 0) {
    double grew = f->loop_tls_ns - f->loop_plain_ns;
    printf("tls_floor: %s server's TLS thread alone: plain %.3f TLS %.3f "
           "ns/B (+%.3f = cipher %.3f + beyond %.3f)\n",
           f->id, f->loop_plain_ns, f->loop_tls_ns, grew, sa, grew - sa);
    if (grew < 0.98 * sa)
      printf("tls_floor: %s DOES NOT ADD UP: the server's TLS thread grew by "
             "less than the cipher alone (%.3f < %.3f ns/B): this run's "
             "noise is larger than what it measures\n",
             f->id, grew, sa);
  }
  if (f->wall_ratio > ceil_wall * 1.05)
    printf("tls_floor: %s wall ratio %.2f is above its shared-core ceiling "
           "%.2f: the plain runs did not keep the cores busy (%.2f cores "
           "busy plain, %.2f TLS), so that ceiling does not bind them\n",
           f->id, f->wall_ratio, ceil_wall, f->busy_plain, f->busy_tls);
}
