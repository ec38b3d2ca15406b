// The floor of indexing pushed SETs in SQLite on this machine (issue 30), without risc: a C
// program that does only what a durable receiver's index must do for each SET, the cheapest way
// SQLite allows, and prints the CPU it took a SET.
//
// Each SET: one INSERT into a `sets` table of risc's shape (UNIQUE (issuer, jti) for "stored
// once", the token and subjects kept for replay and the queue, the partial indexes risc keeps) and,
// with --actions, the row that records its action applied once (`applied_actions`). Rows commit in
// batches (risc's writer commits 64 to 92 under `risc bench serve`), WAL with synchronous = NORMAL,
// the WAL fdatasynced every 256 SETs and checkpointed as SQLite does by default, all on this
// thread: no HTTP, no verification, no event-log line, no thread hand-off, no Swift.
//
// Build and run (the bench's own tokens, so the rows are the size risc stores):
//   cc -O2 -o /tmp/sqlite-floor Benchmarks/ceiling/sqlite-floor.c -lsqlite3
//   /tmp/sqlite-floor /tmp/tokens.bin 125000 88 [--actions]
// Compare its "CPU a SET" with what risc's journal path leaves for the index: the memory-only Go
// peer's CPU a request minus risc's with loop-journal.patch (docs/performance.md).
#include <fcntl.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static void check(int rc, sqlite3 *db, const char *what) {
    if (rc != SQLITE_OK && rc != SQLITE_DONE && rc != SQLITE_ROW) {
        fprintf(stderr, "%s: %s\n", what, sqlite3_errmsg(db));
        exit(1);
    }
}

