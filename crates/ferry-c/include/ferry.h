/*
 * ferry.h: the C ABI of ferry, messages between processes on one machine
 * through shared memory. Made by cbindgen from crates/ferry-c/src/abi.rs;
 * do not edit (crates/ferry-c/tests/header.rs says how to remake it).
 *
 * Every call returns a ferry_status (FERRY_OK is 0) unless it says
 * otherwise; after a failure, ferry_last_error() says what happened.
 * Handles are opaque, made only by ferry and freed only by their _close.
 * Every call is thread-safe, except a _close on a handle another thread
 * is using. A timeout is in nanoseconds: 0 never waits, a negative one
 * waits for ever.
 */

#ifndef FERRY_H
#define FERRY_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

// The ABI's major version: the `N` of `libferry.so.N`. A program built
// against another major version cannot use this library.
#define FERRY_ABI_MAJOR 0

// The ABI's minor version: raised by every addition.
#define FERRY_ABI_MINOR 2

// The length of a token: 32 bytes (256 bits).
#define FERRY_TOKEN_LEN 32

// What a call did. Every call that can fail returns one; `FERRY_OK` is 0.
// After any other, `ferry_last_error()` says what happened in words.
typedef enum {
  // Done.
  FERRY_OK = 0,
  // A call that may not wait (timeout 0) would have had to.
  FERRY_WOULD_BLOCK = 1,
  // The timeout passed first.
  FERRY_TIMED_OUT = 2,
  // The peer is gone, and everything it sent has been received.
  FERRY_DISCONNECTED = 3,
  // The peer broke the rules (its pipe is shut down); nothing of this
  // process was touched.
  FERRY_PROTOCOL = 4,
  // The message is larger than the buffer (the size needed is written
  // back and the message stays, to be received next) or than the pipe's
  // limit.
  FERRY_TOO_LARGE = 5,
  // An argument is NULL where it may not be, or out of range.
  FERRY_INVALID_ARGUMENT = 6,
  // A pipe end in a message cannot travel.
  FERRY_NOT_TRANSFERABLE = 7,
  // This process's own failure (out of descriptors, of memory):
  // `ferry_last_os_error()` gives the `errno`.
  FERRY_IO = 8,
  // Not on this system.
  FERRY_UNSUPPORTED = 9,
  // A fault inside ferry (a bug): please report it with
  // `ferry_last_error()`.
  FERRY_INTERNAL = 10,
  // The server turned this client away (a wrong token, or a server of
  // another user).
  FERRY_REFUSED = 11,
} ferry_status;

// A child process started by `ferry_spawn`. Freed by `ferry_child_close`
// (which neither waits for nor kills the process).
typedef struct ferry_child ferry_child;

// Room for one message of a fixed length, lent by ferry (a block of the
// link's shared memory for a large one, which the receiver then reads in
// place): write it through `ferry_loan_data`, then `ferry_loan_commit`
// sends it or `ferry_loan_abort` drops it; either frees the loan.
typedef struct ferry_loan ferry_loan;

// A received message: `ferry_message_data` gives its bytes, which stay
// valid (and, for a view, in place in shared memory) until
// `ferry_message_close`; its descriptors and pipe ends are taken one by
// one (`ferry_message_take_fd`, `ferry_message_take_end`); close frees
// what was not taken.
typedef struct ferry_message ferry_message;

// One end of a pipe: it sends to, and receives from, the other end (or,
// for a half that came in a message, only one of the two). Made by
// `ferry_pipe_new`, `ferry_spawn`, `ferry_from_parent`, `ferry_connect`,
// `ferry_server_accept`, `ferry_message_take_end`; freed by
// `ferry_pipe_close`, or by a send that carries it away.
typedef struct ferry_pipe ferry_pipe;

// A named server: clients connect to it by name (`ferry_connect`) and
// each accepted one is a pipe. Freed by `ferry_server_close`, which frees
// the name.
typedef struct ferry_server ferry_server;

// Options for a new pipe (`ferry_pipe_new`, `ferry_spawn`). Set `size`
// to `sizeof(ferry_pipe_options)` and every field you do not set to 0
// (its default): `ferry_pipe_options o = { sizeof o };` then the fields.
// A NULL pointer means every default.
typedef struct {
  // `sizeof(ferry_pipe_options)` as the caller's header has it.
  size_t size;
  // Each direction's ring, in bytes (a power of two from 4 KiB; 0: the
  // default, 256 KiB).
  size_t ring_size;
  // The largest message either end sends or accepts (0: the default,
  // 256 MiB); a peer that sends a larger one broke the rules.
  size_t max_message;
} ferry_pipe_options;

