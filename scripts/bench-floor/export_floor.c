/*
 * The floor of ckport's export: the JSON Lines file `ckport export` writes, byte for byte,
 * written from the same store by a small C program with nothing else to do.
 *
 *   export_floor STORE.sqlite OUT.jsonl
 *
 * Records come in ckport's order (record type, then zone — scope, zone name, owner — then
 * record name), each in CloudKit Web Services' shape with its system fields, fields sorted by
 * name as {"value": …, "type": …}, then a share's details. Field types are read from the schema
 * the store keeps. It knows the types the benchmark's data uses (STRING, INT64, TIMESTAMP,
 * REFERENCE, and BYTES for its shares) and stops on any other. The file is synced before the
 * program ends, as ckport syncs an export.
 */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum kind { STRING, INT64, TIMESTAMP, REFERENCE, BYTES };
struct field { char name[128]; enum kind kind; int column; };
struct type { char name[128]; struct field fields[256]; int count; };
struct zone { sqlite3_int64 id; int rank; char name[256]; char owner[256]; };

static sqlite3 *db;
static char *out;
static size_t used, capacity;
static FILE *file;

static void flush(void) {
    if (fwrite(out, 1, used, file) != used) { perror("export_floor: write"); exit(1); }
    used = 0;
}
static inline void put(const char *bytes, size_t n) {
    if (used + n > capacity) flush();
    if (n > capacity) { fwrite(bytes, 1, n, file); return; }
    memcpy(out + used, bytes, n);
    used += n;
}
#define PUT(literal) put(literal, sizeof(literal) - 1)
static inline void putc_(char c) { if (used + 1 > capacity) flush(); out[used++] = c; }

static void string(const unsigned char *s, int n) {
    static const char hex[] = "0123456789abcdef";
    putc_('"');
    int run = 0;
    for (int i = 0; i < n; i++) {
        unsigned char b = s[i];
        if (b >= 0x20 && b != '"' && b != '\\') continue;
        put((const char *)s + run, i - run);
        switch (b) {
        case '"': PUT("\\\""); break;
        case '\\': PUT("\\\\"); break;
        case '\n': PUT("\\n"); break;
        case '\r': PUT("\\r"); break;
        case '\t': PUT("\\t"); break;
        case '\b': PUT("\\b"); break;
        case '\f': PUT("\\f"); break;
        default: { char u[6] = {'\\', 'u', '0', '0', hex[b >> 4], hex[b & 15]}; put(u, 6); }
        }
        run = i + 1;
    }
    put((const char *)s + run, n - run);
    putc_('"');
}

static void integer(sqlite3_int64 v) {
    char digits[24];
    int n = snprintf(digits, sizeof digits, "%lld", (long long)v);
    put(digits, n);
}

/* Standard Base64, padded, in quotes. */
static void base64_column(sqlite3_stmt *row, int i) {
    static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const unsigned char *b = sqlite3_column_blob(row, i);
    int n = sqlite3_column_bytes(row, i);
    putc_('"');
    int k = 0;
    for (; k + 3 <= n; k += 3) {
        unsigned v = b[k] << 16 | b[k + 1] << 8 | b[k + 2];
        putc_(alphabet[v >> 18 & 63]); putc_(alphabet[v >> 12 & 63]); putc_(alphabet[v >> 6 & 63]); putc_(alphabet[v & 63]);
    }
    if (n - k > 0) {
        unsigned v = b[k] << 16 | (n - k == 2 ? b[k + 1] << 8 : 0);
        putc_(alphabet[v >> 18 & 63]); putc_(alphabet[v >> 12 & 63]);
        putc_(n - k == 2 ? alphabet[v >> 6 & 63] : '='); putc_('=');
    }
    putc_('"');
}

static void text_column(sqlite3_stmt *row, int i) {
    string(sqlite3_column_text(row, i), sqlite3_column_bytes(row, i));
}

static void stamp(sqlite3_stmt *row, int time, const char *key) {
    if (sqlite3_column_type(row, time) == SQLITE_NULL) return;
    put(key, strlen(key));
    PUT("{\"timestamp\":");
    integer(sqlite3_column_int64(row, time));
    if (sqlite3_column_type(row, time + 1) != SQLITE_NULL) { PUT(",\"userRecordName\":"); text_column(row, time + 1); }
    if (sqlite3_column_type(row, time + 2) != SQLITE_NULL) { PUT(",\"deviceID\":"); text_column(row, time + 2); }
    putc_('}');
}

