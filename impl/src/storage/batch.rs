//! The record batch codec: Kafka's magic v2 `DefaultRecordBatch`.
//!
//! All integers are big-endian. Layout of the 61-byte header:
//!
//! | at | field | type |
//! |---:|---|---|
//! | 0 | baseOffset | i64 |
//! | 8 | batchLength (bytes after this field) | i32 |
//! | 12 | partitionLeaderEpoch | i32 |
//! | 16 | magic (2) | i8 |
//! | 17 | crc: CRC-32C of bytes 21..end | u32 |
//! | 21 | attributes | i16 |
//! | 23 | lastOffsetDelta | i32 |
//! | 27 | baseTimestamp | i64 |
//! | 35 | maxTimestamp | i64 |
//! | 43 | producerId | i64 |
//! | 51 | producerEpoch | i16 |
//! | 53 | baseSequence | i32 |
//! | 57 | recordsCount | i32 |
//!
//! Records follow, each: length (varint), attributes (i8), timestampDelta
//! (varlong), offsetDelta (varint), key length (varint, -1 null) + key,
//! value length (varint, -1 null) + value, header count (varint), then per
//! header key length (varint) + UTF-8 key, value length (varint, -1 null) +
//! value.
//!
//! The base offset and the leader epoch sit outside the CRC, so a leader can
//! stamp them into a producer's batch without recomputing it. That also means
//! a bit flip there is invisible to the CRC: recovery checks them against
//! their neighbours instead (offsets contiguous, epochs non-decreasing).

use std::borrow::Cow;

use super::compression::{self, Codec};
use super::error::BatchError;
use super::varint::{get_varint, get_varlong, put_varint, size_of_varint, size_of_varlong};

/// Bytes before `batchLength` counts: baseOffset and batchLength itself.
pub const LOG_OVERHEAD: usize = 12;
/// Size of the batch header, up to the first record.
pub const HEADER_SIZE: usize = 61;
/// The only record format this implementation reads and writes.
pub const MAGIC_V2: i8 = 2;
/// `partitionLeaderEpoch` of a batch written without a leader epoch.
pub const NO_PARTITION_LEADER_EPOCH: i32 = -1;
/// Timestamp meaning "none".
pub const NO_TIMESTAMP: i64 = -1;
/// Largest batch this codec accepts: a segment position is an i32.
pub const MAX_BATCH_SIZE: usize = i32::MAX as usize;

const PARTITION_LEADER_EPOCH_AT: usize = 12;
const MAGIC_AT: usize = 16;
const CRC_AT: usize = 17;
const ATTRIBUTES_AT: usize = 21;

const COMPRESSION_MASK: i16 = 0x07;
const TIMESTAMP_TYPE_MASK: i16 = 0x08;
const TRANSACTIONAL_MASK: i16 = 0x10;
const CONTROL_MASK: i16 = 0x20;

fn be_i64(b: &[u8], at: usize) -> i64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    i64::from_be_bytes(a)
}
fn be_i32(b: &[u8], at: usize) -> i32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    i32::from_be_bytes(a)
}
fn be_i16(b: &[u8], at: usize) -> i16 {
    i16::from_be_bytes([b[at], b[at + 1]])
}

/// The fixed header of a record batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchHeader {
    pub base_offset: u64,
    /// Bytes after the `batchLength` field; the batch takes
    /// `LOG_OVERHEAD + batch_length` bytes.
    pub batch_length: u32,
    pub partition_leader_epoch: i32,
    pub magic: i8,
    pub crc: u32,
    pub attributes: i16,
    pub last_offset_delta: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub records_count: i32,
}

/// Reads the length prefix (`baseOffset`, `batchLength`) from the first 12
/// bytes: what a scan needs to step to the next batch.
///
/// Returns the base offset (unchecked, as stored) and the total batch size.
pub fn parse_length_prefix(bytes: &[u8]) -> Result<(i64, usize), BatchError> {
    if bytes.len() < LOG_OVERHEAD {
        return Err(BatchError::Truncated {
            needed: LOG_OVERHEAD as u64,
            available: bytes.len() as u64,
        });
    }
    let length = be_i32(bytes, 8);
    if length < (HEADER_SIZE - LOG_OVERHEAD) as i32 {
        return Err(BatchError::BadLength { length });
    }
    Ok((be_i64(bytes, 0), LOG_OVERHEAD + length as usize))
}

