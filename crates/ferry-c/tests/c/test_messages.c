/* Messages that carry descriptors and pipe ends, views, loans and the
 * named server: in one process, and across processes (this program
 * started again as `child`, which takes an end and a descriptor from its
 * parent and answers through them, or as `client NAME`, which connects
 * to its parent's server). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

#define MS (1000000LL)
#define SECOND (1000 * MS)

static void descriptors_and_ends_travel(void) {
    ferry_pipe *a, *b, *x, *y, *got_end = NULL;
    ferry_message *m = NULL;
    int fds[2], got_fd = -1, before;
    const void *data;
    size_t len;
    char byte = 0;
    ferry_pipe *ends[1];

    OK(ferry_pipe_new(NULL, &a, &b));
    OK(ferry_pipe_new(NULL, &x, &y));
    CHECK(pipe(fds) == 0);
    before = open_fds();

    /* One descriptor (borrowed: ours stays open) and one end (gone with
     * the message). */
    ends[0] = y;
    OK(ferry_send_message(a, "here", 4, &fds[1], 1, ends, 1, SECOND));
    CHECK(fcntl(fds[1], F_GETFD) != -1);
    OK(ferry_recv_message(b, SECOND, &m));
    OK(ferry_message_data(m, &data, &len));
    CHECK(len == 4 && memcmp(data, "here", 4) == 0);
    CHECK(ferry_message_fd_count(m) == 1);
    CHECK(ferry_message_end_count(m) == 1);
    OK(ferry_message_take_fd(m, 0, &got_fd));
    FAILS(ferry_message_take_fd(m, 0, &got_fd), FERRY_INVALID_ARGUMENT); /* once */
    FAILS(ferry_message_take_fd(m, 1, &got_fd), FERRY_INVALID_ARGUMENT);
    OK(ferry_message_take_end(m, 0, &got_end));
    FAILS(ferry_message_take_end(m, 0, &got_end), FERRY_INVALID_ARGUMENT);
    ferry_message_close(m);
    CHECK((fcntl(got_fd, F_GETFD) & FD_CLOEXEC) != 0);

    /* The descriptor is the same pipe; the end talks to x. */
    CHECK(write(got_fd, "!", 1) == 1);
    CHECK(read(fds[0], &byte, 1) == 1 && byte == '!');
    close(got_fd);
    OK(ferry_send(x, "to y", 4, SECOND));
    OK(ferry_recv_view(got_end, SECOND, &m));
    OK(ferry_message_data(m, &data, &len));
    CHECK(len == 4 && memcmp(data, "to y", 4) == 0);
    CHECK(ferry_message_fd_count(m) == 0 && ferry_message_end_count(m) == 0);
    ferry_message_close(m);
    ferry_pipe_close(got_end);
    ferry_pipe_close(x);
    CHECK(fds_back_to(before));

    /* What cannot be sent: the pipe over itself, an end twice, a bad
     * descriptor. Nothing is taken. */
    OK(ferry_pipe_new(NULL, &x, &y));
    ends[0] = a;
    FAILS(ferry_send_message(a, "x", 1, NULL, 0, ends, 1, 0), FERRY_INVALID_ARGUMENT);
    {
        ferry_pipe *twice[2];
        int bad = 1000000;
        twice[0] = y;
        twice[1] = y;
        FAILS(ferry_send_message(a, "x", 1, NULL, 0, twice, 2, 0), FERRY_INVALID_ARGUMENT);
        FAILS(ferry_send_message(a, "x", 1, &bad, 1, NULL, 0, 0), FERRY_INVALID_ARGUMENT);
        bad = -1;
        FAILS(ferry_send_message(a, "x", 1, &bad, 1, NULL, 0, 0), FERRY_INVALID_ARGUMENT);
        FAILS(ferry_send_message(a, "x", 1, NULL, 1, NULL, 0, 0), FERRY_INVALID_ARGUMENT);
    }
    /* A held message (too large for the last buffer) keeps its end home. */
    OK(ferry_send(x, "0123456789", 10, 0));
    FAILS(ferry_recv(y, NULL, 0, &len, SECOND), FERRY_TOO_LARGE);
    ends[0] = y;
    FAILS(ferry_send_message(a, "x", 1, NULL, 0, ends, 1, 0), FERRY_NOT_TRANSFERABLE);
    OK(ferry_recv_view(y, 0, &m)); /* the held one, as a view */
    OK(ferry_message_data(m, &data, &len));
    CHECK(len == 10);
    ferry_message_close(m);
    /* Now it can go; a failed send (the peer gone) hands it back. */
    ferry_pipe_close(b);
    FAILS(ferry_send_message(a, "x", 1, NULL, 0, ends, 1, SECOND), FERRY_DISCONNECTED);
    OK(ferry_send(y, "still mine", 10, 0));
    FAILS(ferry_recv(x, NULL, 0, &len, SECOND), FERRY_TOO_LARGE);
    CHECK(len == 10);
    ferry_pipe_close(y);
    ferry_pipe_close(x);
    ferry_pipe_close(a);
    close(fds[0]);
    close(fds[1]);
    FAILS(ferry_message_data(NULL, &data, &len), FERRY_INVALID_ARGUMENT);
    CHECK(ferry_message_fd_count(NULL) == 0);
    ferry_message_close(NULL);
}

