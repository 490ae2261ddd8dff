/* File-name helpers shared by the writers of files (lib/atomic_file.c) and
 * the command line's checks of output paths (cli/options.c). */
#ifndef BG_PATH_H
#define BG_PATH_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The folder that holds `path`: "." for a bare name, "/" for a name in the
 * root, else everything before the last slash. A new string to free, or
 * NULL when memory runs out. */
char *bg_path_folder(const char *path);

/* The last component of `path` (after its last slash), inside `path`. */
const char *bg_path_name(const char *path);

/* What goes between `folder` and a name in it: "/", or "" where the folder
 * ends in one ("data/" named "data//train-..." before 2026-12-06). */
const char *bg_path_separator(const char *folder);

/* "folder/name": a new string to free, or NULL when memory runs out. */
char *bg_path_join(const char *folder, const char *name);

/* The path the symbolic link `path` names, a relative target taken from
 * the link's own folder: a new string to free. NULL with errno set when
 * `path` is no link or cannot be read (EINVAL, ENOENT, ...), when the
 * target is too long to read (ENAMETOOLONG), or when memory runs out. */
char *bg_path_link_target(const char *path);

/* Room for bg_path_shell_word of any path (PATH_MAX, 4096 bytes), quoted:
 * each ' written as four bytes, and the quotes around it. */
enum { BG_PATH_SHELL_WORD_MAX = 4 * 4096 + 3 };

/* `path` as one word of a shell command, for the commands messages
 * suggest ("go on with --resume PATH"): itself when it holds only letters,
 * digits and _ . / : @ % + , = -, else single-quoted into `buf` (each '
 * written '\''). When the quoted form does not fit in `size` bytes, `path`
 * itself. */
const char *bg_path_shell_word(const char *path, char *buf, size_t size);

#ifdef __cplusplus
}
#endif

#endif /* BG_PATH_H */
