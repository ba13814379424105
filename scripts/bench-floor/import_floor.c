/*
 * The floor of ckport's import: the SQLite work an import of records into an empty store does,
 * done by a small C program with nothing else to do.
 *
 *   import_floor SOURCE.sqlite TARGET.sqlite
 *
 * SOURCE is a store ckport imported; TARGET an empty store with the same schema (`ckport schema
 * import`). In one transaction, with ckport's pragmas, the program drops TARGET's indexes (as
 * ckport's bulk load does for empty tables), copies the zones, then for every record of every
 * record type, in primary-key order (which is the generated files' order within a table):
 * registers it in the change log (_ck_record, with its sequence number) and inserts its row with
 * a prepared statement; then it rebuilds the indexes, refreshes the statistics as ckport does
 * (analysis_limit 1000) and commits. What it leaves out is what ckport adds: reading and
 * validating JSON, deciding each record's fate.
 *
 * With IMPORT_FLOOR_SPLIT=1 in the environment it measures an alternative ckport did not take:
 * the rows are committed first, and the indexes built in a second transaction while a second
 * connection, on another thread, folds the first transaction's log back into the file (README,
 * "Rows and indexes in two transactions").
 *
 * With IMPORT_FLOOR_SIDE=1 it measures another: what a store nobody else can see yet allows. The
 * TARGET is loaded without the write-ahead log (journal_mode OFF, synchronous OFF), as a new
 * store built in a side file before it is published could be; at the end the file is synced
 * and put back into WAL mode, as such a store would be before it is renamed into place. The
 * time of the copy of the empty store's schema and of the rename is left out (a few pages).
 */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <pthread.h>
#include <fcntl.h>
#include <unistd.h>

static sqlite3 *db;

static void check(int code, const char *what) {
    if (code != SQLITE_OK && code != SQLITE_DONE && code != SQLITE_ROW) {
        fprintf(stderr, "import_floor: %s: %s\n", what, sqlite3_errmsg(db));
        exit(1);
    }
}

/* IMPORT_FLOOR_SPLIT: the second connection's checkpoint of the committed rows. */
static const char *target_path;
static void *fold_back(void *unused) {
    (void)unused;
    sqlite3 *other;
    if (sqlite3_open(target_path, &other) != SQLITE_OK) {
        fprintf(stderr, "import_floor: a second connection: %s\n", sqlite3_errmsg(other));
        exit(1);
    }
    /* A first read opens the log; a checkpoint before it would find none. */
    sqlite3_exec(other, "SELECT count(*) FROM sqlite_master", NULL, NULL, NULL);
    int frames = 0, folded = 0;
    if (sqlite3_wal_checkpoint_v2(other, "main", SQLITE_CHECKPOINT_PASSIVE, &frames, &folded) != SQLITE_OK) {
        fprintf(stderr, "import_floor: checkpoint: %s\n", sqlite3_errmsg(other));
        exit(1);
    }
    sqlite3_close(other);
    return NULL;
}

/* Seconds since the previous call: the phases' times go to standard error. */
static double lap(void) {
    static struct timespec last;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    double seconds = (now.tv_sec - last.tv_sec) + (now.tv_nsec - last.tv_nsec) / 1e9;
    last = now;
    return seconds;
}