// Who a client is, as the kernel recorded it when it connected.
typedef struct {
  // Its process id; 0 when it is outside this process's pid namespace.
  uint32_t pid;
  // Its effective user id.
  uint32_t uid;
  // Its effective group id.
  uint32_t gid;
} ferry_credentials;

#ifdef __cplusplus
extern "C" {
#endif // __cplusplus

// This library's ABI version: `FERRY_ABI_MAJOR << 16 | FERRY_ABI_MINOR`.
// A program can use it if the major versions are equal and the library's
// minor version is at least the header's.
uint32_t ferry_abi_version(void);

// The name and meaning of a status (any `int`: an unknown one says so).
// The string is static.
const char *ferry_status_str(int status);

// What the last failed call on this thread said, NUL-terminated ("" after
// a call that succeeded). Valid until this thread's next ferry call.
const char *ferry_last_error(void);

// The `errno` of this thread's last `FERRY_IO` status (0 otherwise).
int ferry_last_os_error(void);

// Makes a pipe: `*a` and `*b` are its two ends, each sending to the
// other. `options` may be NULL (every default).
//
// # Safety
//
// `options` is NULL or a `ferry_pipe_options` with its `size` set; `a`
// and `b` are writable.
ferry_status ferry_pipe_new(const ferry_pipe_options *options, ferry_pipe **a, ferry_pipe **b);

// Closes an end (NULL: nothing): the peer's receives then end with
// `FERRY_DISCONNECTED` once they have taken everything sent. No other
// thread may be using `pipe`.
//
// # Safety
//
// `pipe` is NULL or an end not yet closed; it is not used again.
void ferry_pipe_close(ferry_pipe *pipe);

// Sends `len` bytes (a copy: `data` is the caller's again on return),
// waiting up to `timeout_ns` while the pipe is full (`FERRY_WOULD_BLOCK`
// for 0, `FERRY_TIMED_OUT` after). `FERRY_TOO_LARGE` over the pipe's
// limit, `FERRY_DISCONNECTED` once the peer is gone.
//
// # Safety
//
// `pipe` is an end not closed; `data` is NULL (with `len` 0) or `len`
// readable bytes.
ferry_status ferry_send(const ferry_pipe *pipe, const void *data, size_t len, int64_t timeout_ns);

// Receives the next message into `buf` (`cap` bytes), writing its length
// to `*len`. If it is longer than `cap`: `FERRY_TOO_LARGE`, `*len` is its
// length, and it stays, to be received next (by a call with a larger
// buffer). Waits up to `timeout_ns` for a message (`FERRY_WOULD_BLOCK` for
// 0, `FERRY_TIMED_OUT` after); `FERRY_DISCONNECTED` once the peer is gone
// and everything it sent was received.
//
// # Safety
//
// `pipe` is an end not closed; `buf` is NULL (with `cap` 0) or `cap`
// writable bytes; `len` is writable.
ferry_status ferry_recv(const ferry_pipe *pipe,
                        void *buf,
                        size_t cap,
                        size_t *len,
                        int64_t timeout_ns);

// Whether a receive would not wait, waiting up to `timeout_ns` for that:
// `FERRY_OK` if so (a message, or the peer gone), `FERRY_WOULD_BLOCK` (0)
// or `FERRY_TIMED_OUT` if not.
//
// # Safety
//
// `pipe` is an end not closed.
ferry_status ferry_poll(const ferry_pipe *pipe, int64_t timeout_ns);

// Waits up to `timeout_ns` until a receive on one of the `count` ends in
// `pipes` would not wait: `FERRY_OK` with `*ready` the index of the first
// such (in the array's order: put the one to favour first), or
// `FERRY_WOULD_BLOCK` (0) or `FERRY_TIMED_OUT`. An idle wait sleeps in
// the kernel on every end's descriptor at once.
//
// # Safety
//
// `pipes` is `count` ends not closed (`count` > 0); `ready` is writable.
ferry_status ferry_poll_many(const ferry_pipe *const *pipes,
                             size_t count,
                             int64_t timeout_ns,
                             size_t *ready);

// A descriptor for `poll`, `epoll`, libuv or GLib, **level-triggered**:
// readable exactly while a receive would not wait (a message is there, or
// the peer is gone). Never read it or close it: it belongs to `pipe`,
// and lives as long as it.
//
// # Safety
//
// `pipe` is an end not closed; `fd` is writable.
ferry_status ferry_ready_fd(const ferry_pipe *pipe, int *fd);

// Sets the largest message this end sends or accepts (a peer that sends
// a larger one broke the rules: `FERRY_PROTOCOL`).
//
// # Safety
//
// `pipe` is an end not closed.
ferry_status ferry_pipe_set_max_message(const ferry_pipe *pipe, size_t limit);

// Starts the program `argv[0]` (on `PATH` if it has no `/`) with the
// arguments `argv[1..]` (a NULL-terminated vector, as `execvp` takes),
// and a pipe to it: `*pipe` is this end, which the child takes with
// `ferry_from_parent`. `options` may be NULL.
//
// # Safety
//
// `argv` is a NULL-terminated vector of NUL-terminated strings;
// `options` is NULL or has its `size` set; `child` and `pipe` are
// writable.
ferry_status ferry_spawn(const char *const *argv,
                         const ferry_pipe_options *options,
                         ferry_child **child,
                         ferry_pipe **pipe);

// In a child started by `ferry_spawn` (from C, Rust or Python): the pipe
// to its parent. Once per process; `FERRY_INVALID_ARGUMENT` in a process
// that was not so started, or on a second call.
//
// # Safety
//
// `pipe` is writable.
ferry_status ferry_from_parent(ferry_pipe **pipe);

// The child's process id.
//
// # Safety
//
// `child` is a child not closed; `pid` is writable.
ferry_status ferry_child_pid(const ferry_child *child, pid_t *pid);

// Waits up to `timeout_ns` for the child to exit, writing its status as
// `waitpid` gives it (`WIFEXITED`, `WEXITSTATUS`, `WTERMSIG` apply) to
// `*status` (which may be NULL). `FERRY_WOULD_BLOCK` (0) or
// `FERRY_TIMED_OUT` while it runs.
//
// # Safety
//
// `child` is a child not closed; `status` is NULL or writable.
ferry_status ferry_child_wait(const ferry_child *child, int64_t timeout_ns, int *status);

// Sends the child `SIGKILL` (nothing if it was already waited for).
//
// # Safety
//
// `child` is a child not closed.
ferry_status ferry_child_kill(const ferry_child *child);

// Frees the handle (NULL: nothing). The process is neither waited for
// nor killed. No other thread may be using `child`.
//
// # Safety
//
// `child` is NULL or a child not yet closed; it is not used again.
void ferry_child_close(ferry_child *child);

// Receives the next message as a view: `*message` holds its bytes, a
// large message from another process in place in shared memory (no
// copy), until `ferry_message_close`. Descriptors or ends that came with
// it are closed (`ferry_recv_message` keeps them). Waits as `ferry_recv`.
//
// # Safety
//
// `pipe` is an end not closed; `message` is writable.
ferry_status ferry_recv_view(const ferry_pipe *pipe, int64_t timeout_ns, ferry_message **message);

// Receives the next message with the descriptors and pipe ends that came
// with it (its bytes copied once). Waits as `ferry_recv`.
//
// # Safety
//
// `pipe` is an end not closed; `message` is writable.
ferry_status ferry_recv_message(const ferry_pipe *pipe,
                                int64_t timeout_ns,
                                ferry_message **message);

// The message's bytes: `*data` stays valid until `ferry_message_close`.
// They may be shared memory the sender can still change: copy what you
// check before you act on it.
//
// # Safety
//
// `message` is a message not closed; `data` and `len` are writable.
ferry_status ferry_message_data(const ferry_message *message, const void **data, size_t *len);

// How many descriptors came with the message (taken ones included; 0
// for NULL).
//
// # Safety
//
// `message` is NULL or a message not closed.
size_t ferry_message_fd_count(const ferry_message *message);

// How many pipe ends came with the message (taken ones included; 0 for
// NULL).
//
// # Safety
//
// `message` is NULL or a message not closed.
size_t ferry_message_end_count(const ferry_message *message);

// Takes descriptor `index` of the message: `*fd` is now the caller's to
// close (it is close-on-exec). Each is taken once.
//
// # Safety
//
// `message` is a message not closed; `fd` is writable.
ferry_status ferry_message_take_fd(const ferry_message *message, size_t index, int *fd);

// Takes pipe end `index` of the message: `*end` is now the caller's (a
// whole end, or a half that only sends or only receives). Each is taken
// once.
//
// # Safety
//
// `message` is a message not closed; `end` is writable.
ferry_status ferry_message_take_end(const ferry_message *message, size_t index, ferry_pipe **end);

// Frees a received message (NULL: nothing): its view goes back to the
// sender's pool, and descriptors and ends not taken are closed.
//
// # Safety
//
// `message` is NULL or a message not closed; neither it nor the data
// `ferry_message_data` gave is used again.
void ferry_message_close(ferry_message *message);

// Sends `len` bytes with `fd_count` descriptors and `end_count` pipe
// ends. The descriptors stay the caller's (the message carries
// duplicates); the ends go with the message: on `FERRY_OK` their handles
// are freed (as by `ferry_pipe_close`: no other thread may be using
// them), on any other status they are still the caller's. An end cannot
// be sent over itself, nor given twice. Waits as `ferry_send`.
//
// # Safety
//
// `pipe` is an end not closed; `data` is NULL (with `len` 0) or `len`
// readable bytes; `fds` is NULL (with `fd_count` 0) or `fd_count` open
// descriptors; `ends` is NULL (with `end_count` 0) or `end_count` ends
// not closed and used by no other thread.
ferry_status ferry_send_message(const ferry_pipe *pipe,
                                const void *data,
                                size_t len,
                                const int *fds,
                                size_t fd_count,
                                ferry_pipe *const *ends,
                                size_t end_count,
                                int64_t timeout_ns);

// Lends room for a message of `len` bytes (a block of shared memory for
// a large one, which the receiver reads in place): write it through
// `ferry_loan_data`, then commit or abort it.
//
// # Safety
//
// `pipe` is an end not closed; `loan` is writable.
ferry_status ferry_loan_new(const ferry_pipe *pipe, size_t len, ferry_loan **loan);

// Where to write the loan's bytes, and how many: valid until it is
// committed or aborted.
//
// # Safety
//
// `loan` is a loan not committed or aborted; `data` and `len` are
// writable.
ferry_status ferry_loan_data(const ferry_loan *loan, void **data, size_t *len);

// Sends what was written in the loan, waiting while the pipe is full
// (as `ferry_send` with a negative timeout), and frees the loan (whatever
// the status).
//
// # Safety
//
// `loan` is a loan not committed or aborted, used by no other thread; it
// is not used again.
ferry_status ferry_loan_commit(ferry_loan *loan);

// Frees a loan without sending it (NULL: nothing).
//
// # Safety
//
// `loan` is NULL or a loan not committed or aborted, used by no other
// thread; it is not used again.
void ferry_loan_abort(ferry_loan *loan);

// Writes a new random token (`FERRY_TOKEN_LEN` bytes) to `token`: give
// it to the server and to its clients.
//
// # Safety
//
// `token` is `FERRY_TOKEN_LEN` writable bytes.
ferry_status ferry_token_new(uint8_t *token);

// Listens at `name`: an abstract name (nothing on disk) or, with a `/`
// in it, a socket file's path. Only clients of this user connect, and
// with `token` (`FERRY_TOKEN_LEN` bytes; NULL: none) only those that
// present it.
//
// # Safety
//
// `name` is a NUL-terminated string; `token` is NULL or
// `FERRY_TOKEN_LEN` readable bytes; `server` is writable.
ferry_status ferry_server_bind(const char *name, const uint8_t *token, ferry_server **server);

// Accepts the next client, waiting up to `timeout_ns`: `*pipe` is this
// end of its pipe, and `*peer` (which may be NULL) who it is. A client
// turned away (a wrong token) is skipped.
//
// # Safety
//
// `server` is a server not closed; `pipe` is writable; `peer` is NULL or
// writable.
ferry_status ferry_server_accept(const ferry_server *server,
                                 int64_t timeout_ns,
                                 ferry_pipe **pipe,
                                 ferry_credentials *peer);

// A level-triggered descriptor for the server: readable while a client
// waits to be accepted. Never read or close it.
//
// # Safety
//
// `server` is a server not closed; `fd` is writable.
ferry_status ferry_server_ready_fd(const ferry_server *server, int *fd);

// Stops listening and frees the server (NULL: nothing); pipes it
// accepted go on.
//
// # Safety
//
// `server` is NULL or a server not closed, used by no other thread; it
// is not used again.
void ferry_server_close(ferry_server *server);

// Connects to the server at `name` (as `ferry_server_bind` names it),
// presenting `token` (NULL: none). A connection waits for the server's
// answer: up to `timeout_ns` if positive, else ferry's default (5 s).
// `FERRY_DISCONNECTED` if no server listens there, `FERRY_REFUSED` if it
// turned this client away.
//
// # Safety
//
// `name` is a NUL-terminated string; `token` is NULL or
// `FERRY_TOKEN_LEN` readable bytes; `pipe` is writable.
ferry_status ferry_connect(const char *name,
                           const uint8_t *token,
                           int64_t timeout_ns,
                           ferry_pipe **pipe);

#ifdef __cplusplus
}  // extern "C"
#endif  // __cplusplus

#endif  /* FERRY_H */
