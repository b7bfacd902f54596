#!/usr/bin/env python3
"""Copies a dptrain checkpoint with another model name in its metadata (a valid file,
CRC-32 recomputed), for testing what dptrain says about a model it cannot build.
   usage: set_checkpoint_model.py IN.ckpt OUT.ckpt MODEL"""
import json
import struct
import sys
import zlib

src, dst, model = sys.argv[1:4]
data = open(src, "rb").read()
magic, (version,), (body_bytes,) = data[:8], struct.unpack_from("<I", data, 8), struct.unpack_from("<Q", data, 12)
body = data[20:20 + body_bytes]
(json_bytes,) = struct.unpack_from("<Q", body, 0)
meta = json.loads(body[8:8 + json_bytes])
meta["model"] = model
new_json = json.dumps(meta).encode()
new_body = struct.pack("<Q", len(new_json)) + new_json + body[8 + json_bytes:]
out = magic + struct.pack("<I", version) + struct.pack("<Q", len(new_body)) + new_body
out += struct.pack("<I", zlib.crc32(out) & 0xFFFFFFFF)
open(dst, "wb").write(out)