impl BatchHeader {
    /// Parses a header from the first 61 bytes, checking the length field,
    /// the magic and that offsets are not negative. Does not check the CRC.
    pub fn parse(bytes: &[u8]) -> Result<BatchHeader, BatchError> {
        let (base_offset, _) = parse_length_prefix(bytes)?;
        if bytes.len() < HEADER_SIZE {
            return Err(BatchError::Truncated {
                needed: HEADER_SIZE as u64,
                available: bytes.len() as u64,
            });
        }
        let magic = bytes[MAGIC_AT] as i8;
        if magic != MAGIC_V2 {
            return Err(BatchError::BadMagic { magic });
        }
        if base_offset < 0 {
            return Err(BatchError::NegativeOffset { base_offset });
        }
        let h = BatchHeader {
            base_offset: base_offset as u64,
            batch_length: be_i32(bytes, 8) as u32,
            partition_leader_epoch: be_i32(bytes, PARTITION_LEADER_EPOCH_AT),
            magic,
            crc: be_i32(bytes, CRC_AT) as u32,
            attributes: be_i16(bytes, ATTRIBUTES_AT),
            last_offset_delta: be_i32(bytes, 23),
            base_timestamp: be_i64(bytes, 27),
            max_timestamp: be_i64(bytes, 35),
            producer_id: be_i64(bytes, 43),
            producer_epoch: be_i16(bytes, 51),
            base_sequence: be_i32(bytes, 53),
            records_count: be_i32(bytes, 57),
        };
        // A record's offset delta is in [0, lastOffsetDelta], and deltas are
        // distinct, so there can be at most lastOffsetDelta + 1 records.
        if h.last_offset_delta < 0
            || h.records_count < 0
            || i64::from(h.records_count) > i64::from(h.last_offset_delta) + 1
        {
            return Err(BatchError::BadCounts {
                last_offset_delta: h.last_offset_delta,
                records_count: h.records_count,
            });
        }
        if h.base_offset
            .checked_add(h.last_offset_delta as u64)
            .is_none_or(|v| v > i64::MAX as u64)
        {
            return Err(BatchError::NegativeOffset { base_offset });
        }
        Ok(h)
    }

    /// Total bytes the batch takes on disk.
    pub fn size(&self) -> usize {
        LOG_OVERHEAD + self.batch_length as usize
    }
    /// Offset of the last record (by `lastOffsetDelta`).
    pub fn last_offset(&self) -> u64 {
        self.base_offset + self.last_offset_delta as u64
    }
    /// The offset after this batch.
    pub fn next_offset(&self) -> u64 {
        self.last_offset() + 1
    }
    /// Compression codec id (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd).
    pub fn compression(&self) -> u8 {
        (self.attributes & COMPRESSION_MASK) as u8
    }
    /// The compression codec, `None` for an id Kafka does not define.
    pub fn codec(&self) -> Option<Codec> {
        Codec::from_id(self.compression())
    }
    /// The producer fields.
    pub fn producer(&self) -> ProducerInfo {
        ProducerInfo {
            producer_id: self.producer_id,
            producer_epoch: self.producer_epoch,
            base_sequence: self.base_sequence,
        }
    }
    /// True when timestamps are LogAppendTime rather than CreateTime.
    pub fn is_log_append_time(&self) -> bool {
        self.attributes & TIMESTAMP_TYPE_MASK != 0
    }
    pub fn is_transactional(&self) -> bool {
        self.attributes & TRANSACTIONAL_MASK != 0
    }
    pub fn is_control(&self) -> bool {
        self.attributes & CONTROL_MASK != 0
    }
}

