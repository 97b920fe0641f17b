#!/usr/bin/python3
"""Independent reader of TensorBoard event files, for tests/test_tfevents.c: checks every
record's framing and masked CRC-32C (bitwise, not table-driven) and decodes the Event protobuf
by its wire format. Prints "version <v>", "scalar <step> <tag> <value>" and, for a tensor summary
(TensorFlow 2's histograms), "histogram <step> <tag> <plugin> class=<data class> <rows>x<cols>
count=<sum of the counts> first=<left> <right> <count> last=<left> <right> <count>"; exits 1 on a
bad record."""
import struct, sys

def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c ^= b
        for _ in range(8):
            c = (c >> 1) ^ (0x82F63B78 if c & 1 else 0)
    return c ^ 0xFFFFFFFF

def masked(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF

def fields(buf):
    i = 0
    while i < len(buf):
        key, i = varint(buf, i)
        num, wire = key >> 3, key & 7
        if wire == 0:
            v, i = varint(buf, i)
        elif wire == 1:
            v = buf[i:i + 8]; i += 8
        elif wire == 5:
            v = buf[i:i + 4]; i += 4
        elif wire == 2:
            n, i = varint(buf, i)
            v = buf[i:i + n]; i += n
        else:
            raise ValueError("wire type %d" % wire)
        yield num, wire, v

def varint(buf, i):
    shift = v = 0
    while True:
        b = buf[i]; i += 1
        v |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return v, i

assert crc32c(b"123456789") == 0xE3069283  # the standard check value
data = open(sys.argv[1], "rb").read()
pos = 0
while pos < len(data):
    if len(data) - pos < 12:
        sys.exit("truncated record header at %d" % pos)
    head = data[pos:pos + 8]
    (n,) = struct.unpack("<Q", head)
    (c1,) = struct.unpack("<I", data[pos + 8:pos + 12])
    if masked(head) != c1:
        sys.exit("bad length crc at %d" % pos)
    body = data[pos + 12:pos + 12 + n]
    (c2,) = struct.unpack("<I", data[pos + 12 + n:pos + 16 + n])
    if masked(body) != c2:
        sys.exit("bad data crc at %d" % pos)
    pos += 16 + n
    step, wall = 0, None
    for num, wire, v in fields(body):
        if num == 1: wall = struct.unpack("<d", v)[0]
        elif num == 2: step = v
        elif num == 3: print("version", v.decode())
        elif num == 5:
            for snum, _, sv in fields(v):
                tag, val, plugin, dclass, tensor = None, None, None, 0, None
                for vnum, _, vv in fields(sv):
                    if vnum == 1: tag = vv.decode()
                    elif vnum == 2: val = struct.unpack("<f", vv)[0]
                    elif vnum == 9:
                        for mnum, _, mv in fields(vv):
                            if mnum == 1: plugin = dict((pn, pv) for pn, _, pv in fields(mv)).get(1, b"").decode()
                            elif mnum == 4: dclass = mv
                    elif vnum == 8: tensor = vv
                if tensor is None:
                    print("scalar %d %s %.6g" % (step, tag, val))
                    continue
                dims, content, dtype = [], b"", None
                for tnum, _, tv in fields(tensor):
                    if tnum == 1: dtype = tv
                    elif tnum == 2: dims = [dict((dn, dv) for dn, _, dv in fields(d)).get(1, 0)
                                            for dn, _, d in fields(tv) if dn == 2]
                    elif tnum == 4: content = tv
                if dtype != 2 or len(content) != 8 * dims[0] * dims[1]:
                    sys.exit("tensor of dtype %s, shape %s, %d bytes" % (dtype, dims, len(content)))
                rows = [struct.unpack_from("<3d", content, 24 * r) for r in range(dims[0])]
                line = "histogram %d %s %s class=%d %dx%d count=%.6g" % (step, tag, plugin, dclass, dims[0], dims[1],
                                                                         sum(r[2] for r in rows))
                if rows:
                    line += " first=%.6g %.6g %.6g last=%.6g %.6g %.6g" % (rows[0] + rows[-1])
                print(line)
    if wall is None or wall < 1.6e9:
        sys.exit("bad wall_time")
