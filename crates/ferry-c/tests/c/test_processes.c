/* Across processes: a C parent with a C child (this program, started
 * again as `child` or `burst N`) and with a Rust child (argv[1], which
 * echoes); a child killed; epoll (level- and edge-triggered) and poll()
 * over a million messages in bursts with no lost wakeup; an idle wait that
 * does not wake.
 *
 * Usage: test_processes RUST_PEER */
#define _GNU_SOURCE
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

#define MS (1000000LL)
#define SECOND (1000 * MS)

static unsigned char message[1 << 20], reply[1 << 20];

/* The child: echoes until its parent hangs up. */
static int echo_child(void) {
    ferry_pipe *pipe;
    size_t len;
    ferry_status s;
    if (ferry_from_parent(&pipe) != FERRY_OK) {
        fprintf(stderr, "child: %s\n", ferry_last_error());
        return 2;
    }
    while ((s = ferry_recv(pipe, message, sizeof message, &len, -1)) == FERRY_OK) {
        if (ferry_send(pipe, message, len, -1) != FERRY_OK) {
            return 3;
        }
    }
    ferry_pipe_close(pipe);
    return s == FERRY_DISCONNECTED ? 0 : 4;
}

/* The child: sends `total` 8-byte counters in bursts of 1 to 1,000, with
 * pauses of up to 2 ms between bursts (so the receiver runs dry and waits
 * on its descriptor between most bursts), then hangs up. */
static int burst_child(long total) {
    ferry_pipe *pipe;
    long sent = 0, burst;
    unsigned seed = 12345;
    struct timespec pause = {0, 0};
    if (ferry_from_parent(&pipe) != FERRY_OK) {
        return 2;
    }
    while (sent < total) {
        seed = seed * 1103515245u + 12345u;
        burst = 1 + (long)((seed >> 8) % 1000);
        for (; burst > 0 && sent < total; burst--, sent++) {
            uint64_t n = (uint64_t)sent;
            if (ferry_send(pipe, &n, sizeof n, -1) != FERRY_OK) {
                return 3;
            }
        }
        pause.tv_nsec = (long)((seed >> 4) % 2000) * 1000;
        nanosleep(&pause, NULL);
    }
    ferry_pipe_close(pipe);
    return 0;
}

static void echo_through(const char *who, char *const argv[]) {
    static const size_t sizes[] = {0, 1, 12, 144, 4096, 65536, 1 << 20};
    ferry_child *child = NULL;
    ferry_pipe *pipe = NULL;
    pid_t pid = 0;
    size_t i, len;
    int status = -1;
    OK(ferry_spawn((const char *const *)argv, NULL, &child, &pipe));
    if (child == NULL) {
        return;
    }
    OK(ferry_child_pid(child, &pid));
    CHECK(pid > 0);
    for (i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        memset(message, (int)(i + 1), sizes[i]);
        OK(ferry_send(pipe, message, sizes[i], 10 * SECOND));
        OK(ferry_recv(pipe, reply, sizeof reply, &len, 10 * SECOND));
        CHECK(len == sizes[i] && memcmp(message, reply, len) == 0);
    }
    ferry_pipe_close(pipe);
    OK(ferry_child_wait(child, 10 * SECOND, &status));
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    ferry_child_close(child);
    printf("echo through a %s child: %zu sizes\n", who, i);
}

static void a_killed_child_is_seen(char *self) {
    char *argv[3];
    ferry_child *child;
    ferry_pipe *pipe;
    size_t len;
    int status = 0;
    argv[0] = self;
    argv[1] = "child";
    argv[2] = NULL;
    OK(ferry_spawn((const char *const *)argv, NULL, &child, &pipe));
    FAILS(ferry_child_wait(child, 0, &status), FERRY_WOULD_BLOCK);
    FAILS(ferry_child_wait(child, 2 * MS, NULL), FERRY_TIMED_OUT);
    OK(ferry_child_kill(child));
    OK(ferry_child_wait(child, 10 * SECOND, &status));
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    FAILS(ferry_recv(pipe, reply, sizeof reply, &len, 10 * SECOND), FERRY_DISCONNECTED);
    ferry_pipe_close(pipe);
    ferry_child_close(child);
}

static void spawn_errors(void) {
    char *missing[] = {"/nonexistent/ferry-test-program", NULL};
    char *empty[] = {NULL};
    ferry_child *child = NULL;
    ferry_pipe *pipe = NULL;
    int fds = open_fds();
    FAILS(ferry_spawn((const char *const *)missing, NULL, &child, &pipe), FERRY_IO);
    CHECK(ferry_last_os_error() == 2 /* ENOENT */);
    FAILS(ferry_spawn((const char *const *)empty, NULL, &child, &pipe), FERRY_INVALID_ARGUMENT);
    FAILS(ferry_spawn(NULL, NULL, &child, &pipe), FERRY_INVALID_ARGUMENT);
    FAILS(ferry_spawn((const char *const *)missing, NULL, NULL, &pipe), FERRY_INVALID_ARGUMENT);
    CHECK(child == NULL && pipe == NULL);
    /* This process was not spawned by ferry. */
    FAILS(ferry_from_parent(&pipe), FERRY_INVALID_ARGUMENT);
    FAILS(ferry_child_wait(NULL, 0, NULL), FERRY_INVALID_ARGUMENT);
    FAILS(ferry_child_kill(NULL), FERRY_INVALID_ARGUMENT);
    ferry_child_close(NULL);
    /* No more than before (ferry's reserve of pool blocks, process-wide,
     * may shrink meanwhile). */
    CHECK(fds_back_to(fds));
}

enum mode { POLL, EPOLL_LEVEL, EPOLL_EDGE };