/// Checks one whole batch: `bytes` must be exactly the batch. Verifies the
/// header (see [`BatchHeader::parse`]), that the length matches and the CRC.
/// Records are not decoded; use [`RecordBatch::records`] for that.
pub fn check_batch(bytes: &[u8]) -> Result<BatchHeader, BatchError> {
    let h = BatchHeader::parse(bytes)?;
    if bytes.len() != h.size() {
        return Err(BatchError::Truncated {
            needed: h.size() as u64,
            available: bytes.len() as u64,
        });
    }
    let computed = crc32c::crc32c(&bytes[ATTRIBUTES_AT..]);
    if computed != h.crc {
        return Err(BatchError::CrcMismatch {
            stored: h.crc,
            computed,
        });
    }
    Ok(h)
}

fn need_header(batch: &[u8]) -> Result<(), BatchError> {
    if batch.len() < HEADER_SIZE {
        return Err(BatchError::Truncated {
            needed: HEADER_SIZE as u64,
            available: batch.len() as u64,
        });
    }
    Ok(())
}

/// Overwrites the base offset of an encoded batch (outside the CRC).
pub fn set_base_offset(batch: &mut [u8], base_offset: u64) -> Result<(), BatchError> {
    need_header(batch)?;
    batch[0..8].copy_from_slice(&(base_offset as i64).to_be_bytes());
    Ok(())
}

/// Overwrites the partition leader epoch of an encoded batch (outside the CRC).
pub fn set_partition_leader_epoch(batch: &mut [u8], epoch: i32) -> Result<(), BatchError> {
    need_header(batch)?;
    batch[PARTITION_LEADER_EPOCH_AT..PARTITION_LEADER_EPOCH_AT + 4]
        .copy_from_slice(&epoch.to_be_bytes());
    Ok(())
}

/// A record header: a UTF-8 key and an optional value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    pub key: String,
    pub value: Option<Vec<u8>>,
}

/// A record as a producer gives it, or as decoded from a batch.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Record {
    /// Milliseconds since the epoch (CreateTime), or [`NO_TIMESTAMP`].
    pub timestamp: i64,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: Vec<Header>,
}

impl Record {
    /// A record with a value and a timestamp, no key and no headers.
    pub fn new(timestamp: i64, value: impl Into<Vec<u8>>) -> Record {
        Record {
            timestamp,
            key: None,
            value: Some(value.into()),
            headers: Vec::new(),
        }
    }
}

fn bytes_field_size(b: &Option<Vec<u8>>) -> usize {
    match b {
        None => size_of_varint(-1),
        Some(v) => size_of_varint(v.len() as i32) + v.len(),
    }
}

fn put_bytes_field(out: &mut Vec<u8>, b: &Option<Vec<u8>>) {
    match b {
        None => put_varint(out, -1),
        Some(v) => {
            put_varint(out, v.len() as i32);
            out.extend_from_slice(v);
        }
    }
}

/// A few varints gathered on the stack.
#[derive(Default)]
struct Scratch {
    buf: [u8; 32],
    len: usize,
}

impl Scratch {
    fn byte(&mut self, b: u8) {
        self.buf[self.len] = b;
        self.len += 1;
    }
    fn unsigned(&mut self, mut u: u64) {
        while u >= 0x80 {
            self.byte((u as u8 & 0x7f) | 0x80);
            u >>= 7;
        }
        self.byte(u as u8);
    }
    fn varint(&mut self, v: i32) {
        self.unsigned(((v << 1) ^ (v >> 31)) as u32 as u64);
    }
    fn varlong(&mut self, v: i64) {
        self.unsigned(((v << 1) ^ (v >> 63)) as u64);
    }
    fn bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

/// Producer fields of a batch; `NONE` for a non-idempotent producer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerInfo {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
}

impl ProducerInfo {
    pub const NONE: ProducerInfo = ProducerInfo {
        producer_id: -1,
        producer_epoch: -1,
        base_sequence: -1,
    };
}

/// How a batch is encoded besides its records (attributes and producer
/// fields), as Kafka's `MemoryRecordsBuilder` takes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchOptions {
    pub producer: ProducerInfo,
    pub codec: Codec,
    pub transactional: bool,
    pub control: bool,
    /// `Some(t)`: a LogAppendTime batch stamped `t` (its max timestamp,
    /// which every record then reads as); `None`: CreateTime.
    pub log_append_time: Option<i64>,
}