static double cpu_seconds(void) {
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    return usage.ru_utime.tv_sec + usage.ru_stime.tv_sec + (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

static double wall_seconds(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return now.tv_sec + now.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s TOKEN_FILE ROWS BATCH [--actions]\n", argv[0]);
        return 2;
    }
    long rows = atol(argv[2]), batch = atol(argv[3]);
    int actions = argc > 4 && strcmp(argv[4], "--actions") == 0;
    FILE *tokens = fopen(argv[1], "r");
    if (!tokens || rows <= 0 || batch <= 0) {
        fprintf(stderr, "cannot read %s, or ROWS/BATCH not positive\n", argv[1]);
        return 2;
    }
    char directory[] = "/tmp/sqlite-floor-XXXXXX";
    if (!mkdtemp(directory)) return 1;
    char path[256], wal[300];
    snprintf(path, sizeof path, "%s/floor.sqlite3", directory);
    snprintf(wal, sizeof wal, "%s-wal", path);

    sqlite3 *db;
    check(sqlite3_open(path, &db), db, "open");
    check(sqlite3_exec(db,
                       "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA cache_size = -8192;"
                       "CREATE TABLE sets (id INTEGER PRIMARY KEY, issuer TEXT NOT NULL, jti TEXT NOT NULL, iss TEXT NOT NULL,"
                       " iat REAL NOT NULL, received_at REAL NOT NULL, last_received_at REAL NOT NULL,"
                       " deliveries INTEGER NOT NULL DEFAULT 1, remote TEXT, content_type TEXT, event_types TEXT NOT NULL,"
                       " subjects TEXT NOT NULL, token TEXT NOT NULL, state TEXT NOT NULL DEFAULT 'pending',"
                       " attempts INTEGER NOT NULL DEFAULT 0, next_attempt_at REAL NOT NULL DEFAULT 0, last_error TEXT,"
                       " processed_at REAL, pruned_at REAL, retry_since REAL, UNIQUE (issuer, jti));"
                       "CREATE INDEX sets_queue ON sets (next_attempt_at, id) WHERE state = 'pending';"
                       "CREATE INDEX sets_dead ON sets (id) WHERE state = 'dead';"
                       "CREATE INDEX sets_prunable ON sets (processed_at) WHERE state = 'done' AND pruned_at IS NULL;"
                       "CREATE INDEX sets_stripped ON sets (received_at) WHERE pruned_at IS NOT NULL;"
                       "CREATE INDEX sets_pending_received ON sets (received_at) WHERE state = 'pending';"
                       "CREATE TABLE applied_actions (set_id INTEGER NOT NULL, event_index INTEGER NOT NULL, action TEXT NOT NULL,"
                       " applied_at REAL NOT NULL, result TEXT NOT NULL, PRIMARY KEY (set_id, event_index, action));",
                       NULL, NULL, NULL),
          db, "schema");
    sqlite3_stmt *insert, *applied, *begin, *commit;
    check(sqlite3_prepare_v2(db,
                             "INSERT INTO sets (issuer, jti, iss, iat, received_at, last_received_at, remote, content_type,"
                             " event_types, subjects, token, state, attempts, processed_at)"
                             " VALUES (?1, ?2, ?3, ?4, ?5, ?5, ?6, ?7, ?8, ?9, ?10, 'done', 1, ?5) ON CONFLICT (issuer, jti) DO NOTHING",
                             -1, &insert, NULL),
          db, "prepare");
    check(sqlite3_prepare_v2(db, "INSERT INTO applied_actions VALUES (?1, 0, 'end_sessions', ?2, 'unknown subject: no-op')", -1,
                             &applied, NULL),
          db, "prepare");
    check(sqlite3_prepare_v2(db, "BEGIN IMMEDIATE", -1, &begin, NULL), db, "prepare");
    check(sqlite3_prepare_v2(db, "COMMIT", -1, &commit, NULL), db, "prepare");

    // The tokens first, so that reading them is not measured.
    char **lines = calloc(rows, sizeof *lines);
    size_t capacity = 0;
    for (long i = 0; i < rows; i++) {
        char *line = NULL;
        ssize_t length = getline(&line, &capacity, tokens);
        if (length <= 1) {
            fprintf(stderr, "%s has %ld tokens, fewer than ROWS\n", argv[1], i);
            return 2;
        }
        line[length - 1] = 0;
        lines[i] = line;
        capacity = 0;
    }
    int walDescriptor = -1;
    const char *subjects = "[{\"type\":\"iss_sub\",\"iss\":\"https://accounts.google.com/\",\"sub\":\"100000008\"}]";
    const char *types = "[\"https://schemas.openid.net/secevent/risc/event-type/sessions-revoked\"]";
    double cpu = cpu_seconds(), wall = wall_seconds();
    long unsynced = 0;
    for (long start = 0; start < rows; start += batch) {
        check(sqlite3_step(begin), db, "begin");
        sqlite3_reset(begin);
        for (long i = start; i < start + batch && i < rows; i++) {
            char jti[33];
            // The token's own jti is in its payload; a hash of the line stands in for it (as random).
            unsigned long long h = 1469598103934665603ULL, g = 7;
            for (const char *c = lines[i]; *c; c++) { h = (h ^ (unsigned char)*c) * 1099511628211ULL; g = g * 31 + (unsigned char)*c; }
            snprintf(jti, sizeof jti, "%016llx%016llx", h, g);
            double now = (double)time(NULL);
            sqlite3_bind_text(insert, 1, "https://accounts.google.com/", -1, SQLITE_STATIC);
            sqlite3_bind_text(insert, 2, jti, -1, SQLITE_TRANSIENT);
            sqlite3_bind_text(insert, 3, "https://accounts.google.com/", -1, SQLITE_STATIC);
            sqlite3_bind_double(insert, 4, now);
            sqlite3_bind_double(insert, 5, now);
            sqlite3_bind_text(insert, 6, "127.0.0.1", -1, SQLITE_STATIC);
            sqlite3_bind_text(insert, 7, "application/secevent+jwt", -1, SQLITE_STATIC);
            sqlite3_bind_text(insert, 8, types, -1, SQLITE_STATIC);
            sqlite3_bind_text(insert, 9, subjects, -1, SQLITE_STATIC);
            sqlite3_bind_text(insert, 10, lines[i], -1, SQLITE_STATIC);
            check(sqlite3_step(insert), db, "insert");
            sqlite3_reset(insert);
            if (actions) {
                sqlite3_bind_int64(applied, 1, sqlite3_last_insert_rowid(db));
                sqlite3_bind_double(applied, 2, now);
                check(sqlite3_step(applied), db, "applied");
                sqlite3_reset(applied);
            }
            unsynced++;
        }
        check(sqlite3_step(commit), db, "commit");
        sqlite3_reset(commit);
        if (unsynced >= 256) {
            if (walDescriptor < 0) walDescriptor = open(wal, O_RDONLY | O_CLOEXEC);
            if (walDescriptor < 0 || fdatasync(walDescriptor) != 0) return 1;
            unsynced = 0;
        }
    }
    cpu = cpu_seconds() - cpu;
    wall = wall_seconds() - wall;
    sqlite3_stmt *count;
    long counted[2] = {0, 0};
    const char *counts[2] = {"SELECT count(*) FROM sets", "SELECT count(*) FROM applied_actions"};
    for (int i = 0; i < 2; i++) {
        check(sqlite3_prepare_v2(db, counts[i], -1, &count, NULL), db, "prepare");
        check(sqlite3_step(count), db, "count");
        counted[i] = sqlite3_column_int64(count, 0);
        sqlite3_finalize(count);
    }
    printf("SQLite floor: %ld SETs in batches of %ld%s: %.1f µs CPU a SET (%.0f SETs/s of one core), %.2f s wall;"
           " %ld rows stored, %ld actions recorded\n",
           rows, batch, actions ? ", each with its applied_actions row" : "", cpu / rows * 1e6, rows / cpu, wall, counted[0], counted[1]);
    for (sqlite3_stmt *statement = NULL; (statement = sqlite3_next_stmt(db, NULL));) sqlite3_finalize(statement);
    sqlite3_close(db);
    char command[300];
    snprintf(command, sizeof command, "rm -rf %s", directory);
    return system(command) == 0 ? 0 : 1;
}
