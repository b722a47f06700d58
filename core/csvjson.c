/* csvjson.c: the tables' header words, and a benchmark's table file as one JSON document (csvjson.h). */
#include "csvjson.h"

#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "lines.h"

#define MAX_COLS 64

/* s spelled as a JSON number (-? digits, no leading zero, [.digits], [e[+-]digits])? */
static int json_number(const char *s)
{
    if (*s == '-') s++;
    if (*s == '0') s++;
    else if (*s >= '1' && *s <= '9') while (*s >= '0' && *s <= '9') s++;
    else return 0;
    if (*s == '.') {
        if (!(*++s >= '0' && *s <= '9')) return 0;
        while (*s >= '0' && *s <= '9') s++;
    }
    if (*s == 'e' || *s == 'E') {
        s++;
        if (*s == '+' || *s == '-') s++;
        if (!(*s >= '0' && *s <= '9')) return 0;
        while (*s >= '0' && *s <= '9') s++;
    }
    return *s == 0;
}

static void value(FILE *f, const char *s)
{
    char *end;
    double v = strtod(s, &end);
    if (json_number(s)) fputs(s, f); /* as the table wrote it */
    else if (*s && !*end && end != s) json_write_number(f, v, 17); /* inf, nan: null */
    else json_write_string(f, s);
}

/* Split line at commas in place (no quoting in these tables); returns the fields. */
static int split(char *line, char **fields, int max)
{
    int n = 0;
    for (char *p = line; n < max;) {
        fields[n++] = p;
        char *c = strchr(p, ',');
        if (!c) break;
        *c = 0;
        p = c + 1;
    }
    return n;
}

int dm_csv_json(const char *path, const char *benchmark, FILE *out, dm_err *err)
{
    dm_lines *r = dm_lines_open(path, 0, 0, err);
    if (!r) return -1;
    char *line, *cols[MAX_COLS], colbuf[8192] = "", table[64] = "";
    int ncols = 0, rc = 0, nrows = 0, nmeta = 0, nnotes = 0;
    /* meta and notes first (comment lines come before the header), then the rows */
    char *meta = NULL, *notes = NULL;
    size_t meta_len = 0, notes_len = 0;
    FILE *mf = open_memstream(&meta, &meta_len), *nf = open_memstream(&notes, &notes_len);
    FILE *rf = NULL;
    char *rows = NULL;
    size_t rows_len = 0;
    if (!mf || !nf || !(rf = open_memstream(&rows, &rows_len))) {
        rc = dm_err_set(err, "out of memory");
        goto done;
    }
    int got;
    while ((got = dm_lines_next(r, &line, NULL, err)) == 1) {
        if (!*line) continue;
        if (line[0] == '#') {
            char *s = line + 1;
            while (*s == ' ') s++;
            char *colon = strstr(s, ": ");
            if (!strncmp(s, "dmuon-", 6) && !table[0]) { /* "# FORMAT key=value ..." */
                char *sp = strchr(s, ' ');
                snprintf(table, sizeof table, "%.*s", sp ? (int)(sp - s) : (int)strlen(s), s);
                for (char *w = sp ? strtok(sp, " ") : NULL; w; w = strtok(NULL, " ")) {
                    char *eq = strchr(w, '=');
                    if (!eq) continue;
                    *eq = 0;
                    fputs(nmeta++ ? ", " : "", mf);
                    json_write_string(mf, w);
                    fputs(": ", mf);
                    value(mf, eq + 1);
                }
            } else if (colon && colon > s && !memchr(s, ' ', (size_t)(colon - s))) { /* "# key: value" */
                *colon = 0;
                fputs(nmeta++ ? ", " : "", mf);
                json_write_string(mf, s);
                fputs(": ", mf);
                value(mf, colon + 2);
            } else {
                fputs(nnotes++ ? ", " : "", nf);
                json_write_string(nf, s);
            }
            continue;
        }
        if (!ncols) {
            snprintf(colbuf, sizeof colbuf, "%s", line);
            ncols = split(colbuf, cols, MAX_COLS);
            continue;
        }
        char *f[MAX_COLS];
        int n = split(line, f, MAX_COLS);
        fputs(nrows++ ? ",\n  {" : "\n  {", rf);
        for (int i = 0; i < n && i < ncols; i++) {
            fputs(i ? ", " : "", rf);
            json_write_string(rf, cols[i]);
            fputs(": ", rf);
            value(rf, f[i]);
        }
        fputc('}', rf);
    }
    if (got < 0) rc = -1;
done:
    if (mf) fclose(mf);
    if (nf) fclose(nf);
    if (rf) fclose(rf);
    dm_lines_close(r);
    if (rc == 0) {
        fputs("{\"format\": \"dmuon-bench-1\", \"benchmark\": ", out);
        json_write_string(out, benchmark);
        fputs(", \"table\": ", out);
        json_write_string(out, table[0] ? table : "-");
        fprintf(out, ",\n \"meta\": {%s},\n \"notes\": [%s],\n \"columns\": [", meta ? meta : "", notes ? notes : "");
        for (int i = 0; i < ncols; i++) {
            fputs(i ? ", " : "", out);
            json_write_string(out, cols[i]);
        }
        fprintf(out, "],\n \"rows\": [%s]}\n", rows ? rows : "");
    }
    free(meta);
    free(notes);
    free(rows);
    return rc;
}

void dm_csv_meta(FILE *f, const char *key, const char *value)
{
    fprintf(f, " %s=", key);
    if (!value || !*value) value = "-";
    for (const char *c = value; *c; c++) fputc(*c == ' ' || *c == '\n' || *c == ',' ? '_' : *c, f);
}

void dm_csv_meta_int(FILE *f, const char *key, long long value) { fprintf(f, " %s=%lld", key, value); }

void dm_csv_case(FILE *f, const char *format, const char *model, const char *cluster, const char *strategy, int gpus)
{
    fprintf(f, "# %s", format);
    dm_csv_meta(f, "model", model);
    dm_csv_meta(f, "cluster", cluster);
    if (strategy) dm_csv_meta(f, "strategy", strategy);
    if (gpus >= 0) dm_csv_meta_int(f, "gpus", gpus);
}