impl BatchOptions {
    /// An uncompressed CreateTime batch of a plain producer.
    pub const PLAIN: BatchOptions = BatchOptions {
        producer: ProducerInfo::NONE,
        codec: Codec::None,
        transactional: false,
        control: false,
        log_append_time: None,
    };

    /// The options of an existing batch (to re-encode its records).
    pub fn of(h: &BatchHeader) -> Option<BatchOptions> {
        Some(BatchOptions {
            producer: h.producer(),
            codec: h.codec()?,
            transactional: h.is_transactional(),
            control: h.is_control(),
            log_append_time: h.is_log_append_time().then_some(h.max_timestamp),
        })
    }

    fn attributes(&self) -> i16 {
        let mut a = i16::from(self.codec.id());
        if self.log_append_time.is_some() {
            a |= TIMESTAMP_TYPE_MASK;
        }
        if self.transactional {
            a |= TRANSACTIONAL_MASK;
        }
        if self.control {
            a |= CONTROL_MASK;
        }
        a
    }
}

/// Encodes `records` as one uncompressed CreateTime batch appended to `out`,
/// with offsets `base_offset ..` and the given leader epoch. The base
/// timestamp is the first record's, as Kafka's builder does.
pub fn encode_batch(
    out: &mut Vec<u8>,
    base_offset: u64,
    partition_leader_epoch: i32,
    producer: ProducerInfo,
    records: &[Record],
) -> Result<(), BatchError> {
    let options = BatchOptions {
        producer,
        ..BatchOptions::PLAIN
    };
    encode_batch_with(out, base_offset, partition_leader_epoch, &options, records)
}

/// Encodes `records` as one batch appended to `out`, compressed and
/// flagged as `options` says.
pub fn encode_batch_with(
    out: &mut Vec<u8>,
    base_offset: u64,
    partition_leader_epoch: i32,
    options: &BatchOptions,
    records: &[Record],
) -> Result<(), BatchError> {
    let first = records.first().ok_or(BatchError::Empty)?;
    let too_large = |size: u64| BatchError::TooLarge { size };
    if records.len() > i32::MAX as usize {
        return Err(too_large(records.len() as u64));
    }
    let base_ts = first.timestamp;
    let max_ts = match options.log_append_time {
        Some(t) => t,
        None => records.iter().map(|r| r.timestamp).max().unwrap_or(base_ts),
    };
    let producer = options.producer;
    let start = out.len();
    out.extend_from_slice(&(base_offset as i64).to_be_bytes());
    out.extend_from_slice(&0i32.to_be_bytes()); // batchLength, patched below
    out.extend_from_slice(&partition_leader_epoch.to_be_bytes());
    out.push(MAGIC_V2 as u8);
    out.extend_from_slice(&0u32.to_be_bytes()); // crc, patched below
    out.extend_from_slice(&options.attributes().to_be_bytes());
    out.extend_from_slice(&((records.len() - 1) as i32).to_be_bytes());
    out.extend_from_slice(&base_ts.to_be_bytes());
    out.extend_from_slice(&max_ts.to_be_bytes());
    out.extend_from_slice(&producer.producer_id.to_be_bytes());
    out.extend_from_slice(&producer.producer_epoch.to_be_bytes());
    out.extend_from_slice(&producer.base_sequence.to_be_bytes());
    out.extend_from_slice(&(records.len() as i32).to_be_bytes());
    if options.codec == Codec::None {
        put_records(out, start, records, base_ts)?;
    } else {
        let mut raw = Vec::new();
        put_records(&mut raw, 0, records, base_ts)?;
        compression::compress(options.codec, &raw, out)
            .map_err(|reason| BatchError::Compression { reason })?;
        if out.len() - start > MAX_BATCH_SIZE {
            return Err(too_large((out.len() - start) as u64));
        }
    }
    let batch = &mut out[start..];
    let length = (batch.len() - LOG_OVERHEAD) as i32;
    batch[8..12].copy_from_slice(&length.to_be_bytes());
    let crc = crc32c::crc32c(&batch[ATTRIBUTES_AT..]);
    batch[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
    Ok(())
}

/// Writes the records (uncompressed) to `out`; `start` is where the batch
/// began, for the size limit.
fn put_records(
    out: &mut Vec<u8>,
    start: usize,
    records: &[Record],
    base_ts: i64,
) -> Result<(), BatchError> {
    let too_large = |size: u64| BatchError::TooLarge { size };
    for (i, r) in records.iter().enumerate() {
        let ts_delta = r.timestamp.wrapping_sub(base_ts);
        let mut body = 1 + size_of_varlong(ts_delta) + size_of_varint(i as i32);
        body += bytes_field_size(&r.key) + bytes_field_size(&r.value);
        body += size_of_varint(r.headers.len() as i32);
        for h in &r.headers {
            body += size_of_varint(h.key.len() as i32) + h.key.len() + bytes_field_size(&h.value);
        }
        if body > i32::MAX as usize / 2 {
            return Err(too_large(body as u64));
        }
        // Small fields are gathered on the stack and copied once: this loop
        // is most of the cost of an append beyond the CRC.
        out.reserve(body + 5);
        let mut head = Scratch::default();
        head.varint(body as i32);
        head.byte(0); // record attributes: unused
        head.varlong(ts_delta);
        head.varint(i as i32);
        head.varint(r.key.as_ref().map_or(-1, |k| k.len() as i32));
        out.extend_from_slice(head.bytes());
        if let Some(k) = &r.key {
            out.extend_from_slice(k);
        }
        let mut mid = Scratch::default();
        mid.varint(r.value.as_ref().map_or(-1, |v| v.len() as i32));
        out.extend_from_slice(mid.bytes());
        if let Some(v) = &r.value {
            out.extend_from_slice(v);
        }
        put_varint(out, r.headers.len() as i32);
        for h in &r.headers {
            put_varint(out, h.key.len() as i32);
            out.extend_from_slice(h.key.as_bytes());
            put_bytes_field(out, &h.value);
        }
        if out.len() - start > MAX_BATCH_SIZE {
            return Err(too_large((out.len() - start) as u64));
        }
    }
    Ok(())
}

/// A checked batch over borrowed bytes.
#[derive(Debug, Clone, Copy)]
pub struct RecordBatch<'a> {
    pub header: BatchHeader,
    bytes: &'a [u8],
}