static void loans_and_views(void) {
    ferry_pipe *a, *b;
    ferry_loan *loan = NULL;
    ferry_message *m;
    void *room;
    const void *data;
    size_t len, i;
    OK(ferry_pipe_new(NULL, &a, &b));
    OK(ferry_loan_new(a, 100000, &loan));
    OK(ferry_loan_data(loan, &room, &len));
    CHECK(len == 100000);
    for (i = 0; i < len; i++) {
        ((unsigned char *)room)[i] = (unsigned char)(i % 251);
    }
    OK(ferry_loan_commit(loan));
    OK(ferry_recv_view(b, SECOND, &m));
    OK(ferry_message_data(m, &data, &len));
    CHECK(len == 100000);
    for (i = 0; i < len; i++) {
        if (((const unsigned char *)data)[i] != (unsigned char)(i % 251)) {
            CHECK(!"the view differs from what the loan wrote");
            break;
        }
    }
    ferry_message_close(m);
    /* An aborted loan sends nothing. */
    OK(ferry_loan_new(a, 10, &loan));
    ferry_loan_abort(loan);
    FAILS(ferry_recv_view(b, 0, &m), FERRY_WOULD_BLOCK);
    ferry_loan_abort(NULL);
    FAILS(ferry_loan_commit(NULL), FERRY_INVALID_ARGUMENT);
    FAILS(ferry_loan_new(a, 10, NULL), FERRY_INVALID_ARGUMENT);
    /* A loan over the limit is refused. */
    OK(ferry_pipe_set_max_message(a, 1000));
    FAILS(ferry_loan_new(a, 1001, &loan), FERRY_TOO_LARGE);
    ferry_pipe_close(a);
    ferry_pipe_close(b);
}

/* The child: takes an end and a descriptor from its parent, writes to the
 * descriptor, answers through the end, and echoes one view. */
static int child(void) {
    ferry_pipe *parent, *end;
    ferry_message *m;
    const void *data;
    size_t len;
    int fd;
    if (ferry_from_parent(&parent) != FERRY_OK ||
        ferry_recv_message(parent, 10 * SECOND, &m) != FERRY_OK ||
        ferry_message_take_end(m, 0, &end) != FERRY_OK ||
        ferry_message_take_fd(m, 0, &fd) != FERRY_OK) {
        fprintf(stderr, "child: %s\n", ferry_last_error());
        return 2;
    }
    ferry_message_close(m);
    if (write(fd, "from the child", 14) != 14) {
        return 3;
    }
    close(fd);
    if (ferry_send(end, "through the end", 15, SECOND) != FERRY_OK) {
        return 4;
    }
    ferry_pipe_close(end);
    /* A 1 MiB view, echoed from where it lies. */
    if (ferry_recv_view(parent, 10 * SECOND, &m) != FERRY_OK ||
        ferry_message_data(m, &data, &len) != FERRY_OK ||
        ferry_send(parent, data, len, 10 * SECOND) != FERRY_OK) {
        return 5;
    }
    ferry_message_close(m);
    ferry_pipe_close(parent);
    return 0;
}

