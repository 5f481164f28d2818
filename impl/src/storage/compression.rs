//! Kafka's four compression codecs, framed exactly as Kafka frames them
//! (`org.apache.kafka.common.compress`).
//!
//! A compressed batch keeps its 61-byte header in the clear; everything
//! after it, the records, is one compressed stream, and the CRC covers the
//! compressed bytes. The codec id is in attributes bits 0-2.
//!
//! | id | codec | stream | Kafka class |
//! |---:|---|---|---|
//! | 1 | gzip | a gzip member (members may follow one another) | `GzipCompression` |
//! | 2 | snappy | snappy-java's stream: magic `\x82SNAPPY\0`, version 1, compatible 1, then blocks of (i32 length, raw snappy block) of at most 32 KiB of input | `SnappyCompression` (`SnappyOutputStream`) |
//! | 3 | lz4 | an LZ4 frame: magic, FLG (version 1, independent blocks), BD (64 KiB blocks), header checksum, blocks (an incompressible one stored with the high bit of its length set), a zero end mark | `Lz4Compression` (`Lz4BlockOutputStream`) |
//! | 4 | zstd | a zstd frame at level 3 | `ZstdCompression` |
//!
//! The block codecs (snappy's raw blocks, lz4's blocks, deflate, zstd) come
//! from well-kept crates (`snap`, `lz4_flex`, `flate2`, `zstd`); the framing
//! that is Kafka's own is here. Decoding accepts what Kafka's readers
//! accept: snappy without the stream header (snappy-java reads that as one
//! raw block), concatenated snappy streams, lz4 frames with block checksums,
//! a content size or a content checksum. Magic v0's broken lz4 header
//! checksum never occurs in magic v2 batches, so it is always checked.
//!
//! Decompressed output is capped at [`MAX_DECOMPRESSED`] bytes: a batch
//! can claim to expand to anything.

use std::fmt;
use std::io::{Read, Write};

use twox_hash::XxHash32;

/// The most a batch's records may take once decompressed.
pub const MAX_DECOMPRESSED: usize = 1 << 30;

/// A compression codec, as the batch attributes name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Codec {
    None,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

impl Codec {
    /// Every codec Kafka has, in id order.
    pub const ALL: [Codec; 5] = [
        Codec::None,
        Codec::Gzip,
        Codec::Snappy,
        Codec::Lz4,
        Codec::Zstd,
    ];

    /// The codec of attributes bits 0-2; `None` for ids 5-7, which Kafka
    /// does not define.
    pub fn from_id(id: u8) -> Option<Codec> {
        Some(match id {
            0 => Codec::None,
            1 => Codec::Gzip,
            2 => Codec::Snappy,
            3 => Codec::Lz4,
            4 => Codec::Zstd,
            _ => return None,
        })
    }

    pub fn id(self) -> u8 {
        match self {
            Codec::None => 0,
            Codec::Gzip => 1,
            Codec::Snappy => 2,
            Codec::Lz4 => 3,
            Codec::Zstd => 4,
        }
    }

    /// Kafka's name (`CompressionType.name`).
    pub fn name(self) -> &'static str {
        match self {
            Codec::None => "none",
            Codec::Gzip => "gzip",
            Codec::Snappy => "snappy",
            Codec::Lz4 => "lz4",
            Codec::Zstd => "zstd",
        }
    }
}

impl fmt::Display for Codec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Compresses `data` with `codec` in Kafka's framing, appending to `out`.
pub fn compress(codec: Codec, data: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
    match codec {
        Codec::None => out.extend_from_slice(data),
        Codec::Gzip => {
            // GZIPOutputStream at Kafka's default level (6, as zlib's).
            let mut e = flate2::write::GzEncoder::new(out, flate2::Compression::new(6));
            e.write_all(data).map_err(|e| format!("gzip: {e}"))?;
            e.finish().map_err(|e| format!("gzip: {e}"))?;
        }
        Codec::Snappy => snappy_compress(data, out)?,
        Codec::Lz4 => lz4_compress(data, out),
        Codec::Zstd => {
            // ZstdCompression's default level, 3.
            let z = zstd::bulk::compress(data, 3).map_err(|e| format!("zstd: {e}"))?;
            out.extend_from_slice(&z);
        }
    }
    Ok(())
}

