/*
 * ferry.hpp: a header-only C++11 wrapper over ferry.h (link with -lferry).
 *
 *     auto ends = ferry::Pipe::pair();                    // one process, two ends
 *     ends.first.send("hello");
 *     std::vector<unsigned char> m = ends.second.recv();  // any size: it grows
 *
 *     auto kid = ferry::Child::spawn({"./worker", "child"});  // {Child, Pipe}
 *     kid.second.send("job", std::chrono::seconds(1));        // (the worker:
 *     try { m = kid.second.recv(std::chrono::seconds(1)); }   //  Pipe::from_parent())
 *     catch (const ferry::Timeout &) { kid.first.kill(); }    // no reply in time
 *     kid.second = ferry::Pipe();                              // hang up (closes)
 *     int status = kid.first.wait();                           // as waitpid gives it
 *
 * Handles are move-only and closed by their destructors (a moved-from one
 * is empty; calls on it fail with FERRY_INVALID_ARGUMENT). Every failure
 * throws ferry::Error: its status() and, as what(), the status's name and
 * ferry_last_error(). A wait that ends with nothing (FERRY_WOULD_BLOCK for a
 * timeout of 0, FERRY_TIMED_OUT after one) throws ferry::Timeout, a
 * subclass of ferry::Error: catch it apart, or ask poll() first, which
 * returns false instead. A closed peer is an Error with FERRY_DISCONNECTED.
 * Timeouts are std::chrono durations: 0 never waits, ferry::forever (any
 * negative one) waits for ever.
 */
#ifndef FERRY_HPP
#define FERRY_HPP

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "ferry.h"

namespace ferry {

/// Waits for ever (any negative timeout does).
constexpr std::chrono::nanoseconds forever{-1};

/// A failed call: its status and what ferry said.
class Error : public std::runtime_error {
public:
    /// Takes this thread's ferry_last_error(): make it right after the call.
    explicit Error(ferry_status status)
        : std::runtime_error(describe(status)), status_(status),
          os_error_(ferry_last_os_error()) {}
    ferry_status status() const noexcept { return status_; }
    /// The errno of a FERRY_IO failure (0 otherwise).
    int os_error() const noexcept { return os_error_; }

private:
    static std::string describe(ferry_status status) {
        std::string said = ferry_last_error();  // before any other ferry call
        return std::string(ferry_status_str(status)) + (said.empty() ? "" : " (" + said + ")");
    }
    ferry_status status_;
    int os_error_;
};

/// A wait that ended with nothing: FERRY_WOULD_BLOCK or FERRY_TIMED_OUT.
class Timeout : public Error {
public:
    explicit Timeout(ferry_status status) : Error(status) {}
};

namespace detail {
inline void check(ferry_status s) {
    if (s == FERRY_WOULD_BLOCK || s == FERRY_TIMED_OUT) throw Timeout(s);
    if (s != FERRY_OK) throw Error(s);
}
inline std::int64_t ns(std::chrono::nanoseconds t) {
    return t.count() < 0 ? -1 : static_cast<std::int64_t>(t.count());
}
}  // namespace detail

/// One end of a pipe (ferry_pipe*): sends to, and receives from, the other.
class Pipe {
public:
    Pipe() noexcept : p_(nullptr) {}
    /// Takes ownership of `p` (may be NULL).
    explicit Pipe(ferry_pipe *p) noexcept : p_(p) {}
    Pipe(Pipe &&o) noexcept : p_(o.release()) {}
    Pipe &operator=(Pipe &&o) noexcept {
        if (this != &o) {
            ferry_pipe_close(p_);
            p_ = o.release();
        }
        return *this;
    }
    Pipe(const Pipe &) = delete;
    Pipe &operator=(const Pipe &) = delete;
    ~Pipe() { ferry_pipe_close(p_); }

    /// A new pipe's two ends. `options`: NULL for every default.
    static std::pair<Pipe, Pipe> pair(const ferry_pipe_options *options = nullptr) {
        ferry_pipe *a = nullptr, *b = nullptr;
        detail::check(ferry_pipe_new(options, &a, &b));
        return std::pair<Pipe, Pipe>(Pipe(a), Pipe(b));
    }
    /// In a process started by Child::spawn (or ferry_spawn): the pipe to
    /// its parent. Once per process.
    static Pipe from_parent() {
        ferry_pipe *p = nullptr;
        detail::check(ferry_from_parent(&p));
        return Pipe(p);
    }

    /// Sends a copy of `len` bytes, waiting up to `timeout` while the pipe
    /// is full.
    void send(const void *data, std::size_t len,
              std::chrono::nanoseconds timeout = forever) const {
        detail::check(ferry_send(p_, data, len, detail::ns(timeout)));
    }
    void send(const std::string &s, std::chrono::nanoseconds timeout = forever) const {
        send(s.data(), s.size(), timeout);
    }
    void send(const std::vector<unsigned char> &v,
              std::chrono::nanoseconds timeout = forever) const {
        send(v.data(), v.size(), timeout);
    }