static void across_processes(char *self) {
    static unsigned char big[1 << 20];
    const char *argv[3];
    ferry_child *kid;
    ferry_pipe *to_child, *x, *y, *ends[1];
    ferry_message *m;
    ferry_loan *loan;
    void *room;
    const void *data;
    size_t len;
    int fds[2], status = -1;
    char text[32];
    argv[0] = self;
    argv[1] = "child";
    argv[2] = NULL;
    OK(ferry_spawn(argv, NULL, &kid, &to_child));
    OK(ferry_pipe_new(NULL, &x, &y));
    CHECK(pipe(fds) == 0);
    ends[0] = y;
    OK(ferry_send_message(to_child, "take these", 10, &fds[1], 1, ends, 1, 10 * SECOND));
    close(fds[1]);
    CHECK(read(fds[0], text, 14) == 14 && memcmp(text, "from the child", 14) == 0);
    close(fds[0]);
    OK(ferry_recv(x, text, sizeof text, &len, 10 * SECOND));
    CHECK(len == 15 && memcmp(text, "through the end", 15) == 0);
    ferry_pipe_close(x);
    /* 1 MiB written in a loan, read by the child in place and echoed;
     * the echo read in place here. */
    OK(ferry_loan_new(to_child, sizeof big, &loan));
    OK(ferry_loan_data(loan, &room, &len));
    memset(room, 0x5a, len);
    memset(big, 0x5a, sizeof big);
    OK(ferry_loan_commit(loan));
    OK(ferry_recv_view(to_child, 10 * SECOND, &m));
    OK(ferry_message_data(m, &data, &len));
    CHECK(len == sizeof big && memcmp(data, big, len) == 0);
    ferry_message_close(m);
    ferry_pipe_close(to_child);
    OK(ferry_child_wait(kid, 10 * SECOND, &status));
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    ferry_child_close(kid);
}

/* A client: connects to NAME (with the token in hex, if given), says
 * hello, and expects its words back in capitals; or, with `refused`,
 * expects to be turned away. */
static int client(const char *name, const char *hex, int refused) {
    ferry_pipe *pipe;
    uint8_t token[FERRY_TOKEN_LEN];
    char reply[16];
    size_t len, i;
    if (hex != NULL && hex[0] == '\0') {
        hex = NULL; /* no token */
    }
    for (i = 0; hex != NULL && i < FERRY_TOKEN_LEN; i++) {
        unsigned v;
        if (sscanf(hex + 2 * i, "%2x", &v) != 1) {
            return 2;
        }
        token[i] = (uint8_t)v;
    }
    if (refused) {
        ferry_status s = ferry_connect(name, hex != NULL ? token : NULL, 10 * SECOND, &pipe);
        if (s != FERRY_REFUSED) {
            fprintf(stderr, "client: %s, not refused\n", ferry_status_str((int)s));
            return 5;
        }
        return 0;
    }
    if (ferry_connect(name, hex != NULL ? token : NULL, 10 * SECOND, &pipe) != FERRY_OK) {
        fprintf(stderr, "client: %s\n", ferry_last_error());
        return 3;
    }
    if (ferry_send(pipe, "hello", 5, SECOND) != FERRY_OK ||
        ferry_recv(pipe, reply, sizeof reply, &len, 10 * SECOND) != FERRY_OK || len != 5 ||
        memcmp(reply, "HELLO", 5) != 0) {
        return 4;
    }
    ferry_pipe_close(pipe);
    return 0;
}

