// A malloc interposer that counts the bytes a process holds, for measuring a peer's peak
// allocation during one run (bench/peers/ort_peak.js loads it with LD_PRELOAD).
//
//   cc -O2 -shared -fPIC -o alloc_peak.so bench/peers/alloc_peak.c
//   ALLOC_PEAK_OUT=FILE LD_PRELOAD=./alloc_peak.so PROGRAM ...
//
// Every malloc, calloc, realloc, posix_memalign, aligned_alloc, memalign and free (C++'s
// operator new and delete call them) adds or subtracts the block's usable size. Each SIGUSR2
// appends "<peak since the last SIGUSR2> <held now>\n" to ALLOC_PEAK_OUT and starts a new peak
// at what is held now: signal, run, signal, and the second line's first number is the most
// bytes held during the run beyond those held before it. Memory a program maps itself (V8's
// heap) is not malloc's and is not counted.
#define _GNU_SOURCE
#include <fcntl.h>
#include <malloc.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern void* __libc_malloc(size_t);
extern void* __libc_calloc(size_t, size_t);
extern void* __libc_realloc(void*, size_t);
extern void* __libc_memalign(size_t, size_t);
extern void __libc_free(void*);

static _Atomic int64_t held;
static _Atomic int64_t peak;

static void Add(void* p) {
  if (p == NULL) return;
  const int64_t now = atomic_fetch_add(&held, (int64_t)malloc_usable_size(p)) +
                      (int64_t)malloc_usable_size(p);
  int64_t seen = atomic_load(&peak);
  while (now > seen && !atomic_compare_exchange_weak(&peak, &seen, now)) {
  }
}

static void Sub(void* p) {
  if (p != NULL) atomic_fetch_sub(&held, (int64_t)malloc_usable_size(p));
}

void* malloc(size_t n) {
  void* p = __libc_malloc(n);
  Add(p);
  return p;
}

void* calloc(size_t n, size_t size) {
  void* p = __libc_calloc(n, size);
  Add(p);
  return p;
}

void* realloc(void* old, size_t n) {
  Sub(old);
  void* p = __libc_realloc(old, n);
  Add(p != NULL ? p : (n == 0 ? NULL : old));
  return p;
}

void* memalign(size_t alignment, size_t n) {
  void* p = __libc_memalign(alignment, n);
  Add(p);
  return p;
}

void* aligned_alloc(size_t alignment, size_t n) { return memalign(alignment, n); }

int posix_memalign(void** out, size_t alignment, size_t n) {
  void* p = memalign(alignment, n);
  if (p == NULL) return 12;  // ENOMEM
  *out = p;
  return 0;
}

void free(void* p) {
  Sub(p);
  __libc_free(p);
}

// Decimal digits of v into buf (async-signal-safe); returns the length.
static int Digits(int64_t v, char* buf) {
  char tmp[24];
  int n = 0;
  int neg = v < 0;
  uint64_t u = neg ? (uint64_t)(-v) : (uint64_t)v;
  do {
    tmp[n++] = (char)('0' + u % 10);
    u /= 10;
  } while (u != 0);
  int len = 0;
  if (neg) buf[len++] = '-';
  while (n > 0) buf[len++] = tmp[--n];
  return len;
}

static void Report(int sig) {
  (void)sig;
  const int64_t now = atomic_load(&held);
  const int64_t top = atomic_exchange(&peak, now);
  char line[64];
  int len = Digits(top, line);
  line[len++] = ' ';
  len += Digits(now, line + len);
  line[len++] = '\n';
  const char* path = getenv("ALLOC_PEAK_OUT");
  if (path == NULL) return;
  const int fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd < 0) return;
  (void)!write(fd, line, (size_t)len);
  close(fd);
}

__attribute__((constructor)) static void Install(void) {
  struct sigaction action;
  memset(&action, 0, sizeof(action));
  action.sa_handler = Report;
  sigaction(SIGUSR2, &action, NULL);
}
