/* File-name helpers shared by the writers of files (lib/atomic_file.c) and
 * the command line's checks of output paths (cli/options.c). */
#ifndef BG_PATH_H
#define BG_PATH_H

#ifdef __cplusplus
extern "C" {
#endif

/* The folder that holds `path`: "." for a bare name, "/" for a name in the
 * root, else everything before the last slash. A new string to free, or
 * NULL when memory runs out. */
char *bg_path_folder(const char *path);

#ifdef __cplusplus
}
#endif

#endif /* BG_PATH_H */
