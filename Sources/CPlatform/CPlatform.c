/* sync_file_range and renameat2 are GNU extensions (Linux only; every call below is guarded). */
#define _GNU_SOURCE
#include "CPlatform.h"
#include <errno.h>
#include <stdio.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>
#include <fcntl.h>

static volatile sig_atomic_t interrupted_by = 0;
/* The handler tells a waiting thread through this pipe (write is async-signal-safe). */
static int interrupt_pipe[2] = {-1, -1};

static void on_signal(int signal) {
    if (interrupted_by != 0) _exit(130);
    interrupted_by = signal;
    if (interrupt_pipe[1] >= 0) {
        unsigned char byte = (unsigned char)signal;
        ssize_t ignored = write(interrupt_pipe[1], &byte, 1);
        (void)ignored;
    }
}

void ckport_install_interrupt_handler(void) {
    if (interrupt_pipe[0] < 0 && pipe(interrupt_pipe) == 0) {
        fcntl(interrupt_pipe[0], F_SETFD, FD_CLOEXEC);
        fcntl(interrupt_pipe[1], F_SETFD, FD_CLOEXEC);
    }
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = on_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    sigaction(SIGINT, &action, NULL);
    sigaction(SIGTERM, &action, NULL);
    /* A parent may have left the signals blocked (some process launchers do): unblock them, so
       that the handler runs rather than the signal waiting forever. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigprocmask(SIG_UNBLOCK, &set, NULL);
}

int ckport_wait_for_interrupt(void) {
    unsigned char byte = 0;
    for (;;) {
        ssize_t got = read(interrupt_pipe[0], &byte, 1);
        if (got == 1) return byte;
        if (got < 0 && errno == EINTR) continue;
        /* No pipe: wait for the flag instead. */
        while (interrupted_by == 0) usleep(100000);
        return interrupted_by;
    }
}

int ckport_start_writeback(int fd, long long start, long long length) {
#if defined(__linux__)
    return sync_file_range(fd, (off_t)start, (off_t)length, SYNC_FILE_RANGE_WRITE);
#else
    (void)fd; (void)start; (void)length;
    return 0;
#endif
}

int ckport_finish_writeback(int fd, long long start, long long length) {
#if defined(__linux__)
    if (sync_file_range(fd, (off_t)start, (off_t)length,
                        SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER) != 0) return -1;
    return posix_fadvise(fd, (off_t)start, (off_t)length, POSIX_FADV_DONTNEED);
#elif defined(__APPLE__)
    /* No ranged writeback or cache advice on Darwin: the file's later writes bypass the unified
       buffer cache instead (F_NOCACHE), which keeps a long output from crowding memory. */
    (void)start; (void)length;
    return fcntl(fd, F_NOCACHE, 1) == -1 ? -1 : 0;
#else
    (void)fd; (void)start; (void)length;
    return 0;
#endif
}

int ckport_rename_exclusive(const char *from, const char *to) {
#if defined(__linux__)
    return renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE);
#elif defined(__APPLE__)
    return renamex_np(from, to, RENAME_EXCL);
#else
    (void)from;
    (void)to;
    errno = ENOSYS;
    return -1;
#endif
}
