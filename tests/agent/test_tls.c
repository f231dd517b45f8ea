/* test_tls.c: agent/tls.c's batched records (invariant 3) over a socket
 * pair with small buffers, so nearly every batch is sent in parts: a TLS
 * server thread that reads only after a pause gets every byte, in order,
 * and the agent side never blocks.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <gnutls/gnutls.h>

#include "tls.h"

#define TOTAL (3u << 20)

static uint8_t pattern(size_t i) {
  return (uint8_t)(i * 2654435761u >> 13);
}

typedef struct server {
  int fd;
  char dir[64];
  size_t got;
  int ok;
} server;

static void *serve(void *arg) {
  server *sv = arg;
  char cert[128], key[128];
  snprintf(cert, sizeof cert, "%s/srv.pem", sv->dir);
  snprintf(key, sizeof key, "%s/srv.key", sv->dir);
  gnutls_certificate_credentials_t x;
  gnutls_session_t s;
  gnutls_certificate_allocate_credentials(&x);
  if (gnutls_certificate_set_x509_key_file(x, cert, key, GNUTLS_X509_FMT_PEM) <
      0)
    return NULL;
  gnutls_init(&s, GNUTLS_SERVER);
  gnutls_set_default_priority(s);
  gnutls_credentials_set(s, GNUTLS_CRD_CERTIFICATE, x);
  gnutls_transport_set_int(s, sv->fd);
  int rc;
  do
    rc = gnutls_handshake(s);
  while (rc < 0 && !gnutls_error_is_fatal(rc));
  if (rc == 0) {
    /* Let the agent side fill both socket buffers and its own first. */
    usleep(300 * 1000);
    uint8_t buf[16384];
    sv->ok = 1;
    while (sv->got < TOTAL) {
      ssize_t r = gnutls_record_recv(s, buf, sizeof buf);
      if (r == GNUTLS_E_AGAIN || r == GNUTLS_E_INTERRUPTED)
        continue;
      if (r <= 0) {
        sv->ok = 0;
        break;
      }
      for (ssize_t i = 0; i < r; i++)
        if (buf[i] != pattern(sv->got + (size_t)i))
          sv->ok = 0;
      sv->got += (size_t)r;
      if ((sv->got & 0xfffff) < (size_t)r)
        usleep(20 * 1000); /* a slow reader now and then */
    }
  }
  gnutls_deinit(s);
  gnutls_certificate_free_credentials(x);
  return NULL;
}

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void wait_fd(int fd, short ev) {
  struct pollfd p = {fd, ev, 0};
  assert_true(poll(&p, 1, 10000) > 0);
}

static void test_tls__batched_records_arrive_whole_and_in_order(void **st) {
  (void)st;
  server sv = {0};
  snprintf(sv.dir, sizeof sv.dir, "/tmp/gt-tls-test-XXXXXX");
  assert_non_null(mkdtemp(sv.dir));
  char cmd[1024];
  snprintf(cmd, sizeof cmd,
           "cd '%s' && (certtool -p --key-type=ecdsa --outfile ca.key && "
           "printf 'cn=CA\\nca\\ncert_signing_key\\n' >ca.t && "
           "certtool -s --load-privkey ca.key --template ca.t --outfile ca.pem"
           " && certtool -p --key-type=ecdsa --outfile srv.key && "
           "printf 'cn=d\\nip_address=127.0.0.1\\ntls_www_server\\n' >s.t && "
           "certtool -c --load-privkey srv.key --load-ca-certificate ca.pem "
           "--load-ca-privkey ca.key --template s.t --outfile srv.pem) "
           ">/dev/null 2>&1",
           sv.dir);
  if (system(cmd) != 0) {
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", sv.dir);
    (void)!system(cmd);
    skip(); /* no certtool */
  }
  int fds[2];
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  int small = 16384;
  setsockopt(fds[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
  setsockopt(fds[1], SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  assert_int_equal(fcntl(fds[0], F_SETFL, O_NONBLOCK), 0);
  sv.fd = fds[1];
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, serve, &sv), 0);

  char ca[128];
  snprintf(ca, sizeof ca, "%s/ca.pem", sv.dir);
  gt__tls *t;
  assert_int_equal(gt__tls_new(ca, NULL, NULL, &t), 0);
  gt__tls_conn *c = gt__tls_begin(t, fds[0], "127.0.0.1");
  assert_non_null(c);
  int rc;
  while ((rc = gt__tls_handshake(c)) == 0)
    wait_fd(fds[0], gt__tls_want_write(c) ? POLLOUT : POLLIN);
  assert_int_equal(rc, 1);

  uint8_t *data = malloc(TOTAL);
  assert_non_null(data);
  for (size_t i = 0; i < TOTAL; i++)
    data[i] = pattern(i);
  size_t off = 0;
  unsigned again = 0;
  int64_t worst = 0;
  while (off < TOTAL || gt__tls_unsent(c)) {
    int64_t t0 = now_ms();
    if (off < TOTAL) {
      ssize_t n = gt__tls_send(c, data + off, TOTAL - off);
      if (n > 0) {
        off += (size_t)n;
      } else {
        assert_true(errno == EAGAIN);
        again++;
      }
    } else if (gt__tls_flush(c) == 0) {
      again++;
    }
    if (now_ms() - t0 > worst)
      worst = now_ms() - t0;
    if (off < TOTAL || gt__tls_unsent(c))
      wait_fd(fds[0], POLLOUT);
  }
  pthread_join(th, NULL);
  assert_true(again > 0);    /* the partial path was taken */
  assert_true(worst < 1000); /* never blocked on the slow reader */
  assert_int_equal(sv.got, TOTAL);
  assert_true(sv.ok);
  free(data);
  gt__tls_end(c);
  gt__tls_free(t);
  close(fds[0]);
  close(fds[1]);
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", sv.dir);
  (void)!system(cmd);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_tls__batched_records_arrive_whole_and_in_order),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
