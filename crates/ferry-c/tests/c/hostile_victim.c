/* A C victim of the hostile peers of ferry's Rust suite
 * (crates/ferry/tests/hostile/attacker/): it starts the attacker given on
 * its command line with a pipe, as any C program starts a child, and
 * checks that every call on what the attacker sent returns an error (or
 * times out) within its bound, never crashes, and that no descriptor is
 * left behind once the attacker is gone.
 *
 * Usage: hostile_victim ATTACK ATTACKER_PROGRAM [ARGS...]
 * ATTACK is one of positions-a, positions-b (a pipe end whose ring
 * positions are impossible), handles-32767 (a message claiming 32,767
 * handles), records (garbage frames and records, forever). */
#define _GNU_SOURCE
#include <sys/wait.h>
#include <time.h>

#include "check.h"

#define MS (1000000LL)
#define SECOND (1000 * MS)

static long long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * SECOND + t.tv_nsec;
}

/* Whether `s` is one of the statuses a call under attack may give. */
static int allowed(ferry_status s, const ferry_status *ok, int n) {
    int i;
    for (i = 0; i < n; i++) {
        if (s == ok[i]) {
            return 1;
        }
    }
    return 0;
}

/* An end with impossible positions: refused when it arrives, or on its
 * first use. */
static void positions(ferry_pipe *boot) {
    ferry_message *m = NULL;
    ferry_pipe *end = NULL;
    unsigned char buf[64];
    size_t len;
    ferry_status got = ferry_recv_message(boot, 10 * SECOND, &m);
    printf("recv_message: %s\n", ferry_status_str((int)got));
    if (got == FERRY_PROTOCOL) {
        return;
    }
    EXPECT(got, FERRY_OK);
    if (got != FERRY_OK) {
        return;
    }
    CHECK(ferry_message_end_count(m) == 1);
    OK(ferry_message_take_end(m, 0, &end));
    ferry_message_close(m);
    if (end == NULL) {
        return;
    }
    {
        ferry_status s = ferry_send(end, "x", 1, 0);
        ferry_status r = ferry_recv(end, buf, sizeof buf, &len, 0);
        printf("the end's first send: %s, receive: %s\n", ferry_status_str((int)s),
               ferry_status_str((int)r));
        EXPECT(s, FERRY_PROTOCOL);
        EXPECT(r, FERRY_PROTOCOL);
    }
    ferry_pipe_close(end);
}

/* A message claiming 32,767 handles: refused within a second. */
static void handles(ferry_pipe *boot) {
    ferry_message *m = NULL;
    long long start = now_ns();
    ferry_status got = ferry_recv_message(boot, 10 * SECOND, &m);
    long long took = now_ns() - start;
    printf("recv_message: %s after %lld ms\n", ferry_status_str((int)got), took / MS);
    EXPECT(got, FERRY_PROTOCOL);
    CHECK(took < SECOND);
    if (got == FERRY_OK) {
        ferry_message_close(m);
    }
}

/* Garbage for ever, after one honest message ("go"): each receive
 * returns within the Rust suite's bounds (20 ms for one that may not wait,
 * 250 ms for a wait of 200 ms), with an error or no message; none ever
 * says it has one. */
static void records(ferry_pipe *boot) {
    static const ferry_status ok[] = {FERRY_WOULD_BLOCK, FERRY_TIMED_OUT, FERRY_PROTOCOL};
    unsigned char buf[256];
    size_t len, ready;
    long long worst_try = 0, worst_wait = 0;
    int i, protocol = 0;
    const ferry_pipe *set[1];
    set[0] = boot;
    OK(ferry_recv(boot, buf, sizeof buf, &len, 10 * SECOND));
    CHECK(len == 2 && memcmp(buf, "go", 2) == 0);
    for (i = 0; i < 200; i++) {
        long long start = now_ns();
        ferry_status s = ferry_recv(boot, buf, sizeof buf, &len, 0);
        long long took = now_ns() - start;
        worst_try = took > worst_try ? took : worst_try;
        CHECK(allowed(s, ok, 3));
        protocol += s == FERRY_PROTOCOL;
    }
    for (i = 0; i < 10; i++) {
        long long start = now_ns();
        ferry_status s = i % 2 == 0 ? ferry_recv(boot, buf, sizeof buf, &len, 200 * MS)
                                    : ferry_poll_many(set, 1, 200 * MS, &ready);
        long long took = now_ns() - start;
        worst_wait = took > worst_wait ? took : worst_wait;
        if (s == FERRY_OK && i % 2 == 1) {
            /* Ready only for the end (the peer broke the rules): the
             * receive says so. */
            s = ferry_recv(boot, buf, sizeof buf, &len, 0);
        }
        CHECK(allowed(s, ok, 3));
        protocol += s == FERRY_PROTOCOL;
    }
    printf("200 receives that may not wait: the slowest %lld ms; 10 waits of 200 ms: the "
           "slowest %lld ms; %d protocol errors\n",
           worst_try / MS, worst_wait / MS, protocol);
    CHECK(worst_try < 20 * MS);
    CHECK(worst_wait < 250 * MS);
}

int main(int argc, char **argv) {
    const char *attack, *warm[2];
    ferry_child *kid;
    ferry_pipe *boot;
    int fds, status;
    if (argc < 3) {
        fprintf(stderr, "usage: %s ATTACK ATTACKER_PROGRAM [ARGS...]\n", argv[0]);
        return 2;
    }
    attack = argv[1];
    /* What ferry keeps for the process's life, made first. */
    warm[0] = "true";
    warm[1] = NULL;
    OK(ferry_spawn(warm, NULL, &kid, &boot));
    OK(ferry_child_wait(kid, 10 * SECOND, NULL));
    ferry_child_close(kid);
    ferry_pipe_close(boot);
    fds = open_fds();

    OK(ferry_spawn((const char *const *)(argv + 2), NULL, &kid, &boot));
    if (strncmp(attack, "positions-", 10) == 0) {
        positions(boot);
    } else if (strcmp(attack, "handles-32767") == 0) {
        handles(boot);
    } else if (strcmp(attack, "records") == 0) {
        records(boot);
    } else {
        fprintf(stderr, "no such attack: %s\n", attack);
        return 2;
    }
    ferry_pipe_close(boot);
    OK(ferry_child_kill(kid));
    OK(ferry_child_wait(kid, 10 * SECOND, &status));
    ferry_child_close(kid);
    CHECK(fds_back_to(fds));
    printf("%s: survived\n", attack);
    return finish("hostile_victim");
}
