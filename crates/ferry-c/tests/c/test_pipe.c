/* Every call of a pipe in one process: success and error paths, the
 * option structs' size rule, the level-triggered descriptor, and the
 * descriptor count after every error path. */
#define _POSIX_C_SOURCE 200809L
#include <poll.h>
#include <stdint.h>

#include "check.h"

#define MS (1000000LL)

static ferry_pipe *a, *b;

static int readable(int fd) {
    struct pollfd p;
    p.fd = fd;
    p.events = POLLIN;
    p.revents = 0;
    return poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

static void versions_and_words(void) {
    int s;
    CHECK(ferry_abi_version() >> 16 == FERRY_ABI_MAJOR);
    CHECK((ferry_abi_version() & 0xffff) >= FERRY_ABI_MINOR);
    for (s = FERRY_OK; s <= FERRY_REFUSED; s++) {
        CHECK(strncmp(ferry_status_str(s), "FERRY_", 6) == 0);
    }
    CHECK(strcmp(ferry_status_str(-1), "not a ferry status") == 0);
    CHECK(strcmp(ferry_status_str(12), "not a ferry status") == 0);
}

static void options_follow_the_size_rule(void) {
    ferry_pipe *x = NULL, *y = NULL;
    ferry_pipe_options o;
    unsigned char longer[sizeof(ferry_pipe_options) + 16];
    int fds = open_fds();

    /* NULL: the defaults. */
    OK(ferry_pipe_new(NULL, &x, &y));
    ferry_pipe_close(x);
    ferry_pipe_close(y);

    /* Only `size`: a shorter struct, zero-extended. */
    memset(&o, 0, sizeof o);
    o.size = sizeof(size_t);
    o.ring_size = 12345; /* past the size: not read */
    OK(ferry_pipe_new(&o, &x, &y));
    ferry_pipe_close(x);
    ferry_pipe_close(y);

    /* A longer struct whose unknown tail is zero. */
    memset(longer, 0, sizeof longer);
    ((ferry_pipe_options *)(void *)longer)->size = sizeof longer;
    OK(ferry_pipe_new((ferry_pipe_options *)(void *)longer, &x, &y));
    ferry_pipe_close(x);
    ferry_pipe_close(y);

    /* ... and one that sets an unknown byte: refused. */
    longer[sizeof(ferry_pipe_options) + 3] = 1;
    x = y = NULL;
    FAILS(ferry_pipe_new((ferry_pipe_options *)(void *)longer, &x, &y), FERRY_INVALID_ARGUMENT);
    CHECK(x == NULL && y == NULL);

    /* A size of 0, and a ring that is not a power of two. */
    memset(&o, 0, sizeof o);
    FAILS(ferry_pipe_new(&o, &x, &y), FERRY_INVALID_ARGUMENT);
    o.size = sizeof o;
    o.ring_size = 5000;
    FAILS(ferry_pipe_new(&o, &x, &y), FERRY_INVALID_ARGUMENT);

    /* A small ring works. */
    o.ring_size = 4096;
    OK(ferry_pipe_new(&o, &x, &y));
    ferry_pipe_close(x);
    ferry_pipe_close(y);

    /* NULL out parameters. */
    FAILS(ferry_pipe_new(NULL, NULL, &y), FERRY_INVALID_ARGUMENT);
    FAILS(ferry_pipe_new(NULL, &x, NULL), FERRY_INVALID_ARGUMENT);
    CHECK(open_fds() == fds);
}

static void bytes_go_both_ways(void) {
    static unsigned char big[1 << 20], back[1 << 20];
    unsigned char small[16];
    size_t len = 99, i;
    int fds;

    for (i = 0; i < sizeof big; i++) {
        big[i] = (unsigned char)(i * 7 + 3);
    }
    /* 0 B, 12 B, 200,000 B, each way. (In one process a large message
     * goes through the ring while its receiver reads: 1 MiB is
     * test_processes.c's, across processes.) */
    OK(ferry_send(a, NULL, 0, -1));
    OK(ferry_recv(b, small, sizeof small, &len, -1));
    CHECK(len == 0);
    OK(ferry_send(b, "hello, ferry", 12, -1));
    OK(ferry_recv(a, small, sizeof small, &len, 5000 * MS));
    CHECK(len == 12 && memcmp(small, "hello, ferry", 12) == 0);
    OK(ferry_send(a, big, 200000, -1));
    OK(ferry_recv(b, back, sizeof back, &len, -1));
    CHECK(len == 200000 && memcmp(big, back, len) == 0);

    /* From here on, only error paths and small messages: no descriptor
     * may be left behind (the doorbell is made by the first poll). */
    EXPECT(ferry_poll(a, 0), FERRY_WOULD_BLOCK);
    EXPECT(ferry_poll(b, 0), FERRY_WOULD_BLOCK);
    fds = open_fds();

    /* Too small a buffer: the size needed, and nothing lost. */
    OK(ferry_send(a, big, 1000, -1));
    FAILS(ferry_recv(b, small, sizeof small, &len, -1), FERRY_TOO_LARGE);
    CHECK(len == 1000);
    FAILS(ferry_recv(b, NULL, 0, &len, 0), FERRY_TOO_LARGE);
    CHECK(len == 1000);
    OK(ferry_poll(b, 0)); /* the held message is ready */
    OK(ferry_recv(b, back, sizeof back, &len, 0));
    CHECK(len == 1000 && memcmp(big, back, 1000) == 0);

    /* Nothing there: would block, or times out. */
    FAILS(ferry_recv(b, back, sizeof back, &len, 0), FERRY_WOULD_BLOCK);
    FAILS(ferry_recv(b, back, sizeof back, &len, 2 * MS), FERRY_TIMED_OUT);
    FAILS(ferry_poll(b, 0), FERRY_WOULD_BLOCK);
    FAILS(ferry_poll(b, 2 * MS), FERRY_TIMED_OUT);

    /* Bad arguments. */
    FAILS(ferry_send(NULL, "x", 1, 0), FERRY_INVALID_ARGUMENT);
    FAILS(ferry_send(a, NULL, 1, 0), FERRY_INVALID_ARGUMENT);
    FAILS(ferry_send(a, "x", SIZE_MAX, 0), FERRY_INVALID_ARGUMENT);
    FAILS(ferry_recv(NULL, back, 1, &len, 0), FERRY_INVALID_ARGUMENT);
    FAILS(ferry_recv(b, NULL, 10, &len, 0), FERRY_INVALID_ARGUMENT);
    FAILS(ferry_recv(b, back, 10, NULL, 0), FERRY_INVALID_ARGUMENT);
    FAILS(ferry_poll(NULL, 0), FERRY_INVALID_ARGUMENT);

    /* Over the limit: refused, nothing sent. */
    OK(ferry_pipe_set_max_message(a, 100));
    FAILS(ferry_send(a, big, 101, 0), FERRY_TOO_LARGE);
    OK(ferry_pipe_set_max_message(a, 1 << 20));
    FAILS(ferry_recv(b, back, sizeof back, &len, 0), FERRY_WOULD_BLOCK);

    /* A success clears the last error. */
    OK(ferry_send(a, "y", 1, 0));
    CHECK(strlen(ferry_last_error()) == 0);
    OK(ferry_recv(b, back, sizeof back, &len, 0));
    CHECK(open_fds() == fds);
}

static void a_full_pipe_would_block(void) {
    ferry_pipe *x, *y;
    ferry_pipe_options o;
    unsigned char chunk[1000], back[1000];
    size_t len;
    int sent = 0;
    memset(&o, 0, sizeof o);
    o.size = sizeof o;
    o.ring_size = 4096;
    memset(chunk, 1, sizeof chunk);
    OK(ferry_pipe_new(&o, &x, &y));
    while (ferry_send(x, chunk, sizeof chunk, 0) == FERRY_OK) {
        sent++;
        CHECK(sent < 100);
        if (sent >= 100) {
            break;
        }
    }
    CHECK(sent > 0);
    FAILS(ferry_send(x, chunk, sizeof chunk, 0), FERRY_WOULD_BLOCK);
    FAILS(ferry_send(x, chunk, sizeof chunk, 2 * MS), FERRY_TIMED_OUT);
    /* Everything sent arrives. */
    while (sent-- > 0) {
        OK(ferry_recv(y, back, sizeof back, &len, 0));
        CHECK(len == sizeof chunk);
    }
    ferry_pipe_close(x);
    ferry_pipe_close(y);
}

static void the_descriptor_is_level_triggered(void) {
    unsigned char buf[16];
    size_t len;
    int fd = -1, again = -2;
    OK(ferry_ready_fd(b, &fd));
    OK(ferry_ready_fd(b, &again));
    CHECK(fd >= 0 && fd == again);
    FAILS(ferry_ready_fd(b, NULL), FERRY_INVALID_ARGUMENT);
    CHECK(!readable(fd));
    OK(ferry_send(a, "one", 3, 0));
    OK(ferry_send(a, "two", 3, 0));
    OK(ferry_poll(b, 1000 * MS));
    CHECK(readable(fd));
    OK(ferry_recv(b, buf, sizeof buf, &len, 0));
    CHECK(len == 3 && memcmp(buf, "one", 3) == 0);
    CHECK(readable(fd)); /* still: a message is there */
    OK(ferry_recv(b, buf, sizeof buf, &len, 0));
    CHECK(len == 3 && memcmp(buf, "two", 3) == 0);
    CHECK(!readable(fd)); /* a receive would wait */
}

static void many_are_waited_on_at_once(void) {
    ferry_pipe *tx[3], *rx[3];
    const ferry_pipe *set[3];
    unsigned char buf[16];
    size_t i, ready = 99, len;
    for (i = 0; i < 3; i++) {
        OK(ferry_pipe_new(NULL, &tx[i], &rx[i]));
        set[i] = rx[i];
    }
    FAILS(ferry_poll_many(set, 3, 0, &ready), FERRY_WOULD_BLOCK);
    FAILS(ferry_poll_many(set, 3, 2 * MS, &ready), FERRY_TIMED_OUT);
    OK(ferry_send(tx[2], "two", 3, 0));
    OK(ferry_poll_many(set, 3, 1000 * MS, &ready));
    CHECK(ready == 2);
    OK(ferry_send(tx[1], "one", 3, 0));
    OK(ferry_poll_many(set, 3, 0, &ready));
    CHECK(ready == 1); /* the first ready, in the array's order */
    OK(ferry_recv(rx[1], buf, sizeof buf, &len, 0));
    OK(ferry_poll_many(set, 3, 0, &ready));
    CHECK(ready == 2);
    /* A message held for a larger buffer makes its end ready. */
    OK(ferry_send(tx[0], "0123456789", 10, 0));
    FAILS(ferry_recv(rx[0], buf, 4, &len, 0), FERRY_TOO_LARGE);
    OK(ferry_poll_many(set, 3, 0, &ready));
    CHECK(ready == 0);
    FAILS(ferry_poll_many(set, 0, 0, &ready), FERRY_INVALID_ARGUMENT);
    FAILS(ferry_poll_many(NULL, 3, 0, &ready), FERRY_INVALID_ARGUMENT);
    FAILS(ferry_poll_many(set, 3, 0, NULL), FERRY_INVALID_ARGUMENT);
    for (i = 0; i < 3; i++) {
        ferry_pipe_close(tx[i]);
        ferry_pipe_close(rx[i]);
    }
}

static void the_end_drains_then_disconnects(void) {
    unsigned char buf[16];
    size_t len;
    int fd;
    OK(ferry_ready_fd(b, &fd));
    OK(ferry_send(a, "last", 4, 0));
    ferry_pipe_close(a);
    OK(ferry_recv(b, buf, sizeof buf, &len, 0)); /* what was sent first */
    CHECK(len == 4 && memcmp(buf, "last", 4) == 0);
    FAILS(ferry_recv(b, buf, sizeof buf, &len, -1), FERRY_DISCONNECTED);
    FAILS(ferry_recv(b, buf, sizeof buf, &len, 0), FERRY_DISCONNECTED);
    OK(ferry_poll(b, 0)); /* the end is readable, for good */
    CHECK(readable(fd));
    FAILS(ferry_send(b, "x", 1, -1), FERRY_DISCONNECTED);
    ferry_pipe_close(b);
    ferry_pipe_close(NULL);
}

int main(void) {
    int fds;
    /* A first pipe makes what ferry keeps for the process's life. */
    OK(ferry_pipe_new(NULL, &a, &b));
    ferry_pipe_close(a);
    ferry_pipe_close(b);
    fds = open_fds();
    versions_and_words();
    options_follow_the_size_rule();
    OK(ferry_pipe_new(NULL, &a, &b));
    bytes_go_both_ways();
    a_full_pipe_would_block();
    the_descriptor_is_level_triggered();
    many_are_waited_on_at_once();
    the_end_drains_then_disconnects();
    CHECK(open_fds() == fds);
    return finish("test_pipe");
}