static int compare_types(const void *a, const void *b) { return strcmp(((const struct type *)a)->name, ((const struct type *)b)->name); }
static int compare_fields(const void *a, const void *b) { return strcmp(((const struct field *)a)->name, ((const struct field *)b)->name); }
static int compare_zones(const void *a, const void *b) {
    const struct zone *x = a, *y = b;
    if (x->rank != y->rank) return x->rank - y->rank;
    int c = strcmp(x->name, y->name);
    return c ? c : strcmp(x->owner, y->owner);
}

/* The record types and their fields, from the schema text the store keeps in _ck_meta. */
static int read_schema(struct type *types) {
    sqlite3_stmt *s;
    sqlite3_prepare_v2(db, "SELECT value FROM _ck_meta WHERE key = 'schema'", -1, &s, NULL);
    if (sqlite3_step(s) != SQLITE_ROW) { fprintf(stderr, "export_floor: no schema in the store\n"); exit(1); }
    char *schema = strdup((const char *)sqlite3_column_text(s, 0));
    sqlite3_finalize(s);
    int count = 0;
    struct type *current = NULL;
    for (char *line = strtok(schema, "\n"); line; line = strtok(NULL, "\n")) {
        char name[128], kind[64];
        /* A type's name is quoted when it is not an identifier ("cloudkit.share"). */
        if (sscanf(line, " RECORD TYPE \"%127[^\"]\"", name) == 1 || sscanf(line, " RECORD TYPE %127[A-Za-z0-9_]", name) == 1) {
            current = &types[count++];
            memset(current, 0, sizeof *current);
            strcpy(current->name, name);
        } else if (current && (sscanf(line, " \"%127[^\"]\" %63[A-Z0-9_]", name, kind) == 2 || sscanf(line, " %127[A-Za-z0-9_] %63[A-Z0-9_]", name, kind) == 2)
                   && strncmp(name, "___", 3) != 0 && strcmp(name, "GRANT") != 0) {
            /* System fields (quoted, "___…") are columns of every table, read apart. */
            struct field *f = &current->fields[current->count++];
            strcpy(f->name, name);
            if (!strcmp(kind, "STRING")) f->kind = STRING;
            else if (!strcmp(kind, "INT64")) f->kind = INT64;
            else if (!strcmp(kind, "TIMESTAMP")) f->kind = TIMESTAMP;
            else if (!strcmp(kind, "REFERENCE")) f->kind = REFERENCE;
            else if (!strcmp(kind, "BYTES")) f->kind = BYTES;
            else { fprintf(stderr, "export_floor: %s.%s is %s, which this program does not write\n", current->name, name, kind); exit(1); }
        }
    }
    free(schema);
    qsort(types, count, sizeof *types, compare_types);
    return count;
}

