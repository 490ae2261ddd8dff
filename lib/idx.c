/* IDX parsing and loading. These files come from outside (and the parser
 * is fuzzed): every length in a header is checked before its data are
 * read, in memory against the bytes present; from a file, a plain one's
 * size is checked first, and the data's buffer grows with the bytes read,
 * never past what the header promised. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* open(), close() */
#endif

#include "idx.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zlib.h>

#include "regular_file.h"

enum {
    IDX_TYPE_UBYTE = 0x08,
    IDX_MAGIC_BYTES = 4,
    IDX_HEADER_MAX = IDX_MAGIC_BYTES + 4 * BG_IDX_MAX_DIMS,
    IDX_READ_FIRST = 1 << 16, /* the data's first buffer, doubled as it fills */
    IDX_READ_CHUNK = 1 << 24, /* the most one inflate call writes (avail_out is a uInt) */
};

/* What the header says, once it has been checked against `size`. */
typedef struct idx_layout {
    int ndim;
    int64_t dims[BG_IDX_MAX_DIMS];
    size_t header_bytes;
    size_t data_bytes;
} idx_layout_t;

static uint32_t read_be32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

/* "65535x65535x65535x65535", for messages about the dimensions. */
static void format_dims(char *text, size_t capacity, const uint64_t *dims, int ndim) {
    size_t used = 0;
    text[0] = '\0';
    for (int i = 0; i < ndim && used < capacity; i++) {
        int n = snprintf(text + used, capacity - used, "%s%llu", i ? "x" : "",
                         (unsigned long long)dims[i]);
        if (n < 0) break;
        used += (size_t)n;
    }
}

/* Validates a header: magic, type, dimensions and the data's size they
 * give, from the first `size` bytes of a file (at least the header's, or it
 * is truncated). `plain_named_gz`: the file, named .gz, was read as it is
 * (no gzip stream), which a bad magic then says. */
static bg_status_t idx_check_header(const char *name, const uint8_t *bytes, size_t size,
                                    const bg_idx_expect_t *expect, int plain_named_gz,
                                    idx_layout_t *layout) {
    if (size < IDX_MAGIC_BYTES)
        return bg_error_set(BG_ERR_PARSE,
                            "%s: truncated: %zu bytes, too short for the 4-byte IDX magic", name,
                            size);
    if (bytes[0] != 0 || bytes[1] != 0)
        return bg_error_set(BG_ERR_PARSE,
                            "%s: bad magic 0x%02X%02X%02X%02X: not an IDX file (an IDX file "
                            "starts with two zero bytes, a type code and a dimension count)%s",
                            name, bytes[0], bytes[1], bytes[2], bytes[3],
                            plain_named_gz ? "; nor gzip, which its name says (a gzip file "
                                             "starts with 1F 8B)"
                                           : "");
    if (bytes[2] != IDX_TYPE_UBYTE)
        return bg_error_set(BG_ERR_PARSE,
                            "%s: unsupported IDX element type 0x%02X (brigade reads unsigned "
                            "bytes, 0x08)",
                            name, bytes[2]);
    int ndim = bytes[3];
    if (expect != NULL && ndim != expect->ndim)
        return bg_error_set(BG_ERR_PARSE, "%s: %s must have %d dimension%s (%s), the file has %d",
                            name, expect->what, expect->ndim, expect->ndim == 1 ? "" : "s",
                            expect->axes, ndim);
    if (ndim < 1 || ndim > BG_IDX_MAX_DIMS)
        return bg_error_set(BG_ERR_PARSE, "%s: IDX header has %d dimensions; brigade reads 1 to %d",
                            name, ndim, BG_IDX_MAX_DIMS);
    size_t header_bytes = IDX_MAGIC_BYTES + 4 * (size_t)ndim;
    if (size < header_bytes)
        return bg_error_set(BG_ERR_PARSE,
                            "%s: truncated: a %d-dimensional IDX header needs %zu bytes, file has "
                            "%zu",
                            name, ndim, header_bytes, size);

    uint64_t dims[BG_IDX_MAX_DIMS];
    for (int i = 0; i < ndim; i++) {
        dims[i] = read_be32(bytes + IDX_MAGIC_BYTES + 4 * (size_t)i);
        if (dims[i] == 0)
            return bg_error_set(BG_ERR_PARSE, "%s: dimension %d of %d is zero", name, i + 1, ndim);
    }
    /* Checking the running product against the limit after every step keeps
     * it below 2^30 * 2^32, so it cannot overflow 64 bits. */
    uint64_t product = 1;
    for (int i = 0; i < ndim; i++) {
        product *= dims[i];
        if (product > BG_IDX_MAX_BYTES) {
            char text[64];
            format_dims(text, sizeof text, dims, ndim);
            return bg_error_set(BG_ERR_PARSE,
                                "%s: dimensions %s exceed the limit of %llu data bytes", name, text,
                                (unsigned long long)BG_IDX_MAX_BYTES);
        }
    }

    layout->ndim = ndim;
    for (int i = 0; i < BG_IDX_MAX_DIMS; i++) layout->dims[i] = i < ndim ? (int64_t)dims[i] : 0;
    layout->header_bytes = header_bytes;
    layout->data_bytes = (size_t)product;
    return BG_OK;
}

