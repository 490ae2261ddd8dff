/* Tables for the terminal (lib/text_table.h): each column as wide as its
 * widest cell or header, at least its set width; alignment and gaps; a
 * short last row; cells cut at BG_TEXT_TABLE_CELL - 1 bytes; the number
 * of columns checked. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text_table.h"

/* What print writes, as a string the caller frees. (The stream's
 * pointers are static: open_memstream keeps their addresses until the
 * stream is closed.) */
static char *printed(const bg_text_table_t *t) {
    static char *text;
    static size_t size;
    text = NULL;
    FILE *out = open_memstream(&text, &size);
    assert_non_null(out);
    bg_text_table_print(t, out);
    assert_int_equal(fclose(out), 0);
    return text;
}

static const bg_text_column_t columns[] = {
    {"n", 'r', 3, 0},
    {"name", 'l', 6, 2},
    {"ms", 'r', 5, 1},
};

/* At their set widths when everything fits, as a printf of "%3s  %-6s
 * %5s" would print them. */
static void test_set_widths(void **state) {
    (void)state;
    bg_text_table_t *t = NULL;
    assert_int_equal(bg_text_table_create(columns, 3, &t), BG_OK);
    assert_int_equal(bg_text_table_add(t, "%d", 0), BG_OK);
    assert_int_equal(bg_text_table_add(t, "%s", "cpu:0"), BG_OK);
    assert_int_equal(bg_text_table_add(t, "%.1f", 2.5), BG_OK);
    char *text = printed(t);
    assert_string_equal(text, "  n  name      ms\n"
                              "  0  cpu:0    2.5\n");
    free(text);
    bg_text_table_destroy(t);
}

/* A wide cell widens its column on every row, the header's too; a
 * missing cell is blank; a row may be short. */
static void test_widening(void **state) {
    (void)state;
    bg_text_table_t *t = NULL;
    assert_int_equal(bg_text_table_create(columns, 3, &t), BG_OK);
    bg_text_table_add(t, "%d", 0);
    bg_text_table_add(t, "%s", "cpu:0");
    bg_text_table_add(t, "%.3f", 12345678.125);
    bg_text_table_add(t, "%d", 1);
    bg_text_table_add(t, "%s", "cuda:0/12");
    char *text = printed(t);
    assert_string_equal(text, "  n  name                ms\n"
                              "  0  cpu:0     12345678.125\n"
                              "  1  cuda:0/12             \n");
    free(text);
    bg_text_table_destroy(t);
}

/* A cell keeps its first BG_TEXT_TABLE_CELL - 1 bytes. */
static void test_long_cell(void **state) {
    (void)state;
    static const bg_text_column_t one[] = {{"x", 'l', 1, 0}};
    bg_text_table_t *t = NULL;
    assert_int_equal(bg_text_table_create(one, 1, &t), BG_OK);
    char wide[200];
    memset(wide, 'a', sizeof wide - 1);
    wide[sizeof wide - 1] = '\0';
    bg_text_table_add(t, "%s", wide);
    char *text = printed(t);
    const char *row = strchr(text, '\n') + 1;
    assert_int_equal(strlen(row), BG_TEXT_TABLE_CELL - 1 + 1); /* and the newline */
    free(text);
    bg_text_table_destroy(t);
}

/* Many rows: the table grows. */
static void test_many_rows(void **state) {
    (void)state;
    bg_text_table_t *t = NULL;
    assert_int_equal(bg_text_table_create(columns, 3, &t), BG_OK);
    for (int i = 0; i < 1000; i++) {
        bg_text_table_add(t, "%d", i);
        bg_text_table_add(t, "s%d", i);
        bg_text_table_add(t, "%d", 2 * i);
    }
    char *text = printed(t);
    int lines = 0;
    for (const char *c = text; *c != '\0'; c++) lines += *c == '\n';
    assert_int_equal(lines, 1001);
    assert_non_null(strstr(text, "\n999  s999    1998\n"));
    free(text);
    bg_text_table_destroy(t);
}

static void test_column_count(void **state) {
    (void)state;
    bg_text_table_t *t = NULL;
    assert_int_equal(bg_text_table_create(columns, 0, &t), BG_ERR_INVALID);
    assert_int_equal(bg_text_table_create(columns, BG_TEXT_TABLE_COLUMNS + 1, &t), BG_ERR_INVALID);
    assert_null(t);
    bg_text_table_destroy(NULL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_set_widths),   cmocka_unit_test(test_widening),
        cmocka_unit_test(test_long_cell),    cmocka_unit_test(test_many_rows),
        cmocka_unit_test(test_column_count),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