    /// Receives the next message into `buf`, returning its length. One
    /// longer than `cap` throws Error(FERRY_TOO_LARGE) and stays, to be
    /// received next (by recv() below, or with a larger buffer).
    std::size_t recv(void *buf, std::size_t cap,
                     std::chrono::nanoseconds timeout = forever) const {
        std::size_t len = 0;
        detail::check(ferry_recv(p_, buf, cap, &len, detail::ns(timeout)));
        return len;
    }
    /// Receives the next message, of any size.
    std::vector<unsigned char> recv(std::chrono::nanoseconds timeout = forever) const {
        std::vector<unsigned char> buf;
        for (;;) {
            std::size_t len = 0;
            ferry_status s = ferry_recv(p_, buf.empty() ? nullptr : buf.data(), buf.size(),
                                        &len, detail::ns(timeout));
            if (s == FERRY_OK) {
                buf.resize(len);
                return buf;
            }
            if (s != FERRY_TOO_LARGE || len <= buf.size()) detail::check(s);
            buf.resize(len);  // the message stays: take it with room enough
        }
    }

    /// Whether a receive would not wait (a message, or the peer gone),
    /// waiting up to `timeout` for that.
    bool poll(std::chrono::nanoseconds timeout = forever) const {
        ferry_status s = ferry_poll(p_, detail::ns(timeout));
        if (s == FERRY_WOULD_BLOCK || s == FERRY_TIMED_OUT) return false;
        detail::check(s);
        return true;
    }
    /// A level-triggered descriptor for poll/epoll, readable while a receive
    /// would not wait. It belongs to the pipe: never read or close it.
    int ready_fd() const {
        int fd = -1;
        detail::check(ferry_ready_fd(p_, &fd));
        return fd;
    }
    /// The largest message this end sends or accepts.
    void set_max_message(std::size_t limit) const {
        detail::check(ferry_pipe_set_max_message(p_, limit));
    }

    ferry_pipe *get() const noexcept { return p_; }
    /// Gives the handle up (the caller closes it), leaving this empty.
    ferry_pipe *release() noexcept {
        ferry_pipe *p = p_;
        p_ = nullptr;
        return p;
    }
    explicit operator bool() const noexcept { return p_ != nullptr; }

private:
    ferry_pipe *p_;
};

/// A child process (ferry_child*). Its destructor neither waits for nor
/// kills it.
class Child {
public:
    Child() noexcept : c_(nullptr) {}
    explicit Child(ferry_child *c) noexcept : c_(c) {}
    Child(Child &&o) noexcept : c_(o.release()) {}
    Child &operator=(Child &&o) noexcept {
        if (this != &o) {
            ferry_child_close(c_);
            c_ = o.release();
        }
        return *this;
    }
    Child(const Child &) = delete;
    Child &operator=(const Child &) = delete;
    ~Child() { ferry_child_close(c_); }

    /// Starts `argv[0]` (on PATH if it has no '/') with `argv[1..]`, and a
    /// pipe to it, which it takes with Pipe::from_parent().
    static std::pair<Child, Pipe> spawn(const std::vector<std::string> &argv,
                                        const ferry_pipe_options *options = nullptr) {
        std::vector<const char *> args;
        for (const std::string &a : argv) args.push_back(a.c_str());
        args.push_back(nullptr);
        ferry_child *c = nullptr;
        ferry_pipe *p = nullptr;
        detail::check(ferry_spawn(args.data(), options, &c, &p));
        return std::pair<Child, Pipe>(Child(c), Pipe(p));
    }

    pid_t pid() const {
        pid_t pid = 0;
        detail::check(ferry_child_pid(c_, &pid));
        return pid;
    }
    /// Waits up to `timeout` for the child to exit: its status as waitpid
    /// gives it (WIFEXITED, WEXITSTATUS, WTERMSIG apply).
    int wait(std::chrono::nanoseconds timeout = forever) const {
        int status = 0;
        detail::check(ferry_child_wait(c_, detail::ns(timeout), &status));
        return status;
    }
    /// Sends it SIGKILL (nothing if it was already waited for).
    void kill() const { detail::check(ferry_child_kill(c_)); }

    ferry_child *get() const noexcept { return c_; }
    ferry_child *release() noexcept {
        ferry_child *c = c_;
        c_ = nullptr;
        return c;
    }
    explicit operator bool() const noexcept { return c_ != nullptr; }

private:
    ferry_child *c_;
};

}  // namespace ferry

#endif  // FERRY_HPP