/* Validates the whole image without copying it: the header, and that
 * exactly the promised data follows it. */
static bg_status_t idx_check(const char *name, const uint8_t *bytes, size_t size,
                             idx_layout_t *layout) {
    BG_CHECK(idx_check_header(name, bytes, size, NULL, 0, layout));
    const size_t available = size - layout->header_bytes;
    if (available < layout->data_bytes)
        return bg_error_set(BG_ERR_PARSE,
                            "%s: truncated: header promises %zu data bytes, file has %zu", name,
                            layout->data_bytes, available);
    if (available > layout->data_bytes)
        return bg_error_set(BG_ERR_PARSE, "%s: %zu unexpected byte%s after the data", name,
                            available - layout->data_bytes,
                            available - layout->data_bytes == 1 ? "" : "s");
    return BG_OK;
}

/* Builds the result around `data`, which it takes over (also on failure). */
static bg_status_t idx_wrap(const idx_layout_t *layout, uint8_t *data, bg_idx_t **out) {
    bg_status_t st = BG_OK;
    bg_idx_t *idx = calloc(1, sizeof *idx);
    BG_ALLOC_CHECK_GOTO(idx, st, fail);
    idx->ndim = layout->ndim;
    memcpy(idx->dims, layout->dims, sizeof idx->dims);
    idx->data = data;
    idx->size = layout->data_bytes;
    *out = idx;
    return BG_OK;
fail:
    free(data);
    return st;
}

bg_status_t bg_idx_parse(const char *name, const uint8_t *bytes, size_t size, bg_idx_t **out) {
    if (name == NULL) name = "(memory)";
    if (out == NULL || (bytes == NULL && size > 0))
        return bg_error_set(BG_ERR_INVALID, "%s: bg_idx_parse: NULL bytes or out", name);
    idx_layout_t layout;
    BG_CHECK(idx_check(name, bytes, size, &layout));

    bg_status_t st = BG_OK;
    uint8_t *data = malloc(layout.data_bytes);
    BG_ALLOC_CHECK_GOTO(data, st, fail);
    memcpy(data, bytes + layout.header_bytes, layout.data_bytes);
    return idx_wrap(&layout, data, out);
fail:
    return st;
}

/* A file being read, plain or gzip (one member or several in a row, as
 * gzip -c a b > c writes them): its decompressed bytes in order. */
typedef struct idx_source {
    const char *path;
    int fd;
    int gzip;           /* the file starts with gzip's magic */
    int member_ended;   /* inflate reached a member's end: the next byte starts another */
    int magic_owed;     /* a member's 1f came last in `in`: the next byte must be 8b */
    uint64_t size;      /* the file's bytes */
    int at_end;         /* no more bytes */
    z_stream z;         /* gzip: inflate's state, reading from `in` */
    int z_ready;        /* inflateInit2 succeeded */
    uint8_t *in;        /* IDX_READ_BUFFER bytes read from the file, not yet consumed */
    size_t plain_start; /* plain: where the unread bytes of `in` start */
    size_t plain_left;  /* plain: how many there are */
} idx_source_t;

enum { IDX_READ_BUFFER = 1 << 17, IDX_TRAILING_COUNT_MAX = 1 << 20 };

/* Fills `in` from the file: the number of bytes read (0 at its end), or -1
 * with the error set. */
static ssize_t source_fill(idx_source_t *s) {
    for (;;) {
        ssize_t got = read(s->fd, s->in, IDX_READ_BUFFER);
        if (got >= 0) return got;
        if (errno == EINTR) continue;
        bg_error_set(BG_ERR_IO, "%s: read failed: %s", s->path, strerror(errno));
        return -1;
    }
}

/* Opens `path` for reading (bg_regular_file_open: a regular file only),
 * its first bytes read to tell gzip from plain. */
