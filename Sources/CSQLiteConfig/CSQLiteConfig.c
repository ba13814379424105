#include "CSQLiteConfig.h"
#include <sqlite3.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t interrupted_by = 0;

static void on_signal(int signal) {
    if (interrupted_by != 0) _exit(130);
    interrupted_by = signal;
}

void ckport_install_interrupt_handler(void) {
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

int ckport_interrupted(void) { return interrupted_by; }

void ckport_simulate_interrupt(int signal) { interrupted_by = signal; }

int ckport_configure_sqlite(void) {
    int rc = sqlite3_config(SQLITE_CONFIG_MULTITHREAD);
    if (rc != SQLITE_OK) return rc;
    return sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}