impl<'a> RecordBatch<'a> {
    /// Checks `bytes` (exactly one batch, see [`check_batch`]).
    pub fn new(bytes: &'a [u8]) -> Result<RecordBatch<'a>, BatchError> {
        Ok(RecordBatch {
            header: check_batch(bytes)?,
            bytes,
        })
    }

    /// The batch's bytes.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// Decodes the records, decompressing them first if the batch is
    /// compressed. A batch that does not decompress, or names a codec Kafka
    /// does not define, yields one error.
    pub fn records(&self) -> RecordIter<'a> {
        let body = &self.bytes[HEADER_SIZE..];
        let (bytes, error) = match self.header.codec() {
            Some(Codec::None) => (Cow::Borrowed(body), None),
            Some(codec) => match compression::decompress(codec, body) {
                Ok(raw) => (Cow::Owned(raw), None),
                Err(reason) => (
                    Cow::Borrowed(&[][..]),
                    Some(BatchError::BadCompression {
                        codec: codec.id(),
                        reason,
                    }),
                ),
            },
            None => (
                Cow::Borrowed(&[][..]),
                Some(BatchError::UnknownCodec {
                    codec: self.header.compression(),
                }),
            ),
        };
        RecordIter {
            header: self.header,
            bytes,
            pos: 0,
            index: 0,
            done: false,
            error,
        }
    }

    /// Decodes every record, or returns the first error.
    pub fn decode_records(&self) -> Result<Vec<(u64, Record)>, BatchError> {
        self.records().collect()
    }
}

/// Splits a byte string of consecutive batches, checking each one.
pub fn batches(bytes: &[u8]) -> BatchIter<'_> {
    BatchIter { bytes, pos: 0 }
}

