#!/usr/bin/env python3
"""Rewrites metadata of a brigade checkpoint and makes its header checksum
right again, so that a test can hand `--resume` a file that passes the
integrity checks and reaches the checks of what it says.

    edit_checkpoint.py IN OUT KEY=VALUE ... [-KEY ...] [+TENSOR ...]
        [TENSOR@shape=A,B,...]

KEY=VALUE sets metadata key KEY (a string, as every brigade key is); -KEY
removes it. +TENSOR adds a tensor of one F32 zero, with its checksum;
TENSOR@shape=... gives a tensor another shape of as many values. The other
tensors and their checksums are copied unchanged. The
header checksum (lib/checkpoint.h) is the CRC-32 of the length prefix and
the header with its own eight digits read as "00000000"; it stays the
header's first key."""
import json
import struct
import sys
import zlib

CRC_KEY = "brigade.header_crc32"


def main(argv):
    if len(argv) < 3:
        sys.exit(__doc__)
    data = open(argv[1], "rb").read()
    (size,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + size])
    body = data[8 + size :]
    meta = header.pop("__metadata__")
    for edit in argv[3:]:
        if edit.startswith("+"):
            end = len(body)
            header[edit[1:]] = {"dtype": "F32", "shape": [1], "data_offsets": [end, end + 4]}
            body += bytes(4)
            meta["brigade.crc32." + edit[1:]] = "%08x" % zlib.crc32(bytes(4))
        elif "@shape=" in edit:
            name, shape = edit.split("@shape=", 1)
            header[name]["shape"] = [int(d) for d in shape.split(",")]
        elif edit.startswith("-"):
            del meta[edit[1:]]
        else:
            key, value = edit.split("=", 1)
            meta[key] = value
    meta.pop(CRC_KEY, None)
    meta = {CRC_KEY: "00000000", **meta}
    text = json.dumps({"__metadata__": meta, **header}, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    prefix = struct.pack("<Q", len(text))
    crc = zlib.crc32(prefix + text) & 0xFFFFFFFF
    text = text.replace(b'"%s":"00000000"' % CRC_KEY.encode(),
                        b'"%s":"%08x"' % (CRC_KEY.encode(), crc), 1)
    open(argv[2], "wb").write(prefix + text + body)


if __name__ == "__main__":
    main(sys.argv)