/* Receives `total` counters, in order, waking only through the readiness
 * descriptor as `mode` says; no wait may time out (a lost wakeup). */
static void bursts(char *self, enum mode mode, long total) {
    char count[32], *argv[4];
    ferry_child *child;
    ferry_pipe *pipe;
    long got = 0, wakes = 0;
    int fd, ep = -1, status = -1;
    size_t len;
    uint64_t n;
    ferry_status s = FERRY_OK;
    snprintf(count, sizeof count, "%ld", total);
    argv[0] = self;
    argv[1] = "burst";
    argv[2] = count;
    argv[3] = NULL;
    OK(ferry_spawn((const char *const *)argv, NULL, &child, &pipe));
    OK(ferry_ready_fd(pipe, &fd));
    if (mode != POLL) {
        struct epoll_event ev;
        ep = epoll_create1(EPOLL_CLOEXEC);
        ev.events = EPOLLIN | (mode == EPOLL_EDGE ? EPOLLET : 0);
        ev.data.fd = fd;
        CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) == 0);
    }
    while (s != FERRY_DISCONNECTED) {
        int ready;
        if (mode == POLL) {
            struct pollfd p;
            p.fd = fd;
            p.events = POLLIN;
            ready = poll(&p, 1, 10000);
        } else {
            struct epoll_event ev;
            ready = epoll_wait(ep, &ev, 1, 10000);
        }
        if (ready != 1) {
            fprintf(stderr, "no wakeup in 10 s after %ld of %ld messages\n", got, total);
            check_failures++;
            break;
        }
        wakes++;
        /* Level-triggered: one receive per wakeup would do; edge-triggered
         * needs the drain, so all three drain. */
        while ((s = ferry_recv(pipe, &n, sizeof n, &len, 0)) == FERRY_OK) {
            if (n != (uint64_t)got) {
                fprintf(stderr, "message %ld was %llu\n", got, (unsigned long long)n);
                check_failures++;
                s = FERRY_DISCONNECTED;
                break;
            }
            got++;
        }
        if (s != FERRY_WOULD_BLOCK && s != FERRY_DISCONNECTED) {
            EXPECT(s, FERRY_WOULD_BLOCK);
            break;
        }
    }
    CHECK(got == total);
    /* The waits were real: the receiver ran dry between bursts. */
    CHECK(wakes >= 10);
    OK(ferry_child_wait(child, 10 * SECOND, &status));
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    if (ep >= 0) {
        close(ep);
    }
    ferry_pipe_close(pipe);
    ferry_child_close(child);
    printf("%s: %ld messages in %ld wakeups\n",
           mode == POLL ? "poll" : mode == EPOLL_LEVEL ? "epoll level-triggered" : "epoll edge-triggered",
           got, wakes);
}

/* An idle receive on a silent child does not wake: a wait of three
 * seconds switches this thread out no more often than a wait of one (the
 * few switches both have are the wait's start: spin, yield, sleep). */
static void an_idle_wait_does_not_wake(char *self) {
    char *argv[3];
    ferry_child *child;
    ferry_pipe *pipe;
    struct rusage before, after;
    long one, three;
    size_t len;
    argv[0] = self;
    argv[1] = "child";
    argv[2] = NULL;
    OK(ferry_spawn((const char *const *)argv, NULL, &child, &pipe));
    /* A round trip first: the child is up and waiting. */
    OK(ferry_send(pipe, "x", 1, -1));
    OK(ferry_recv(pipe, reply, sizeof reply, &len, 10 * SECOND));
    getrusage(RUSAGE_THREAD, &before);
    FAILS(ferry_recv(pipe, reply, sizeof reply, &len, SECOND), FERRY_TIMED_OUT);
    getrusage(RUSAGE_THREAD, &after);
    one = after.ru_nvcsw - before.ru_nvcsw;
    getrusage(RUSAGE_THREAD, &before);
    FAILS(ferry_recv(pipe, reply, sizeof reply, &len, 3 * SECOND), FERRY_TIMED_OUT);
    getrusage(RUSAGE_THREAD, &after);
    three = after.ru_nvcsw - before.ru_nvcsw;
    printf("idle waits: %ld voluntary switches in 1 s, %ld in 3 s\n", one, three);
    CHECK(three <= one + 1 && three <= 5);
    ferry_pipe_close(pipe);
    OK(ferry_child_wait(child, 10 * SECOND, NULL));
    ferry_child_close(child);
}

int main(int argc, char **argv) {
    char *self[3], *rust[2];
    long total = 1000000;
    int fds;
    if (argc >= 2 && strcmp(argv[1], "child") == 0) {
        return echo_child();
    }
    if (argc >= 3 && strcmp(argv[1], "burst") == 0) {
        return burst_child(atol(argv[2]));
    }
    if (argc < 2) {
        fprintf(stderr, "usage: %s RUST_PEER [MESSAGES]\n", argv[0]);
        return 2;
    }
    if (argc >= 3) {
        total = atol(argv[2]);
    }
    self[0] = argv[0];
    self[1] = "child";
    self[2] = NULL;
    rust[0] = argv[1];
    rust[1] = NULL;
    /* The first pipes make what ferry keeps for the process's life (the
     * reserve of pool blocks, shared by every link). */
    echo_through("C", self);
    echo_through("Rust", rust);
    fds = open_fds();
    echo_through("C", self);
    echo_through("Rust", rust);
    a_killed_child_is_seen(argv[0]);
    spawn_errors();
    bursts(argv[0], POLL, total);
    bursts(argv[0], EPOLL_LEVEL, total);
    bursts(argv[0], EPOLL_EDGE, total);
    an_idle_wait_does_not_wake(argv[0]);
    CHECK(fds_back_to(fds));
    return finish("test_processes");
}
