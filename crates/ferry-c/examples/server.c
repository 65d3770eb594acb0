/* ferry from C: a named server with clients. The server makes a token,
 * listens under a name, and starts three clients (this program again);
 * each connects with the token, sends its number, and gets it back
 * doubled.
 *
 *     cc -o server server.c $(pkg-config --cflags --libs ferry)
 *     ./server
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "ferry.h"

#define SECOND 1000000000LL

static int fail(const char *what) {
    fprintf(stderr, "%s: %s\n", what, ferry_last_error());
    return 1;
}

/* A client: NAME and the token in hex on the command line. */
static int client(const char *name, const char *hex, int n) {
    uint8_t token[FERRY_TOKEN_LEN];
    ferry_pipe *pipe;
    int doubled = 0;
    size_t i, len;
    for (i = 0; i < FERRY_TOKEN_LEN; i++) {
        unsigned v = 0;
        sscanf(hex + 2 * i, "%2x", &v);
        token[i] = (uint8_t)v;
    }
    if (ferry_connect(name, token, 5 * SECOND, &pipe) != FERRY_OK) {
        return fail("connect");
    }
    if (ferry_send(pipe, &n, sizeof n, SECOND) != FERRY_OK ||
        ferry_recv(pipe, &doubled, sizeof doubled, &len, 5 * SECOND) != FERRY_OK) {
        return fail("client");
    }
    printf("client %d got %d\n", n, doubled);
    ferry_pipe_close(pipe);
    return doubled == 2 * n ? 0 : 1;
}

int main(int argc, char **argv) {
    uint8_t token[FERRY_TOKEN_LEN];
    char name[64], hex[2 * FERRY_TOKEN_LEN + 1], number[16];
    const char *args[6];
    ferry_server *server;
    ferry_child *kids[3];
    ferry_pipe *unused[3];
    int i, status, failed = 0;
    size_t k;
    if (argc == 5 && strcmp(argv[1], "client") == 0) {
        return client(argv[2], argv[3], argv[4][0] - '0');
    }
    snprintf(name, sizeof name, "ferry-example-%ld", (long)getpid());
    if (ferry_token_new(token) != FERRY_OK || ferry_server_bind(name, token, &server) != FERRY_OK) {
        return fail("server");
    }
    for (k = 0; k < FERRY_TOKEN_LEN; k++) {
        snprintf(hex + 2 * k, 3, "%02x", token[k]);
    }
    for (i = 0; i < 3; i++) {
        snprintf(number, sizeof number, "%d", i + 1);
        args[0] = argv[0];
        args[1] = "client";
        args[2] = name;
        args[3] = hex;
        args[4] = number;
        args[5] = NULL;
        if (ferry_spawn(args, NULL, &kids[i], &unused[i]) != FERRY_OK) {
            return fail("spawn");
        }
    }
    for (i = 0; i < 3; i++) {
        ferry_pipe *pipe;
        ferry_credentials who;
        int n;
        size_t len;
        if (ferry_server_accept(server, 5 * SECOND, &pipe, &who) != FERRY_OK ||
            ferry_recv(pipe, &n, sizeof n, &len, 5 * SECOND) != FERRY_OK) {
            return fail("accept");
        }
        printf("server: client %d is process %u of user %u\n", n, who.pid, who.uid);
        n *= 2;
        ferry_send(pipe, &n, sizeof n, SECOND);
        ferry_pipe_close(pipe);
    }
    for (i = 0; i < 3; i++) {
        if (ferry_child_wait(kids[i], 5 * SECOND, &status) != FERRY_OK || status != 0) {
            failed = 1;
        }
        ferry_child_close(kids[i]);
        ferry_pipe_close(unused[i]);
    }
    ferry_server_close(server);
    return failed;
}