/// Decompresses one batch's records stream.
pub fn decompress(codec: Codec, data: &[u8]) -> Result<Vec<u8>, String> {
    match codec {
        Codec::None => Ok(data.to_vec()),
        Codec::Gzip => read_capped(flate2::read::MultiGzDecoder::new(data), "gzip"),
        Codec::Snappy => snappy_decompress(data),
        Codec::Lz4 => lz4_decompress(data),
        Codec::Zstd => {
            let d =
                zstd::stream::read::Decoder::with_buffer(data).map_err(|e| format!("zstd: {e}"))?;
            read_capped(d, "zstd")
        }
    }
}

fn read_capped(r: impl Read, what: &str) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    r.take(MAX_DECOMPRESSED as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| format!("{what}: {e}"))?;
    if out.len() > MAX_DECOMPRESSED {
        return Err(format!("{what}: expands past {MAX_DECOMPRESSED} bytes"));
    }
    Ok(out)
}

// ---------------------------------------------------------------------------
// snappy-java's stream format (SnappyOutputStream / SnappyInputStream)
// ---------------------------------------------------------------------------

const SNAPPY_MAGIC: [u8; 8] = [0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0];
/// `SnappyOutputStream`'s default block size, which Kafka uses.
const SNAPPY_BLOCK: usize = 32 * 1024;

fn snappy_compress(data: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
    out.extend_from_slice(&SNAPPY_MAGIC);
    out.extend_from_slice(&1i32.to_be_bytes()); // version
    out.extend_from_slice(&1i32.to_be_bytes()); // minimum compatible version
    let mut enc = snap::raw::Encoder::new();
    let mut buf = vec![0u8; snap::raw::max_compress_len(SNAPPY_BLOCK)];
    for block in data.chunks(SNAPPY_BLOCK) {
        let n = enc
            .compress(block, &mut buf)
            .map_err(|e| format!("snappy: {e}"))?;
        out.extend_from_slice(&(n as i32).to_be_bytes());
        out.extend_from_slice(&buf[..n]);
    }
    Ok(())
}

fn snappy_block(block: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
    let n = snap::raw::decompress_len(block).map_err(|e| format!("snappy: {e}"))?;
    // A snappy element of k bytes expands to at most 64 (a 3-byte copy):
    // a larger claim is damage, refused before anything is allocated.
    if n > block.len().saturating_mul(32) {
        return Err(format!(
            "snappy: a block of {} bytes claims {n} bytes",
            block.len()
        ));
    }
    if out.len() + n > MAX_DECOMPRESSED {
        return Err(format!("snappy: expands past {MAX_DECOMPRESSED} bytes"));
    }
    let at = out.len();
    out.resize(at + n, 0);
    snap::raw::Decoder::new()
        .decompress(block, &mut out[at..])
        .map_err(|e| format!("snappy: {e}"))?;
    Ok(())
}

fn snappy_decompress(data: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    // snappy-java reads a stream without its header as one raw block.
    if data.len() < 16 || data[..8] != SNAPPY_MAGIC {
        snappy_block(data, &mut out)?;
        return Ok(out);
    }
    let mut pos = 16;
    while pos < data.len() {
        // A second stream's header (concatenated streams) is skipped.
        if data[pos..].starts_with(&SNAPPY_MAGIC) {
            if data.len() - pos < 16 {
                return Err("snappy: truncated stream header".into());
            }
            pos += 16;
            continue;
        }
        if data.len() - pos < 4 {
            return Err("snappy: truncated block length".into());
        }
        let len = i32::from_be_bytes(data[pos..pos + 4].try_into().expect("4 bytes"));
        pos += 4;
        if len < 0 || len as usize > data.len() - pos {
            return Err(format!("snappy: block of {len} bytes runs past the stream"));
        }
        snappy_block(&data[pos..pos + len as usize], &mut out)?;
        pos += len as usize;
    }
    Ok(out)
}

// ---------------------------------------------------------------------------
// Kafka's LZ4 frame (Lz4BlockOutputStream / Lz4BlockInputStream)
// ---------------------------------------------------------------------------

const LZ4_MAGIC: u32 = 0x184D_2204;
const LZ4_INCOMPRESSIBLE: u32 = 0x8000_0000;
/// BD's block size value 4: 64 KiB blocks, Kafka's default.
const LZ4_BD_64KB: u8 = 4 << 4;
/// FLG: version 1, independent blocks, no checksums, no content size.
const LZ4_FLG: u8 = (1 << 6) | (1 << 5);

