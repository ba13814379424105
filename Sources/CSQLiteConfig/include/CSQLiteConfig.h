#ifndef CSQLITECONFIG_H
#define CSQLITECONFIG_H

/// Puts SQLite in multi-thread mode with memory statistics off, before its first use.
///
/// ckport never shares a connection between threads (GRDB serializes each one), so SQLite's
/// per-call connection mutex and its global allocation counter only cost time: on a bulk
/// import they are tens of millions of lock round trips. `sqlite3_config` is variadic, which
/// Swift cannot call, hence this C shim. Returns 0 when applied, or SQLite's error code when
/// SQLite was already initialized (then nothing changes, which is safe).
int ckport_configure_sqlite(void);

#endif