/// Iterator of [`batches`]; stops after the first error.
pub struct BatchIter<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Iterator for BatchIter<'a> {
    type Item = Result<RecordBatch<'a>, BatchError>;
    fn next(&mut self) -> Option<Self::Item> {
        if self.pos >= self.bytes.len() {
            return None;
        }
        let rest = &self.bytes[self.pos..];
        let size = match parse_length_prefix(rest) {
            Ok((_, size)) => size,
            Err(e) => {
                self.pos = self.bytes.len();
                return Some(Err(e));
            }
        };
        if rest.len() < size {
            self.pos = self.bytes.len();
            return Some(Err(BatchError::Truncated {
                needed: size as u64,
                available: rest.len() as u64,
            }));
        }
        self.pos += size;
        let r = RecordBatch::new(&rest[..size]);
        if r.is_err() {
            self.pos = self.bytes.len();
        }
        Some(r)
    }
}

/// Iterator of a batch's records: `(offset, record)`.
pub struct RecordIter<'a> {
    header: BatchHeader,
    /// The records, decompressed.
    bytes: Cow<'a, [u8]>,
    pos: usize,
    index: u32,
    done: bool,
    /// Why the records cannot be read at all.
    error: Option<BatchError>,
}

/// One record's fields, parsed within its own bytes.
struct RecordBytes<'b> {
    bytes: &'b [u8],
}

impl RecordIter<'_> {
    fn fail(&mut self, reason: impl Into<String>) -> BatchError {
        self.done = true;
        BatchError::BadRecord {
            index: self.index,
            reason: reason.into(),
        }
    }
}

impl RecordBytes<'_> {
    fn bytes_field(&self, pos: &mut usize, what: &str) -> Result<Option<Vec<u8>>, String> {
        let len = get_varint(self.bytes, pos).map_err(|e| format!("{what} length: {e}"))?;
        if len < -1 {
            return Err(format!("negative {what} length {len}"));
        }
        if len == -1 {
            return Ok(None);
        }
        let end = pos
            .checked_add(len as usize)
            .filter(|&e| e <= self.bytes.len())
            .ok_or_else(|| format!("{what} of {len} bytes runs past the record"))?;
        let v = self.bytes[*pos..end].to_vec();
        *pos = end;
        Ok(Some(v))
    }
}

impl RecordIter<'_> {
    fn decode_one(&mut self) -> Result<(u64, Record), String> {
        let mut pos = self.pos;
        let all: &[u8] = &self.bytes;
        let body = get_varint(all, &mut pos).map_err(|e| format!("length: {e}"))?;
        if body < 0 {
            return Err(format!("negative record length {body}"));
        }
        let end = pos
            .checked_add(body as usize)
            .filter(|&e| e <= all.len())
            .ok_or_else(|| format!("record of {body} bytes runs past the batch"))?;
        // Parse within the record's own bytes so no field can spill over.
        let rec = RecordBytes { bytes: &all[..end] };
        let _attributes = *rec.bytes.get(pos).ok_or("missing attributes")?;
        pos += 1;
        let ts_delta = get_varlong(rec.bytes, &mut pos).map_err(|e| format!("timestamp: {e}"))?;
        let offset_delta =
            get_varint(rec.bytes, &mut pos).map_err(|e| format!("offset delta: {e}"))?;
        if offset_delta < 0 || offset_delta > self.header.last_offset_delta {
            return Err(format!(
                "offset delta {offset_delta} outside [0, {}]",
                self.header.last_offset_delta
            ));
        }
        let key = rec.bytes_field(&mut pos, "key")?;
        let value = rec.bytes_field(&mut pos, "value")?;
        let n = get_varint(rec.bytes, &mut pos).map_err(|e| format!("header count: {e}"))?;
        if n < 0 {
            return Err(format!("negative header count {n}"));
        }
        let mut headers = Vec::new();
        for _ in 0..n {
            let k = rec
                .bytes_field(&mut pos, "header key")?
                .ok_or("null header key")?;
            let key = String::from_utf8(k).map_err(|_| "header key is not UTF-8")?;
            let value = rec.bytes_field(&mut pos, "header value")?;
            headers.push(Header { key, value });
        }
        if pos != end {
            return Err(format!(
                "record length says {body} bytes but its fields take {}",
                body as usize - (end - pos)
            ));
        }
        self.pos = end;
        let timestamp = if self.header.is_log_append_time() {
            self.header.max_timestamp
        } else {
            self.header.base_timestamp.wrapping_add(ts_delta)
        };
        let record = Record {
            timestamp,
            key,
            value,
            headers,
        };
        Ok((self.header.base_offset + offset_delta as u64, record))
    }
}

