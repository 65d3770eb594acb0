/* ferry.hpp for real: a pair in one process (bytes both ways, a buffer too
 * small, timeouts, errors and their statuses, moves that close once), then
 * this program started again as `child` (an echo child) through
 * ferry::Child::spawn, and a child killed.
 *
 * Usage: test_wrapper (it runs `argv[0] child` itself) */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "check.h"
#include "ferry.hpp"

typedef std::vector<unsigned char> Bytes;
using std::chrono::milliseconds;
using std::chrono::seconds;

/* `expr` must throw `Type` with status `want`, and say why. */
#define THROWS(expr, Type, want)                                                   \
    do {                                                                           \
        bool threw_ = false;                                                       \
        try {                                                                      \
            (void)(expr);                                                          \
        } catch (const Type &e_) {                                                 \
            threw_ = true;                                                         \
            if (e_.status() != (want) || std::strlen(e_.what()) == 0) {            \
                fprintf(stderr, "%s:%d: %s threw \"%s\", not %s\n", __FILE__,      \
                        __LINE__, #expr, e_.what(), ferry_status_str(want));       \
                check_failures++;                                                  \
            }                                                                      \
        }                                                                          \
        if (!threw_) {                                                             \
            fprintf(stderr, "%s:%d: %s did not throw %s\n", __FILE__, __LINE__,    \
                    #expr, #Type);                                                 \
            check_failures++;                                                      \
        }                                                                          \
    } while (0)

static Bytes pattern(size_t n) {
    Bytes b(n);
    for (size_t i = 0; i < n; i++) b[i] = (unsigned char)(i * 7 + 3);
    return b;
}

static bool readable(int fd) {
    struct pollfd p;
    p.fd = fd;
    p.events = POLLIN;
    p.revents = 0;
    return poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

static void bytes_go_both_ways() {
    std::pair<ferry::Pipe, ferry::Pipe> ends = ferry::Pipe::pair();
    ferry::Pipe &a = ends.first, &b = ends.second;
    CHECK(a && b);
    const size_t sizes[] = {0, 12, 200000};
    for (size_t i = 0; i < 3; i++) {
        Bytes m = pattern(sizes[i]);
        a.send(m);
        CHECK(b.recv(seconds(5)) == m);
        b.send(m.data(), m.size(), seconds(5));
        CHECK(a.recv() == m);
    }
    /* Into the caller's buffer; and a std::string. */
    unsigned char buf[16];
    b.send(std::string("hello, ferry"));
    CHECK(a.recv(buf, sizeof buf, seconds(5)) == 12 && std::memcmp(buf, "hello, ferry", 12) == 0);
    a.send("", 0);
    CHECK(b.recv(buf, sizeof buf) == 0);
}

static void a_small_buffer_loses_nothing() {
    std::pair<ferry::Pipe, ferry::Pipe> ends = ferry::Pipe::pair();
    Bytes m = pattern(1000);
    unsigned char small[16];
    ends.first.send(m);
    THROWS(ends.second.recv(small, sizeof small), ferry::Error, FERRY_TOO_LARGE);
    THROWS(ends.second.recv(nullptr, 0, milliseconds(0)), ferry::Error, FERRY_TOO_LARGE);
    CHECK(ends.second.poll(milliseconds(0))); /* it stays */
    CHECK(ends.second.recv(milliseconds(0)) == m); /* grown to fit */
    THROWS(ends.second.recv(milliseconds(0)), ferry::Timeout, FERRY_WOULD_BLOCK);
}

static void timeouts_are_timeouts() {
    std::pair<ferry::Pipe, ferry::Pipe> ends = ferry::Pipe::pair();
    ferry::Pipe &a = ends.first, &b = ends.second;
    unsigned char buf[16];
    THROWS(b.recv(milliseconds(0)), ferry::Timeout, FERRY_WOULD_BLOCK);
    THROWS(b.recv(buf, sizeof buf, std::chrono::nanoseconds(0)), ferry::Timeout,
           FERRY_WOULD_BLOCK);
    std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
    THROWS(b.recv(milliseconds(20)), ferry::Timeout, FERRY_TIMED_OUT);
    CHECK(std::chrono::steady_clock::now() - start >= milliseconds(20));
    THROWS(b.recv(buf, sizeof buf, milliseconds(2)), ferry::Error, FERRY_TIMED_OUT);
    CHECK(!b.poll(milliseconds(0)));
    start = std::chrono::steady_clock::now();
    CHECK(!b.poll(milliseconds(20)));
    CHECK(std::chrono::steady_clock::now() - start >= milliseconds(20));
    a.send("x");
    CHECK(b.poll(ferry::forever));
    CHECK(b.recv(buf, sizeof buf, ferry::forever) == 1 && buf[0] == 'x');

    /* A full pipe: a send would block, or times out. */
    ferry_pipe_options o = ferry_pipe_options();
    o.size = sizeof o;
    o.ring_size = 4096;
    std::pair<ferry::Pipe, ferry::Pipe> small = ferry::Pipe::pair(&o);
    Bytes chunk = pattern(1000);
    int sent = 0;
    try {
        for (; sent < 100; sent++) small.first.send(chunk, milliseconds(0));
    } catch (const ferry::Timeout &e) {
        CHECK(e.status() == FERRY_WOULD_BLOCK);
    }
    CHECK(sent > 0 && sent < 100);
    THROWS(small.first.send(chunk, milliseconds(2)), ferry::Timeout, FERRY_TIMED_OUT);
    for (; sent > 0; sent--) CHECK(small.second.recv(milliseconds(0)) == chunk);
}

static void errors_carry_their_status() {
    ferry_pipe_options o = ferry_pipe_options();
    o.size = sizeof o;
    o.ring_size = 5000; /* not a power of two */
    try {
        ferry::Pipe::pair(&o);
        CHECK(!"a ring of 5000 bytes was taken");
    } catch (const ferry::Error &e) {
        CHECK(e.status() == FERRY_INVALID_ARGUMENT);
        CHECK(std::strstr(e.what(), "FERRY_INVALID_ARGUMENT") != nullptr);
        /* ... and ferry's own words too. */
        CHECK(std::strlen(e.what()) > std::strlen(ferry_status_str(FERRY_INVALID_ARGUMENT)));
    }
    THROWS(ferry::Pipe::from_parent(), ferry::Error, FERRY_INVALID_ARGUMENT);
    THROWS(ferry::Child::spawn(std::vector<std::string>()), ferry::Error,
           FERRY_INVALID_ARGUMENT);

    std::pair<ferry::Pipe, ferry::Pipe> ends = ferry::Pipe::pair();
    Bytes big = pattern(101);
    ends.first.set_max_message(100);
    THROWS(ends.first.send(big), ferry::Error, FERRY_TOO_LARGE);
    ends.first.set_max_message(1 << 20);
    ends.first.send(big);
    ends.first.send("last");
    ends.first = ferry::Pipe(); /* hangs up: what was sent comes first */
    CHECK(!ends.first);
    CHECK(ends.second.recv() == big);
    CHECK(ends.second.recv() == Bytes({'l', 'a', 's', 't'}));
    THROWS(ends.second.recv(), ferry::Error, FERRY_DISCONNECTED);
    CHECK(ends.second.poll(milliseconds(0))); /* readable, for good */
    THROWS(ends.second.send("x"), ferry::Error, FERRY_DISCONNECTED);
}

static void the_descriptor_is_level_triggered() {
    std::pair<ferry::Pipe, ferry::Pipe> ends = ferry::Pipe::pair();
    int fd = ends.second.ready_fd();
    CHECK(fd >= 0 && fd == ends.second.ready_fd());
    CHECK(!readable(fd));
    ends.first.send("one");
    CHECK(ends.second.poll(seconds(1)) && readable(fd));
    ends.second.recv();
    CHECK(!readable(fd));
}

static void moves_close_once() {
    std::pair<ferry::Pipe, ferry::Pipe> one = ferry::Pipe::pair();
    std::pair<ferry::Pipe, ferry::Pipe> two = ferry::Pipe::pair();
    ferry_pipe *raw = one.first.get();

    ferry::Pipe moved(std::move(one.first));
    CHECK(!one.first && one.first.get() == nullptr && moved.get() == raw);
    THROWS(one.first.send("x"), ferry::Error, FERRY_INVALID_ARGUMENT);
    THROWS(one.first.recv(), ferry::Error, FERRY_INVALID_ARGUMENT);
    THROWS(one.first.ready_fd(), ferry::Error, FERRY_INVALID_ARGUMENT);

    /* Assigning over a live end closes it: its peer hears the hang-up. */
    two.first = std::move(moved);
    CHECK(!moved && two.first.get() == raw);
    THROWS(two.second.recv(seconds(5)), ferry::Error, FERRY_DISCONNECTED);
    two.first.send("still one");
    CHECK(one.second.recv(seconds(5)) == Bytes({'s', 't', 'i', 'l', 'l', ' ', 'o', 'n', 'e'}));

    /* Onto itself: nothing changes. */
    ferry::Pipe &same = two.first;
    two.first = std::move(same);
    CHECK(two.first.get() == raw);

    /* Many ends in a vector that reallocates, moved out and back. */
    std::vector<ferry::Pipe> ends;
    for (int i = 0; i < 20; i++) {
        std::pair<ferry::Pipe, ferry::Pipe> p = ferry::Pipe::pair();
        ends.push_back(std::move(p.first));
        ends.push_back(std::move(p.second));
    }
    for (size_t i = 0; i < ends.size(); i += 2) ends[i].send(std::to_string(i));
    for (size_t i = 0; i < ends.size(); i += 2) {
        Bytes m = ends[i + 1].recv(milliseconds(0));
        CHECK(std::string(m.begin(), m.end()) == std::to_string(i));
    }

    /* Given up: the caller closes it. */
    ferry::Pipe given = std::move(ends.back());
    ferry_pipe *p = given.release();
    CHECK(!given && p != nullptr);
    ferry_pipe_close(p);
    /* Every end closes once here, at the end of the scope. */
}

static void a_missing_program_is_an_io_error() {
    try {
        ferry::Child::spawn({"/nonexistent/ferry-program"});
        CHECK(!"a program that is not there started");
    } catch (const ferry::Error &e) {
        CHECK(e.status() == FERRY_IO && e.os_error() == ENOENT);
    }
}

static int echo_child() {
    try {
        ferry::Pipe parent = ferry::Pipe::from_parent();
        try {
            for (;;) parent.send(parent.recv());
        } catch (const ferry::Error &e) {
            return e.status() == FERRY_DISCONNECTED ? 0 : 4;
        }
    } catch (const ferry::Error &e) {
        fprintf(stderr, "child: %s\n", e.what());
        return 2;
    }
}

static void a_child_echoes(const char *self) {
    std::pair<ferry::Child, ferry::Pipe> kid = ferry::Child::spawn({self, "child"});
    ferry::Child child = std::move(kid.first);
    ferry::Pipe pipe = std::move(kid.second);
    CHECK(child.pid() > 0);
    const size_t sizes[] = {0, 1, 12, 144, 4096, 65536, 200000, 1 << 20};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        Bytes m = pattern(sizes[i]);
        pipe.send(m, seconds(10));
        CHECK(pipe.recv(seconds(10)) == m);
    }
    pipe.send(std::string("over"), seconds(10));
    unsigned char buf[8];
    CHECK(pipe.recv(buf, sizeof buf, seconds(10)) == 4 && std::memcmp(buf, "over", 4) == 0);
    THROWS(child.wait(milliseconds(0)), ferry::Timeout, FERRY_WOULD_BLOCK);
    THROWS(child.wait(milliseconds(2)), ferry::Timeout, FERRY_TIMED_OUT);
    pipe = ferry::Pipe(); /* hangs up: the child ends */
    int status = child.wait(seconds(10));
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static void a_child_is_killed(const char *self) {
    std::pair<ferry::Child, ferry::Pipe> kid = ferry::Child::spawn({self, "child"});
    kid.second.send("ping", seconds(10));
    CHECK(kid.second.recv(seconds(10)) == Bytes({'p', 'i', 'n', 'g'}));
    kid.first.kill();
    int status = kid.first.wait(seconds(10));
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    kid.first.kill(); /* already waited for: nothing */
    THROWS(kid.second.recv(seconds(10)), ferry::Error, FERRY_DISCONNECTED);
}

int main(int argc, char **argv) {
    if (argc > 1 && std::strcmp(argv[1], "child") == 0) return echo_child();
    try {
        /* A first pipe makes what ferry keeps for the process's life. */
        ferry::Pipe::pair();
        int fds = open_fds();
        bytes_go_both_ways();
        a_small_buffer_loses_nothing();
        timeouts_are_timeouts();
        errors_carry_their_status();
        the_descriptor_is_level_triggered();
        moves_close_once();
        CHECK(open_fds() == fds);
        /* (Children make what ferry keeps for the process's life: no
         * descriptor count from here.) */
        a_missing_program_is_an_io_error();
        a_child_echoes(argv[0]);
        a_child_is_killed(argv[0]);
    } catch (const std::exception &e) {
        fprintf(stderr, "test_wrapper: uncaught %s\n", e.what());
        return 1;
    }
    return finish("test_wrapper");
}
