/* ferry from C: a parent starts itself again as a child with a pipe to
 * it, sends a few messages, and prints the child's replies.
 *
 *     cc -o echo echo.c $(pkg-config --cflags --libs ferry)
 *     ./echo
 */
#include <stdio.h>
#include <string.h>

#include "ferry.h"

#define SECOND 1000000000LL

static int child(void) {
    ferry_pipe *pipe;
    char buf[256];
    size_t len;
    ferry_status s;
    if (ferry_from_parent(&pipe) != FERRY_OK) {
        fprintf(stderr, "child: %s\n", ferry_last_error());
        return 1;
    }
    /* Echo until the parent hangs up (FERRY_DISCONNECTED). */
    while ((s = ferry_recv(pipe, buf, sizeof buf, &len, -1)) == FERRY_OK) {
        if (ferry_send(pipe, buf, len, -1) != FERRY_OK) {
            break;
        }
    }
    ferry_pipe_close(pipe);
    return s == FERRY_DISCONNECTED ? 0 : 1;
}

int main(int argc, char **argv) {
    const char *args[3];
    const char *words[] = {"one", "two", "three"};
    ferry_child *kid;
    ferry_pipe *pipe;
    char buf[256];
    size_t i, len;
    int status;
    if (argc > 1 && strcmp(argv[1], "child") == 0) {
        return child();
    }
    args[0] = argv[0];
    args[1] = "child";
    args[2] = NULL;
    if (ferry_spawn(args, NULL, &kid, &pipe) != FERRY_OK) {
        fprintf(stderr, "spawn: %s\n", ferry_last_error());
        return 1;
    }
    for (i = 0; i < 3; i++) {
        ferry_status s = ferry_send(pipe, words[i], strlen(words[i]), SECOND);
        if (s == FERRY_OK) {
            s = ferry_recv(pipe, buf, sizeof buf - 1, &len, SECOND);
        }
        if (s != FERRY_OK) {
            fprintf(stderr, "%s: %s\n", ferry_status_str((int)s), ferry_last_error());
            return 1;
        }
        buf[len] = '\0';
        printf("sent %s, got %s back\n", words[i], buf);
    }
    ferry_pipe_close(pipe); /* the child sees FERRY_DISCONNECTED and exits */
    if (ferry_child_wait(kid, 5 * SECOND, &status) != FERRY_OK || status != 0) {
        fprintf(stderr, "the child did not exit cleanly\n");
        return 1;
    }
    ferry_child_close(kid);
    return 0;
}
