/* What the C tests share: a check that names the failing line and what
 * ferry said, and a count of this process's open descriptors. */
#ifndef FERRY_C_TEST_CHECK_H
#define FERRY_C_TEST_CHECK_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ferry.h"

static int check_failures = 0;

#define CHECK(cond)                                                                \
    do {                                                                           \
        if (!(cond)) {                                                             \
            fprintf(stderr, "%s:%d: CHECK(%s) failed (last error: %s)\n", __FILE__, \
                    __LINE__, #cond, ferry_last_error());                          \
            check_failures++;                                                      \
        }                                                                          \
    } while (0)

/* A call that must return `want`. */
#define EXPECT(call, want)                                                        \
    do {                                                                          \
        ferry_status got_ = (call);                                               \
        if (got_ != (want)) {                                                     \
            fprintf(stderr, "%s:%d: %s gave %s, not %s (last error: %s)\n",       \
                    __FILE__, __LINE__, #call, ferry_status_str((int)got_),       \
                    ferry_status_str((int)(want)), ferry_last_error());           \
            check_failures++;                                                     \
        }                                                                         \
    } while (0)

#define OK(call) EXPECT(call, FERRY_OK)

/* A call that must fail with `want` and say why. */
#define FAILS(call, want)                                                         \
    do {                                                                          \
        EXPECT(call, want);                                                       \
        CHECK(strlen(ferry_last_error()) > 0);                                    \
    } while (0)

/* How many descriptors this process has open. */
static int open_fds(void) {
    int n = 0;
    DIR *dir = opendir("/proc/self/fd");
    struct dirent *entry;
    if (dir == NULL) {
        return -1;
    }
    while ((entry = readdir(dir)) != NULL) {
        if (entry->d_name[0] != '.') {
            n++;
        }
    }
    closedir(dir);
    return n - 1; /* the directory's own */
}

/* Whether the descriptor count comes back to at most `baseline` within
 * 2 s: ferry closes what a peer sent and it refused on threads of its own,
 * and its reserve of pool blocks grows and shrinks in the background. */
static inline int fds_back_to(int baseline) {
    int i;
    for (i = 0; i < 200; i++) {
        struct timespec tick = {0, 10000000};
        if (open_fds() <= baseline) {
            return 1;
        }
        nanosleep(&tick, NULL);
    }
    fprintf(stderr, "%d descriptors open, more than the %d before\n", open_fds(), baseline);
    return 0;
}

static int finish(const char *name) {
    if (check_failures != 0) {
        fprintf(stderr, "%s: %d check(s) failed\n", name, check_failures);
        return 1;
    }
    printf("%s: every check passed\n", name);
    return 0;
}

#endif
