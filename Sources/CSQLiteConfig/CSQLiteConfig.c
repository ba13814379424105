#include "CSQLiteConfig.h"
#include <sqlite3.h>

int ckport_configure_sqlite(void) {
    int rc = sqlite3_config(SQLITE_CONFIG_MULTITHREAD);
    if (rc != SQLITE_OK) return rc;
    return sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}