static bg_status_t source_open(const char *path, idx_source_t *s) {
    memset(s, 0, sizeof *s);
    s->path = path;
    s->fd = -1;
    BG_CHECK(bg_regular_file_open(path, &s->fd, &s->size));
    s->in = malloc(IDX_READ_BUFFER);
    if (s->in == NULL) return bg_error_set(BG_ERR_NOMEM, "%s: out of memory", path);
    const ssize_t got = source_fill(s);
    if (got < 0) return BG_ERR_IO;
    s->gzip = got >= 2 && s->in[0] == 0x1f && s->in[1] == 0x8b;
    if (!s->gzip) {
        s->plain_left = (size_t)got;
        s->at_end = got == 0;
        return BG_OK;
    }
    s->z.next_in = s->in;
    s->z.avail_in = (uInt)got;
    /* 16 + MAX_WBITS: a gzip header and trailer around the deflate data. */
    const int r = inflateInit2(&s->z, 16 + MAX_WBITS);
    if (r != Z_OK)
        return bg_error_set(r == Z_MEM_ERROR ? BG_ERR_NOMEM : BG_ERR_INTERNAL,
                            "%s: zlib's inflateInit2 failed: %s", path,
                            s->z.msg != NULL ? s->z.msg : zError(r));
    s->z_ready = 1;
    return BG_OK;
}

static void source_close(idx_source_t *s) {
    if (s->z_ready) inflateEnd(&s->z);
    free(s->in);
    if (s->fd >= 0) close(s->fd);
}

/* Bytes after a gzip member's end that start no other member. */
static bg_status_t not_gzip(const idx_source_t *s) {
    return bg_error_set(BG_ERR_PARSE,
                        "%s: corrupt gzip data: bytes after the end of the gzip stream that are "
                        "not gzip",
                        s->path);
}

/* Reads up to `want` decompressed bytes into `out`; *got is less only at
 * the data's end. A gzip stream that stops before its trailer, or bytes
 * after a member that do not start another, are corrupt gzip data. */
static bg_status_t source_read(idx_source_t *s, uint8_t *out, size_t want, size_t *got) {
    size_t done = 0;
    while (done < want && !s->at_end) {
        if (!s->gzip) {
            if (s->plain_left == 0) {
                const ssize_t n = source_fill(s);
                if (n < 0) return BG_ERR_IO;
                s->plain_start = 0;
                s->plain_left = (size_t)n;
                s->at_end = n == 0;
                continue;
            }
            const size_t take = want - done < s->plain_left ? want - done : s->plain_left;
            memcpy(out + done, s->in + s->plain_start, take);
            s->plain_start += take;
            s->plain_left -= take;
            done += take;
            continue;
        }
        if (s->z.avail_in == 0) {
            const ssize_t n = source_fill(s);
            if (n < 0) return BG_ERR_IO;
            if (n == 0) {
                s->at_end = 1;
                if (!s->member_ended)
                    return bg_error_set(BG_ERR_PARSE,
                                        "%s: corrupt gzip data: unexpected end of file", s->path);
                break;
            }
            s->z.next_in = s->in;
            s->z.avail_in = (uInt)n;
            if (s->magic_owed && s->in[0] != 0x8b) return not_gzip(s);
            s->magic_owed = 0;
        }
        if (s->member_ended) {
            /* More bytes after a member's end: another member (gzip's magic,
             * 1f 8b), or not gzip, as gzip(1)'s zero padding is not (zlib's
             * gzread would ignore them). */
            if (s->z.next_in[0] != 0x1f || (s->z.avail_in > 1 && s->z.next_in[1] != 0x8b))
                return not_gzip(s);
            s->magic_owed = s->z.avail_in == 1; /* its 8b is in the next read */
            if (inflateReset(&s->z) != Z_OK)
                return bg_error_set(BG_ERR_INTERNAL, "%s: inflateReset failed", s->path);
            s->member_ended = 0;
        }
        const size_t room = want - done;
        s->z.next_out = out + done;
        s->z.avail_out = room < IDX_READ_CHUNK ? (uInt)room : IDX_READ_CHUNK;
        const uInt before = s->z.avail_out;
        const int r = inflate(&s->z, Z_NO_FLUSH);
        done += before - s->z.avail_out;
        if (r == Z_STREAM_END) {
            s->member_ended = 1;
        } else if (r != Z_OK && r != Z_BUF_ERROR) {
            return bg_error_set(BG_ERR_PARSE, "%s: corrupt gzip data: %s", s->path,
                                s->z.msg != NULL ? s->z.msg : zError(r));
        }
    }
    *got = done;
    return BG_OK;
}

bg_status_t bg_idx_load(const char *path, bg_idx_t **out) {
    return bg_idx_load_expecting(path, NULL, out);
}