static void run(const char *sql) {
    char *error = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &error) != SQLITE_OK) {
        fprintf(stderr, "import_floor: %s: %s\n", sql, error);
        exit(1);
    }
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: import_floor SOURCE.sqlite TARGET.sqlite\n");
        return 2;
    }
    check(sqlite3_open(argv[2], &db), "open");
    run("PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; PRAGMA journal_size_limit = 67108864; "
        "PRAGMA cache_size = -65536; PRAGMA temp_store = FILE");
    const int split = getenv("IMPORT_FLOOR_SPLIT") != NULL;
    const int side = getenv("IMPORT_FLOOR_SIDE") != NULL;
    if (side) run("PRAGMA journal_mode = DELETE; PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF");
    /* Split: this connection folds the log back itself only after the second transaction. */
    if (split) run("PRAGMA wal_autocheckpoint = 0");
    char attach[4096];
    snprintf(attach, sizeof attach, "ATTACH DATABASE '%s' AS src", argv[1]);
    run(attach);
    lap();
    run("BEGIN IMMEDIATE");

    /* The indexes of the empty tables go, to be built once from the loaded rows. */
    sqlite3_stmt *list;
    check(sqlite3_prepare_v2(db, "SELECT name, sql FROM main.sqlite_master WHERE type = 'index' AND sql IS NOT NULL", -1, &list, NULL), "indexes");
    char **rebuild = NULL, **names = NULL;
    int indexes = 0;
    while (sqlite3_step(list) == SQLITE_ROW) {
        rebuild = realloc(rebuild, sizeof(char *) * (indexes + 1));
        names = realloc(names, sizeof(char *) * (indexes + 1));
        names[indexes] = strdup((const char *)sqlite3_column_text(list, 0));
        rebuild[indexes++] = strdup((const char *)sqlite3_column_text(list, 1));
    }
    sqlite3_finalize(list);
    for (int i = 0; i < indexes; i++) {
        char drop[1024];
        snprintf(drop, sizeof drop, "DROP INDEX main.\"%s\"", names[i]);
        run(drop);
    }

    run("INSERT INTO main._ck_zone SELECT * FROM src._ck_zone");

    sqlite3_stmt *claim;
    check(sqlite3_prepare_v2(db, "INSERT INTO main._ck_record (zone, recordName, recordType, seq, deleted) VALUES (?1, ?2, ?3, ?4, 0) "
                                 "ON CONFLICT DO NOTHING", -1, &claim, NULL), "claim");
    sqlite3_stmt *tables;
    check(sqlite3_prepare_v2(db, "SELECT name FROM src.sqlite_master WHERE type = 'table' AND name NOT LIKE '\\_ck\\_%' ESCAPE '\\' "
                                 "AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name", -1, &tables, NULL), "tables");
    sqlite3_int64 seq = 0;
    while (sqlite3_step(tables) == SQLITE_ROW) {
        const char *table = (const char *)sqlite3_column_text(tables, 0);
        char sql[1 << 14];
        snprintf(sql, sizeof sql, "SELECT * FROM src.\"%s\"", table);
        sqlite3_stmt *rows;
        check(sqlite3_prepare_v2(db, sql, -1, &rows, NULL), "select");
        int columns = sqlite3_column_count(rows);
        int at = snprintf(sql, sizeof sql, "INSERT INTO main.\"%s\" VALUES (?", table);
        for (int i = 1; i < columns; i++) at += snprintf(sql + at, sizeof sql - at, ", ?");
        snprintf(sql + at, sizeof sql - at, ")");
        sqlite3_stmt *insert;
        check(sqlite3_prepare_v2(db, sql, -1, &insert, NULL), "insert");
        while (sqlite3_step(rows) == SQLITE_ROW) {
            sqlite3_bind_int64(claim, 1, sqlite3_column_int64(rows, 0));
            sqlite3_bind_text(claim, 2, (const char *)sqlite3_column_text(rows, 1), sqlite3_column_bytes(rows, 1), SQLITE_TRANSIENT);
            sqlite3_bind_text(claim, 3, table, -1, SQLITE_STATIC);
            sqlite3_bind_int64(claim, 4, ++seq);
            check(sqlite3_step(claim), "claim");
            sqlite3_reset(claim);
            for (int i = 0; i < columns; i++) sqlite3_bind_value(insert, i + 1, sqlite3_column_value(rows, i));
            check(sqlite3_step(insert), "insert");
            sqlite3_reset(insert);
        }
        sqlite3_finalize(insert);
        sqlite3_finalize(rows);
    }
    sqlite3_finalize(tables);
    sqlite3_finalize(claim);

    pthread_t folder;
    if (split) {
        run("COMMIT");
        target_path = argv[2];
        if (pthread_create(&folder, NULL, fold_back, NULL) != 0) { fprintf(stderr, "import_floor: no thread\n"); return 1; }
        run("BEGIN IMMEDIATE");
    }
    double rows = lap();
    /* As ckport does: the index sorter and the page cache get 16 MB each while the indexes are built. */
    run("PRAGMA cache_size = -16384");
    for (int i = 0; i < indexes; i++) run(rebuild[i]);
    run("PRAGMA cache_size = -65536");
    double built = lap();
    run("PRAGMA analysis_limit = 1000; ANALYZE");
    double analyzed = lap();
    run("COMMIT");
    if (split) {
        pthread_join(folder, NULL);
        check(sqlite3_wal_checkpoint_v2(db, "main", SQLITE_CHECKPOINT_PASSIVE, NULL, NULL), "checkpoint");
    }
    if (side) {
        /* The side file is synced once, whole, then takes the log's mode back. */
        run("PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL");
        int fd = open(argv[2], O_RDONLY);
        if (fd < 0 || fsync(fd) != 0) { fprintf(stderr, "import_floor: sync of %s failed\n", argv[2]); return 1; }
        close(fd);
    }
    double committed = lap();
    check(sqlite3_close(db), "close");
    double closed = lap();
    fprintf(stderr, "rows %.2f s, indexes %.2f s, analyze %.2f s, commit %.2f s, close %.2f s\n", rows, built, analyzed, committed, closed);
    printf("%lld records\n", (long long)seq);
    return 0;
}