int main(int argc, char **argv) {
    if (argc != 3) { fprintf(stderr, "usage: export_floor STORE.sqlite OUT.jsonl\n"); return 2; }
    if (sqlite3_open_v2(argv[1], &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) { fprintf(stderr, "export_floor: cannot open %s\n", argv[1]); return 1; }
    sqlite3_exec(db, "PRAGMA cache_size = -65536; BEGIN", NULL, NULL, NULL);
    static struct type types[64];
    int type_count = read_schema(types);
    static struct zone zones[100000];
    int zone_count = 0;
    sqlite3_stmt *z;
    sqlite3_prepare_v2(db, "SELECT id, scope, zoneName, ownerRecordName FROM _ck_zone", -1, &z, NULL);
    while (sqlite3_step(z) == SQLITE_ROW) {
        struct zone *zone = &zones[zone_count++];
        zone->id = sqlite3_column_int64(z, 0);
        const char *scope = (const char *)sqlite3_column_text(z, 1);
        zone->rank = !strcmp(scope, "private") ? 0 : !strcmp(scope, "shared") ? 1 : 2;
        snprintf(zone->name, sizeof zone->name, "%s", (const char *)sqlite3_column_text(z, 2));
        snprintf(zone->owner, sizeof zone->owner, "%s", (const char *)sqlite3_column_text(z, 3));
    }
    sqlite3_finalize(z);
    qsort(zones, zone_count, sizeof *zones, compare_zones);
    static const char *scopes[] = {"private", "shared", "public"};
    static const char *actions[] = {"NONE", "DELETE_SELF", "VALIDATE"};

    file = fopen(argv[2], "wb");
    if (!file) { perror("export_floor"); return 1; }
    capacity = 1 << 20;
    out = malloc(capacity);
    long long records = 0;
    for (int t = 0; t < type_count; t++) {
        struct type *type = &types[t];
        qsort(type->fields, type->count, sizeof *type->fields, compare_fields);
        char sql[1 << 14];
        int at = snprintf(sql, sizeof sql, "SELECT ___recordID, ___etag, ___createTime, ___createdBy, ___createdDevice, ___modTime, ___modifiedBy, ___modifiedDevice, ___parent, ___share, ___shareDetails");
        int column = 11;
        for (int f = 0; f < type->count; f++) {
            struct field *field = &type->fields[f];
            field->column = column;
            at += snprintf(sql + at, sizeof sql - at, ", \"%s\"", field->name);
            column++;
            if (field->kind == REFERENCE) { at += snprintf(sql + at, sizeof sql - at, ", \"%s:action\"", field->name); column++; }
        }
        snprintf(sql + at, sizeof sql - at, " FROM \"%s\" WHERE ___zone = ?1 ORDER BY ___recordID", type->name);
        sqlite3_stmt *row;
        if (sqlite3_prepare_v2(db, sql, -1, &row, NULL) != SQLITE_OK) { fprintf(stderr, "export_floor: %s\n", sqlite3_errmsg(db)); return 1; }
        for (int zi = 0; zi < zone_count; zi++) {
            struct zone *zone = &zones[zi];
            sqlite3_bind_int64(row, 1, zone->id);
            while (sqlite3_step(row) == SQLITE_ROW) {
                PUT("{\"recordName\":"); text_column(row, 0);
                PUT(",\"recordType\":"); string((const unsigned char *)type->name, strlen(type->name));
                PUT(",\"scope\":\""); put(scopes[zone->rank], strlen(scopes[zone->rank]));
                PUT("\",\"zoneID\":{\"zoneName\":"); string((const unsigned char *)zone->name, strlen(zone->name));
                PUT(",\"ownerRecordName\":"); string((const unsigned char *)zone->owner, strlen(zone->owner));
                putc_('}');
                if (sqlite3_column_type(row, 1) != SQLITE_NULL) { PUT(",\"recordChangeTag\":"); text_column(row, 1); }
                stamp(row, 2, ",\"created\":");
                stamp(row, 5, ",\"modified\":");
                if (sqlite3_column_type(row, 8) != SQLITE_NULL) { PUT(",\"parent\":{\"recordName\":"); text_column(row, 8); putc_('}'); }
                if (sqlite3_column_type(row, 9) != SQLITE_NULL) { PUT(",\"share\":{\"recordName\":"); text_column(row, 9); putc_('}'); }
                PUT(",\"fields\":{");
                int first = 1;
                for (int f = 0; f < type->count; f++) {
                    struct field *field = &type->fields[f];
                    if (sqlite3_column_type(row, field->column) == SQLITE_NULL) continue;
                    if (!first) putc_(',');
                    first = 0;
                    string((const unsigned char *)field->name, strlen(field->name));
                    PUT(":{\"value\":");
                    switch (field->kind) {
                    case STRING: text_column(row, field->column); PUT(",\"type\":\"STRING\"}"); break;
                    case INT64: integer(sqlite3_column_int64(row, field->column)); PUT(",\"type\":\"INT64\"}"); break;
                    case TIMESTAMP: integer(sqlite3_column_int64(row, field->column)); PUT(",\"type\":\"TIMESTAMP\"}"); break;
                    case BYTES: base64_column(row, field->column); PUT(",\"type\":\"BYTES\"}"); break;
                    case REFERENCE: {
                        PUT("{\"recordName\":"); text_column(row, field->column);
                        int action = sqlite3_column_int(row, field->column + 1);
                        PUT(",\"action\":\""); put(actions[action], strlen(actions[action]));
                        PUT("\"},\"type\":\"REFERENCE\"}");
                        break;
                    }
                    }
                }
                putc_('}');
                /* A share's details: the members of the object the store keeps, spliced in. */
                int details = sqlite3_column_bytes(row, 10);
                const unsigned char *text = sqlite3_column_text(row, 10);
                if (text && details > 2 && text[0] == '{' && text[details - 1] == '}') { putc_(','); put((const char *)text + 1, details - 2); }
                PUT("}\n");
                records++;
            }
            sqlite3_reset(row);
        }
        sqlite3_finalize(row);
    }
    flush();
    if (fflush(file) != 0 || fsync(fileno(file)) != 0 || fclose(file) != 0) { perror("export_floor"); return 1; }
    sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
    sqlite3_close(db);
    printf("%lld records\n", records);
    return 0;
}
