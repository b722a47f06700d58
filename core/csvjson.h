/* csvjson.h: the header line of the project's tables, and a table file (the benchmarks' CSVs:
 * dmuon-comm-1, dmuon-costs-1, dmuon-costs-2) as one JSON document, so that every benchmark's --json is the same mechanism
 * over the rows it writes:
 *   {"format": "dmuon-bench-1", "benchmark": NAME, "table": "dmuon-comm-1",
 *    "meta": {KEY: VALUE, ...}, "columns": [...], "rows": [{COLUMN: VALUE, ...}, ...]}
 * "# FORMAT key=value ..." and "# key: value" lines give table and meta (other comment lines go
 * to "notes"); the first other line is the header; a field that reads whole as a number is a
 * JSON number (non-finite ones null), any other a string. */
#ifndef DM_CSVJSON_H
#define DM_CSVJSON_H
#include <stdio.h>

#include "dm_error.h"

int dm_csv_json(const char *path, const char *benchmark, FILE *out, dm_err *err);

/* The one header convention of the tables the commands write (--csv of plan, run, compare,
 * scale.csv; the benchmarks'): a first line "# FORMAT key=value ..." naming the case (model,
 * cluster, strategy, gpus where they apply), which dm_csv_json reads back as meta. dm_csv_case
 * starts that line: "# FORMAT model=M cluster=C", then strategy (unless NULL) and gpus (unless
 * < 0); the caller adds its own words and the newline. dm_csv_meta writes one " key=value"
 * word (spaces in the value become '_'; NULL writes "-"), dm_csv_meta_int one with a number. */
void dm_csv_case(FILE *f, const char *format, const char *model, const char *cluster, const char *strategy, int gpus);
void dm_csv_meta(FILE *f, const char *key, const char *value);
void dm_csv_meta_int(FILE *f, const char *key, long long value);

#endif
