//! Zig-zag varints, as Kafka's record format uses them (ByteUtils: protobuf
//! style, 7 bits a byte, least significant group first).

/// Bytes `v` takes as a zig-zag varint.
pub(crate) fn size_of_varint(v: i32) -> usize {
    size_of_unsigned(((v << 1) ^ (v >> 31)) as u32 as u64)
}

/// Bytes `v` takes as a zig-zag varlong.
pub(crate) fn size_of_varlong(v: i64) -> usize {
    size_of_unsigned(((v << 1) ^ (v >> 63)) as u64)
}

fn size_of_unsigned(mut u: u64) -> usize {
    let mut n = 1;
    while u >= 0x80 {
        u >>= 7;
        n += 1;
    }
    n
}

fn put_unsigned(out: &mut Vec<u8>, mut u: u64) {
    while u >= 0x80 {
        out.push((u as u8 & 0x7f) | 0x80);
        u >>= 7;
    }
    out.push(u as u8);
}

pub(crate) fn put_varint(out: &mut Vec<u8>, v: i32) {
    put_unsigned(out, ((v << 1) ^ (v >> 31)) as u32 as u64);
}

#[cfg(test)]
pub(crate) fn put_varlong(out: &mut Vec<u8>, v: i64) {
    put_unsigned(out, ((v << 1) ^ (v >> 63)) as u64);
}

/// Reads an unsigned group sequence of at most `max_bytes` bytes.
fn get_unsigned(buf: &[u8], pos: &mut usize, max_bytes: usize) -> Result<u64, &'static str> {
    let mut value: u64 = 0;
    for i in 0..max_bytes {
        let Some(&b) = buf.get(*pos) else {
            return Err("varint runs past the end of the record");
        };
        *pos += 1;
        value |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err("varint is too long")
}

/// Reads a zig-zag varint (at most 5 bytes, value within 32 bits).
pub(crate) fn get_varint(buf: &[u8], pos: &mut usize) -> Result<i32, &'static str> {
    let u = get_unsigned(buf, pos, 5)?;
    let u = u32::try_from(u).map_err(|_| "varint overflows 32 bits")?;
    Ok(((u >> 1) as i32) ^ -((u & 1) as i32))
}

/// Reads a zig-zag varlong (at most 10 bytes).
pub(crate) fn get_varlong(buf: &[u8], pos: &mut usize) -> Result<i64, &'static str> {
    let u = get_unsigned(buf, pos, 10)?;
    Ok(((u >> 1) as i64) ^ -((u & 1) as i64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_edges() {
        for v in [0, 1, -1, 63, -64, 64, i32::MAX, i32::MIN] {
            let mut b = Vec::new();
            put_varint(&mut b, v);
            assert_eq!(b.len(), size_of_varint(v));
            let mut p = 0;
            assert_eq!(get_varint(&b, &mut p), Ok(v));
            assert_eq!(p, b.len());
        }
        for v in [0, -1, i64::MAX, i64::MIN, 1 << 40] {
            let mut b = Vec::new();
            put_varlong(&mut b, v);
            assert_eq!(b.len(), size_of_varlong(v));
            let mut p = 0;
            assert_eq!(get_varlong(&b, &mut p), Ok(v));
        }
    }

    #[test]
    fn known_encodings() {
        // Zig-zag: -1 -> 1, 1 -> 2, 64 -> 128 (two bytes).
        let mut b = Vec::new();
        put_varint(&mut b, -1);
        put_varint(&mut b, 1);
        put_varint(&mut b, 64);
        assert_eq!(b, [0x01, 0x02, 0x80, 0x01]);
    }

    #[test]
    fn rejects_overlong_and_truncated() {
        let mut p = 0;
        assert!(get_varint(&[0xff, 0xff, 0xff, 0xff, 0xff, 0x01], &mut p).is_err());
        let mut p = 0;
        assert!(get_varint(&[0xff, 0xff, 0xff, 0xff, 0x7f], &mut p).is_err());
        let mut p = 0;
        assert!(get_varint(&[0x80], &mut p).is_err());
    }
}
