// The system's SQLite (libsqlite3-dev). SQLITE_TRANSIENT is a macro Swift cannot import.
#include <sqlite3.h>
static inline sqlite3_destructor_type risc_sqlite_transient(void) { return SQLITE_TRANSIENT; }
