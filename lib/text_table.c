#include "text_table.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

struct bg_text_table {
    const bg_text_column_t *columns;
    int count;
    int cells, capacity;              /* cells added, and room for */
    char (*cell)[BG_TEXT_TABLE_CELL]; /* row-major */
    int lost;                         /* cells that found no room */
};

bg_status_t bg_text_table_create(const bg_text_column_t *columns, int count,
                                 bg_text_table_t **out) {
    if (count < 1 || count > BG_TEXT_TABLE_COLUMNS)
        return bg_error_set(BG_ERR_INVALID, "a table of %d columns (1 to %d)", count,
                            BG_TEXT_TABLE_COLUMNS);
    bg_text_table_t *t = calloc(1, sizeof *t);
    if (t == NULL) return bg_error_set(BG_ERR_NOMEM, "out of memory for a table");
    t->columns = columns;
    t->count = count;
    *out = t;
    return BG_OK;
}

bg_status_t bg_text_table_add(bg_text_table_t *t, const char *format, ...) {
    if (t->cells == t->capacity) {
        const int capacity = t->capacity > 0 ? 2 * t->capacity : 16 * t->count;
        char(*cell)[BG_TEXT_TABLE_CELL] = realloc(t->cell, sizeof *cell * (size_t)capacity);
        if (cell == NULL) {
            t->lost++;
            return bg_error_set(BG_ERR_NOMEM, "out of memory for a table of %d cells", capacity);
        }
        t->cell = cell;
        t->capacity = capacity;
    }
    va_list args;
    va_start(args, format);
    vsnprintf(t->cell[t->cells++], BG_TEXT_TABLE_CELL, format, args);
    va_end(args);
    return BG_OK;
}

/* Prints `text` in column c at `width`, after the column's gap. */
static void print_cell(FILE *out, const bg_text_column_t *c, int width, const char *text) {
    fprintf(out, "%*s", c->gap, "");
    fprintf(out, c->align == 'l' ? "%-*s" : "%*s", width, text);
}

void bg_text_table_print(const bg_text_table_t *t, FILE *out) {
    int width[BG_TEXT_TABLE_COLUMNS];
    const int count = t->count;
    for (int c = 0; c < count; c++) {
        width[c] = t->columns[c].width;
        const int header = (int)strlen(t->columns[c].header);
        if (header > width[c]) width[c] = header;
    }
    for (int i = 0; i < t->cells; i++) {
        const int c = i % t->count, length = (int)strlen(t->cell[i]);
        if (length > width[c]) width[c] = length;
    }
    for (int c = 0; c < count; c++) print_cell(out, &t->columns[c], width[c], t->columns[c].header);
    fputc('\n', out);
    const int rows = (t->cells + t->count - 1) / t->count;
    for (int r = 0; r < rows; r++) {
        for (int c = 0; c < count; c++) {
            const int i = r * t->count + c;
            /* A left-aligned last column is not padded out. */
            const int last = c == count - 1 && t->columns[c].align == 'l';
            print_cell(out, &t->columns[c], last ? 0 : width[c], i < t->cells ? t->cell[i] : "");
        }
        fputc('\n', out);
    }
    if (t->lost > 0)
        fprintf(out, "(%d cell%s of this table lost: out of memory)\n", t->lost,
                t->lost == 1 ? "" : "s");
}

void bg_text_table_destroy(bg_text_table_t *t) {
    if (t == NULL) return;
    free(t->cell);
    free(t);
}
