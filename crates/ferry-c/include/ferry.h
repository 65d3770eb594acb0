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
#define FERRY_ABI_MINOR 1

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
} ferry_status;

// A child process started by `ferry_spawn`. Freed by `ferry_child_close`
// (which neither waits for nor kills the process).
typedef struct ferry_child ferry_child;

// One end of a pipe: it sends to, and receives from, the other end.
// Made by `ferry_pipe_new`, `ferry_spawn`, `ferry_from_parent`; freed by
// `ferry_pipe_close` only.
typedef struct ferry_pipe ferry_pipe;

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

#ifdef __cplusplus
}  // extern "C"
#endif  // __cplusplus

#endif  /* FERRY_H */