static void a_named_server(char *self) {
    char name[64], hex[2 * FERRY_TOKEN_LEN + 1];
    const char *argv[6];
    uint8_t token[FERRY_TOKEN_LEN], wrong[FERRY_TOKEN_LEN];
    ferry_server *server;
    ferry_pipe *p = NULL;
    ferry_credentials who;
    ferry_child *kids[3];
    ferry_pipe *unused[3];
    int fd, i, status, before;
    size_t len, k;
    char buf[16];

    snprintf(name, sizeof name, "ferry-c-test-%ld", (long)getpid());
    OK(ferry_token_new(token));
    for (k = 0; k < FERRY_TOKEN_LEN; k++) {
        snprintf(hex + 2 * k, 3, "%02x", token[k]);
    }
    OK(ferry_server_bind(name, token, &server));
    {
        ferry_server *second = NULL;
        FAILS(ferry_server_bind(name, NULL, &second), FERRY_IO); /* the name is taken */
        CHECK(second == NULL);
    }
    OK(ferry_server_ready_fd(server, &fd));
    CHECK(fd >= 0);
    FAILS(ferry_server_accept(server, 0, &p, NULL), FERRY_WOULD_BLOCK);
    FAILS(ferry_server_accept(server, 5 * MS, &p, NULL), FERRY_TIMED_OUT);
    before = open_fds();

    /* Three clients with the token, each served in turn. */
    argv[0] = self;
    argv[1] = "client";
    argv[2] = name;
    argv[3] = hex;
    argv[4] = NULL;
    for (i = 0; i < 3; i++) {
        OK(ferry_spawn(argv, NULL, &kids[i], &unused[i]));
    }
    for (i = 0; i < 3; i++) {
        memset(&who, 0xff, sizeof who);
        OK(ferry_server_accept(server, 10 * SECOND, &p, &who));
        CHECK(who.uid == (uint32_t)getuid() && who.pid != 0);
        OK(ferry_recv(p, buf, sizeof buf, &len, 10 * SECOND));
        CHECK(len == 5);
        for (k = 0; k < len; k++) {
            buf[k] = (char)(buf[k] - 'a' + 'A');
        }
        OK(ferry_send(p, buf, len, SECOND));
        ferry_pipe_close(p);
    }
    for (i = 0; i < 3; i++) {
        OK(ferry_child_wait(kids[i], 10 * SECOND, &status));
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        ferry_child_close(kids[i]);
        ferry_pipe_close(unused[i]);
    }
    CHECK(fds_back_to(before));

    /* A client with a wrong token is turned away (the accept skips it and
     * times out); so is one with none. */
    memcpy(wrong, token, sizeof wrong);
    wrong[0] ^= 1;
    for (k = 0; k < FERRY_TOKEN_LEN; k++) {
        snprintf(hex + 2 * k, 3, "%02x", wrong[k]);
    }
    argv[4] = "refused";
    argv[5] = NULL;
    OK(ferry_spawn(argv, NULL, &kids[0], &unused[0]));
    argv[3] = "";
    OK(ferry_spawn(argv, NULL, &kids[1], &unused[1]));
    FAILS(ferry_server_accept(server, 2 * SECOND, &p, NULL), FERRY_TIMED_OUT);
    for (i = 0; i < 2; i++) {
        OK(ferry_child_wait(kids[i], 10 * SECOND, &status));
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        ferry_child_close(kids[i]);
        ferry_pipe_close(unused[i]);
    }
    ferry_server_close(server);
    /* No server there any more. */
    FAILS(ferry_connect(name, token, SECOND, &p), FERRY_DISCONNECTED);
    FAILS(ferry_connect(NULL, NULL, 0, &p), FERRY_INVALID_ARGUMENT);
    FAILS(ferry_connect("", NULL, 0, &p), FERRY_INVALID_ARGUMENT);
    FAILS(ferry_server_bind(NULL, NULL, &server), FERRY_INVALID_ARGUMENT);
    ferry_server_close(NULL);
}

int main(int argc, char **argv) {
    int fds;
    if (argc >= 2 && strcmp(argv[1], "child") == 0) {
        return child();
    }
    if (argc >= 3 && strcmp(argv[1], "client") == 0) {
        return client(argv[2], argc >= 4 ? argv[3] : NULL, argc >= 5);
    }
    descriptors_and_ends_travel();
    loans_and_views();
    across_processes(argv[0]);
    fds = open_fds();
    a_named_server(argv[0]);
    across_processes(argv[0]);
    CHECK(fds_back_to(fds));
    return finish("test_messages");
}