fn xxh32(bytes: &[u8]) -> u32 {
    XxHash32::oneshot(0, bytes)
}

fn lz4_compress(data: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(&LZ4_MAGIC.to_le_bytes());
    let descriptor = [LZ4_FLG, LZ4_BD_64KB];
    out.extend_from_slice(&descriptor);
    // The header checksum: second byte of xxHash32 over FLG and BD.
    out.push((xxh32(&descriptor) >> 8) as u8);
    let max = 1usize << (2 * 4 + 8);
    let mut buf = vec![0u8; lz4_flex::block::get_maximum_output_size(max)];
    for block in data.chunks(max) {
        let n = lz4_flex::block::compress_into(block, &mut buf).expect("buffer of maximum size");
        if n >= block.len() {
            out.extend_from_slice(&(block.len() as u32 | LZ4_INCOMPRESSIBLE).to_le_bytes());
            out.extend_from_slice(block);
        } else {
            out.extend_from_slice(&(n as u32).to_le_bytes());
            out.extend_from_slice(&buf[..n]);
        }
    }
    out.extend_from_slice(&0u32.to_le_bytes()); // end mark
}

fn lz4_decompress(data: &[u8]) -> Result<Vec<u8>, String> {
    let bad = |why: &str| Err(format!("lz4: {why}"));
    if data.len() < 7 {
        return bad("stream ended prematurely");
    }
    if u32::from_le_bytes(data[..4].try_into().expect("4 bytes")) != LZ4_MAGIC {
        return bad("invalid magic bytes");
    }
    let (flg, bd) = (data[4], data[5]);
    if flg & 0x03 != 0 || flg & (1 << 5) == 0 || flg >> 6 != 1 {
        return bad("unsupported frame flags (version 1, independent blocks, reserved bits 0)");
    }
    let (content_checksum, content_size, block_checksum) = (
        flg & (1 << 2) != 0,
        flg & (1 << 3) != 0,
        flg & (1 << 4) != 0,
    );
    let size_value = (bd >> 4) & 7;
    if bd & 0x8f != 0 || !(4..=7).contains(&size_value) {
        return bad("invalid block descriptor");
    }
    let max_block = 1usize << (2 * size_value as usize + 8);
    let mut pos = 6;
    if content_size {
        pos += 8;
    }
    if data.len() < pos + 1 {
        return bad("stream ended prematurely");
    }
    if data[pos] != (xxh32(&data[4..pos]) >> 8) as u8 {
        return bad("stream frame descriptor corrupted");
    }
    pos += 1;
    let mut out = Vec::new();
    loop {
        if data.len() - pos < 4 {
            return bad("stream ended prematurely");
        }
        let word = u32::from_le_bytes(data[pos..pos + 4].try_into().expect("4 bytes"));
        pos += 4;
        let compressed = word & LZ4_INCOMPRESSIBLE == 0;
        let len = (word & !LZ4_INCOMPRESSIBLE) as usize;
        if len == 0 {
            if content_checksum {
                if data.len() - pos < 4 {
                    return bad("stream ended prematurely");
                }
                let want = u32::from_le_bytes(data[pos..pos + 4].try_into().expect("4 bytes"));
                if want != xxh32(&out) {
                    return bad("content checksum mismatch");
                }
            }
            return Ok(out);
        }
        if len > max_block {
            return Err(format!(
                "lz4: block size {len} exceeds the maximum {max_block}"
            ));
        }
        if data.len() - pos < len {
            return bad("stream ended prematurely");
        }
        let block = &data[pos..pos + len];
        pos += len;
        if block_checksum {
            if data.len() - pos < 4 {
                return bad("stream ended prematurely");
            }
            let want = u32::from_le_bytes(data[pos..pos + 4].try_into().expect("4 bytes"));
            pos += 4;
            if want != xxh32(block) {
                return bad("block checksum mismatch");
            }
        }
        if out.len() + max_block > MAX_DECOMPRESSED {
            return Err(format!("lz4: expands past {MAX_DECOMPRESSED} bytes"));
        }
        if compressed {
            let at = out.len();
            out.resize(at + max_block, 0);
            let n = lz4_flex::block::decompress_into(block, &mut out[at..])
                .map_err(|e| format!("lz4: {e}"))?;
            out.truncate(at + n);
        } else {
            out.extend_from_slice(block);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(n: usize) -> Vec<u8> {
        (0..n)
            .map(|i| {
                if i % 7 < 4 {
                    b'a'
                } else {
                    (i * 31 % 251) as u8
                }
            })
            .collect()
    }

    #[test]
    fn every_codec_round_trips() {
        for codec in Codec::ALL {
            for n in [0, 1, 100, SNAPPY_BLOCK, SNAPPY_BLOCK + 1, 200_000] {
                let data = sample(n);
                let mut z = Vec::new();
                compress(codec, &data, &mut z).unwrap();
                assert_eq!(decompress(codec, &z).unwrap(), data, "{codec} {n}");
            }
        }
    }

    #[test]
    fn framing_is_kafkas() {
        let mut z = Vec::new();
        compress(Codec::Snappy, b"hello hello hello", &mut z).unwrap();
        assert_eq!(&z[..16], b"\x82SNAPPY\0\0\0\0\x01\0\0\0\x01");
        let mut z = Vec::new();
        compress(Codec::Lz4, b"", &mut z).unwrap();
        // Magic (little-endian), FLG 0x60, BD 0x40, header checksum, end mark.
        assert_eq!(&z[..6], [0x04, 0x22, 0x4d, 0x18, 0x60, 0x40]);
        assert_eq!(z.len(), 11);
        let mut z = Vec::new();
        compress(Codec::Gzip, b"x", &mut z).unwrap();
        assert_eq!(&z[..2], [0x1f, 0x8b]);
        let mut z = Vec::new();
        compress(Codec::Zstd, b"x", &mut z).unwrap();
        assert_eq!(&z[..4], [0x28, 0xb5, 0x2f, 0xfd]);
    }

    #[test]
    fn incompressible_lz4_blocks_are_stored() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let data: Vec<u8> = (0..70_000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        let mut z = Vec::new();
        compress(Codec::Lz4, &data, &mut z).unwrap();
        let first = u32::from_le_bytes(z[7..11].try_into().unwrap());
        assert_eq!(first, 65536 | LZ4_INCOMPRESSIBLE);
        assert_eq!(decompress(Codec::Lz4, &z).unwrap(), data);
    }

    #[test]
    fn readers_accept_what_kafkas_accept_and_refuse_damage() {
        // snappy without the stream header: one raw block.
        let raw = snap::raw::Encoder::new()
            .compress_vec(b"raw block")
            .unwrap();
        assert_eq!(decompress(Codec::Snappy, &raw).unwrap(), b"raw block");
        // Two snappy streams back to back.
        let mut z = Vec::new();
        compress(Codec::Snappy, b"one ", &mut z).unwrap();
        compress(Codec::Snappy, b"two", &mut z).unwrap();
        assert_eq!(decompress(Codec::Snappy, &z).unwrap(), b"one two");
        // lz4 with a block checksum and a content checksum.
        let data = sample(1000);
        let block = lz4_flex::block::compress(&data);
        let mut f = LZ4_MAGIC.to_le_bytes().to_vec();
        let d = [LZ4_FLG | (1 << 4) | (1 << 2), LZ4_BD_64KB];
        f.extend_from_slice(&d);
        f.push((xxh32(&d) >> 8) as u8);
        f.extend_from_slice(&(block.len() as u32).to_le_bytes());
        f.extend_from_slice(&block);
        f.extend_from_slice(&xxh32(&block).to_le_bytes());
        f.extend_from_slice(&0u32.to_le_bytes());
        f.extend_from_slice(&xxh32(&data).to_le_bytes());
        assert_eq!(decompress(Codec::Lz4, &f).unwrap(), data);
        let mut broken = f.clone();
        broken[6] ^= 1; // header checksum
        assert!(decompress(Codec::Lz4, &broken).is_err());
        let mut broken = f.clone();
        broken[20] ^= 1; // inside the block: its checksum catches it
        assert!(decompress(Codec::Lz4, &broken).is_err());
        for codec in [Codec::Gzip, Codec::Snappy, Codec::Lz4, Codec::Zstd] {
            let mut z = Vec::new();
            compress(codec, &sample(5000), &mut z).unwrap();
            for cut in [0, 1, z.len() / 2, z.len() - 1] {
                assert!(
                    decompress(codec, &z[..cut]).is_err()
                        || cut == 0
                            && codec == Codec::Gzip
                            && decompress(codec, &z[..cut]).unwrap().is_empty(),
                    "{codec} cut at {cut}"
                );
            }
        }
    }
}
