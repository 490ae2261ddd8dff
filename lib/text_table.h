/* A table of text for the terminal, each column as wide as its widest cell
 * (its header included): a figure too large for the width a column
 * usually needs widens that column, instead of pushing the rest of its
 * row out from under the headers.
 *
 *   static const bg_text_column_t columns[] = {
 *       {"stage", 'r', 5, 0}, {"device", 'l', 8, 2}, {"fwd ms", 'r', 8, 1}};
 *   bg_text_table_t *t = NULL;
 *   BG_CHECK(bg_text_table_create(columns, 3, &t));
 *   bg_text_table_add(t, "%d", 0);  ... row by row, left to right
 *   bg_text_table_print(t, stdout);
 *   bg_text_table_destroy(t); */
#ifndef BG_TEXT_TABLE_H
#define BG_TEXT_TABLE_H

#include <stdio.h>

#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { BG_TEXT_TABLE_CELL = 64 };    /* bytes a cell keeps, NUL included */
enum { BG_TEXT_TABLE_COLUMNS = 64 }; /* the most columns a table has */

typedef struct bg_text_column {
    const char *header;
    char align; /* 'l' left, 'r' right */
    int width;  /* at least this many characters */
    int gap;    /* spaces before the column (the first's: its indent) */
} bg_text_column_t;

typedef struct bg_text_table bg_text_table_t;

/* A table of `count` columns (1 to BG_TEXT_TABLE_COLUMNS, else
 * BG_ERR_INVALID); `columns` must outlive it. BG_ERR_NOMEM. */
bg_status_t bg_text_table_create(const bg_text_column_t *columns, int count, bg_text_table_t **out);

/* The next cell, row by row and left to right; cut to
 * BG_TEXT_TABLE_CELL - 1 bytes. BG_ERR_NOMEM when the table cannot grow
 * (the cell is lost, and print says so). */
__attribute__((format(printf, 2, 3))) bg_status_t bg_text_table_add(bg_text_table_t *t,
                                                                    const char *format, ...);

/* The header line and every row, a row's missing cells blank. */
void bg_text_table_print(const bg_text_table_t *t, FILE *out);

/* NULL is a no-op. */
void bg_text_table_destroy(bg_text_table_t *t);

#ifdef __cplusplus
}
#endif

#endif /* BG_TEXT_TABLE_H */