impl Iterator for RecordIter<'_> {
    type Item = Result<(u64, Record), BatchError>;
    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        if let Some(e) = self.error.take() {
            self.done = true;
            return Some(Err(e));
        }
        if self.index as i64 >= i64::from(self.header.records_count) {
            self.done = true;
            if self.pos != self.bytes.len() {
                let extra = self.bytes.len() - self.pos;
                return Some(Err(self.fail(format!(
                    "{extra} bytes after the last of {} records",
                    self.header.records_count
                ))));
            }
            return None;
        }
        match self.decode_one() {
            Ok(r) => {
                self.index += 1;
                Some(Ok(r))
            }
            Err(reason) => Some(Err(self.fail(reason))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<Record> {
        vec![
            Record {
                timestamp: 1000,
                key: Some(b"k".to_vec()),
                value: Some(b"hello".to_vec()),
                headers: vec![Header {
                    key: "h".into(),
                    value: None,
                }],
            },
            Record {
                timestamp: 990,
                key: None,
                value: None,
                headers: vec![],
            },
        ]
    }

    #[test]
    fn round_trip() {
        let mut b = Vec::new();
        encode_batch(&mut b, 42, 7, ProducerInfo::NONE, &sample()).unwrap();
        let batch = RecordBatch::new(&b).unwrap();
        assert_eq!(batch.header.base_offset, 42);
        assert_eq!(batch.header.last_offset(), 43);
        assert_eq!(batch.header.partition_leader_epoch, 7);
        assert_eq!(batch.header.max_timestamp, 1000);
        assert_eq!(batch.header.base_timestamp, 1000);
        let recs = batch.decode_records().unwrap();
        assert_eq!(recs.len(), 2);
        assert_eq!(recs[0], (42, sample()[0].clone()));
        assert_eq!(recs[1], (43, sample()[1].clone()));
    }

    #[test]
    fn crc_matches_kafka_layout() {
        let mut b = Vec::new();
        encode_batch(
            &mut b,
            0,
            0,
            ProducerInfo::NONE,
            &[Record::new(0, b"hello".to_vec())],
        )
        .unwrap();
        // 61 header bytes plus the record: length 1, then a body of 11:
        // attributes 1, ts delta 1, offset delta 1, key -1 (1),
        // value length 1 + 5, header count 1.
        assert_eq!(b.len(), 61 + 1 + 11);
        assert_eq!(b[61], 22, "zig-zag of record body length 11");
        // The CRC covers attributes onwards: changing the epoch keeps it valid,
        // changing a value byte breaks it.
        set_partition_leader_epoch(&mut b, 9).unwrap();
        set_base_offset(&mut b, 100).unwrap();
        assert!(set_base_offset(&mut [0u8; 10], 1).is_err());
        assert!(check_batch(&b).is_ok());
        let last = b.len() - 2;
        b[last] ^= 1;
        assert!(matches!(
            check_batch(&b),
            Err(BatchError::CrcMismatch { .. })
        ));
    }

    /// A batch as a Kafka broker wrote it (idempotent producer id 0, one
    /// record, value "Hello Kafka!", null key): we must encode the same bytes.
    #[test]
    fn matches_a_batch_written_by_kafka() {
        let hex = "0000000000000000000000440000000002abfd049100000000000000000191e05b6d8b\
                   00000191e05b6d8b00000000000000000000000000000000000124000000011848656c\
                   6c6f204b61666b612100";
        let kafka: Vec<u8> = (0..hex.len() / 2)
            .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap())
            .collect();
        let batch = RecordBatch::new(&kafka).unwrap();
        assert_eq!(batch.header.crc, 0xabfd0491);
        let recs = batch.decode_records().unwrap();
        assert_eq!(recs.len(), 1);
        assert_eq!(recs[0].1.value.as_deref(), Some(&b"Hello Kafka!"[..]));
        let producer = ProducerInfo {
            producer_id: 0,
            producer_epoch: 0,
            base_sequence: 0,
        };
        let mut ours = Vec::new();
        encode_batch(&mut ours, 0, 0, producer, &[recs[0].1.clone()]).unwrap();
        assert_eq!(ours, kafka);
    }

    #[test]
    fn rejects_bad_headers() {
        let mut b = Vec::new();
        encode_batch(&mut b, 0, 0, ProducerInfo::NONE, &sample()).unwrap();
        let mut m = b.clone();
        m[16] = 1;
        assert_eq!(check_batch(&m), Err(BatchError::BadMagic { magic: 1 }));
        let mut m = b.clone();
        m[8..12].copy_from_slice(&(-5i32).to_be_bytes());
        assert_eq!(check_batch(&m), Err(BatchError::BadLength { length: -5 }));
        let mut m = b.clone();
        m[0] = 0x80;
        assert!(matches!(
            check_batch(&m),
            Err(BatchError::NegativeOffset { .. })
        ));
        assert!(matches!(
            check_batch(&b[..30]),
            Err(BatchError::Truncated { .. })
        ));
        assert!(matches!(
            check_batch(&b[..b.len() - 1]),
            Err(BatchError::Truncated { .. })
        ));
        assert_eq!(
            encode_batch(&mut Vec::new(), 0, 0, ProducerInfo::NONE, &[]),
            Err(BatchError::Empty)
        );
    }

    #[test]
    fn compressed_batches_round_trip_and_bad_ones_are_reported() {
        for codec in Codec::ALL {
            let options = BatchOptions {
                codec,
                transactional: true,
                log_append_time: Some(5000),
                ..BatchOptions::PLAIN
            };
            let mut b = Vec::new();
            encode_batch_with(&mut b, 10, 2, &options, &sample()).unwrap();
            let batch = RecordBatch::new(&b).unwrap();
            assert_eq!(batch.header.codec(), Some(codec));
            assert!(batch.header.is_transactional() && batch.header.is_log_append_time());
            assert_eq!(BatchOptions::of(&batch.header), Some(options));
            let got = batch.decode_records().unwrap();
            let want: Vec<_> = sample()
                .into_iter()
                .enumerate()
                .map(|(i, r)| {
                    (
                        10 + i as u64,
                        Record {
                            timestamp: 5000,
                            ..r
                        },
                    )
                })
                .collect();
            assert_eq!(got, want, "{codec}");
        }
        // Records that are not the codec's stream: an error, not a misread.
        let mut b = Vec::new();
        encode_batch(&mut b, 0, 0, ProducerInfo::NONE, &sample()).unwrap();
        b[22] |= 4; // zstd
        let crc = crc32c::crc32c(&b[21..]);
        b[17..21].copy_from_slice(&crc.to_be_bytes());
        let batch = RecordBatch::new(&b).unwrap();
        let r: Vec<_> = batch.records().collect();
        assert!(
            matches!(&r[..], [Err(BatchError::BadCompression { codec: 4, .. })]),
            "{r:?}"
        );
        b[22] |= 7; // id 7: not a codec
        let crc = crc32c::crc32c(&b[21..]);
        b[17..21].copy_from_slice(&crc.to_be_bytes());
        let r: Vec<_> = RecordBatch::new(&b).unwrap().records().collect();
        assert_eq!(r, vec![Err(BatchError::UnknownCodec { codec: 7 })]);
    }

    #[test]
    fn batch_iter_splits_and_stops_on_error() {
        let mut b = Vec::new();
        encode_batch(&mut b, 0, 0, ProducerInfo::NONE, &sample()).unwrap();
        encode_batch(&mut b, 2, 0, ProducerInfo::NONE, &sample()).unwrap();
        let v: Vec<_> = batches(&b)
            .map(|r| r.map(|b| b.header.base_offset))
            .collect();
        assert_eq!(v, vec![Ok(0), Ok(2)]);
        let v: Vec<_> = batches(&b[..b.len() - 3]).collect();
        assert_eq!(v.len(), 2);
        assert!(v[1].is_err());
    }
}