/* Reads the header and checks it before any data: the data's buffer is what
 * the header promises (at most BG_IDX_MAX_BYTES), and bytes past it are
 * counted, not kept, so neither a gzip bomb nor a large file of the wrong
 * kind takes more memory than a valid file of that header would. */
bg_status_t bg_idx_load_expecting(const char *path, const bg_idx_expect_t *expect, bg_idx_t **out) {
    if (path == NULL || out == NULL)
        return bg_error_set(BG_ERR_INVALID, "bg_idx_load: NULL path or out");
    idx_source_t s;
    uint8_t *data = NULL;
    bg_status_t st = source_open(path, &s);
    if (st != BG_OK) goto done;
    /* The magic, then as many sizes as it says (none past the most). */
    uint8_t header[IDX_HEADER_MAX];
    size_t size = 0, got = 0;
    BG_CHECK_GOTO(source_read(&s, header, IDX_MAGIC_BYTES, &size), st, done);
    const int ndim = size == IDX_MAGIC_BYTES ? header[3] : 0;
    if (ndim >= 1 && ndim <= BG_IDX_MAX_DIMS) {
        BG_CHECK_GOTO(source_read(&s, header + size, 4 * (size_t)ndim, &got), st, done);
        size += got;
    }
    idx_layout_t layout;
    /* Read as IDX because it is no gzip stream, whatever its name says. */
    const size_t length = strlen(path);
    const int plain_named_gz = !s.gzip && length >= 3 && strcmp(path + length - 3, ".gz") == 0;
    BG_CHECK_GOTO(idx_check_header(path, header, size, expect, plain_named_gz, &layout), st, done);
    /* A plain file's size says at once whether the data are all there. */
    if (!s.gzip) {
        const uint64_t want = layout.header_bytes + (uint64_t)layout.data_bytes;
        if (s.size != want) {
            st = s.size < want
                     ? bg_error_set(BG_ERR_PARSE,
                                    "%s: truncated: header promises %zu data bytes, file has %llu",
                                    path, layout.data_bytes,
                                    (unsigned long long)(s.size > layout.header_bytes
                                                             ? s.size - layout.header_bytes
                                                             : 0))
                     : bg_error_set(BG_ERR_PARSE, "%s: %llu unexpected byte%s after the data", path,
                                    (unsigned long long)(s.size - want),
                                    s.size - want == 1 ? "" : "s");
            goto done;
        }
    }
    /* The buffer grows with the data read, so that a short file never
     * holds what its header promised. */
    size_t have = 0, capacity = 0;
    while (have < layout.data_bytes) {
        if (have == capacity) {
            capacity = capacity == 0 ? IDX_READ_FIRST : 2 * capacity;
            if (capacity > layout.data_bytes) capacity = layout.data_bytes;
            uint8_t *grown = realloc(data, capacity);
            if (grown == NULL) {
                st = bg_error_set(BG_ERR_NOMEM, "%s: out of memory for %zu bytes of its data", path,
                                  capacity);
                goto done;
            }
            data = grown;
        }
        BG_CHECK_GOTO(source_read(&s, data + have, capacity - have, &got), st, done);
        if (got == 0) break;
        have += got;
    }
    if (have < layout.data_bytes) {
        st = bg_error_set(BG_ERR_PARSE,
                          "%s: truncated: header promises %zu data bytes, file has %zu", path,
                          layout.data_bytes, have);
        goto done;
    }
    /* Whatever follows is an error: counted, up to a limit, not kept. */
    uint8_t scratch[4096];
    size_t trailing = 0;
    do {
        BG_CHECK_GOTO(source_read(&s, scratch, sizeof scratch, &got), st, done);
        trailing += got;
    } while (got == sizeof scratch && trailing <= IDX_TRAILING_COUNT_MAX);
    if (trailing > IDX_TRAILING_COUNT_MAX) {
        st = bg_error_set(BG_ERR_PARSE, "%s: more than %d unexpected bytes after the data", path,
                          IDX_TRAILING_COUNT_MAX);
        goto done;
    }
    if (trailing > 0) {
        st = bg_error_set(BG_ERR_PARSE, "%s: %zu unexpected byte%s after the data", path, trailing,
                          trailing == 1 ? "" : "s");
        goto done;
    }
    source_close(&s);
    return idx_wrap(&layout, data, out);
done:
    free(data);
    source_close(&s);
    return st;
}

void bg_idx_destroy(bg_idx_t *idx) {
    if (idx == NULL) return;
    free(idx->data);
    free(idx);
}
