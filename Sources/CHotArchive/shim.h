#ifndef HOT_CARCHIVE_SHIM_H
#define HOT_CARCHIVE_SHIM_H
#include <archive.h>
#include <archive_entry.h>
#endif
