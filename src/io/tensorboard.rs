//! TensorBoard scalar event files, written directly: each record is
//! `u64 length · u32 masked CRC-32C(length) · Event protobuf · u32 masked CRC-32C(event)`
//! (TFRecord framing), the first event carries `file_version = "brain.Event:2"`, and each
//! scalar is `Event { wall_time = 1, step = 2, summary = 5 { value = 1 { tag = 1,
//! simple_value = 2 } } }`. `tensorboard --logdir runs/` reads the files with no conversion.

use anyhow::Context;
use std::io::Write;
use std::path::Path;

/// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), bitwise.
pub fn crc32c(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= b as u32;
        for _ in 0..8 {
            crc = if crc & 1 != 0 { (crc >> 1) ^ 0x82F6_3B78 } else { crc >> 1 };
        }
    }
    !crc
}

/// TFRecord's masking of a CRC, so that CRCs of CRCs stay well distributed.
pub fn masked_crc(data: &[u8]) -> u32 {
    let c = crc32c(data);
    (c.rotate_right(15)).wrapping_add(0xa282_ead8)
}

fn varint(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn length_delimited(field: u8, bytes: &[u8], out: &mut Vec<u8>) {
    out.push((field << 3) | 2);
    varint(bytes.len() as u64, out);
    out.extend_from_slice(bytes);
}

/// One `Event` protobuf with `wall_time`, `step` and either a file version or scalars.
pub fn event(wall_time: f64, step: i64, file_version: Option<&str>, scalars: &[(&str, f32)]) -> Vec<u8> {
    let mut e = Vec::new();
    e.push(0x09);
    e.extend_from_slice(&wall_time.to_le_bytes());
    e.push(0x10);
    varint(step as u64, &mut e);
    if let Some(v) = file_version {
        length_delimited(3, v.as_bytes(), &mut e);
    }
    if !scalars.is_empty() {
        let mut summary = Vec::new();
        for (tag, value) in scalars {
            let mut v = Vec::new();
            length_delimited(1, tag.as_bytes(), &mut v);
            v.push(0x15);
            v.extend_from_slice(&value.to_le_bytes());
            length_delimited(1, &v, &mut summary);
        }
        length_delimited(5, &summary, &mut e);
    }
    e
}

/// TFRecord framing of one record.
pub fn record(data: &[u8]) -> Vec<u8> {
    let len = (data.len() as u64).to_le_bytes();
    let mut r = Vec::with_capacity(data.len() + 16);
    r.extend_from_slice(&len);
    r.extend_from_slice(&masked_crc(&len).to_le_bytes());
    r.extend_from_slice(data);
    r.extend_from_slice(&masked_crc(data).to_le_bytes());
    r
}

/// Appends scalar events to one `events.out.tfevents.*` file.
pub struct EventWriter {
    file: std::io::BufWriter<std::fs::File>,
}

impl EventWriter {
    /// A new event file in `dir` (a resumed run starts another; TensorBoard merges them).
    pub fn create(dir: &Path) -> anyhow::Result<Self> {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        let name = format!("events.out.tfevents.{}.normlab.{}", now.as_secs(), std::process::id());
        let path = dir.join(name);
        let file = std::fs::File::create(&path).with_context(|| format!("cannot create {}", path.display()))?;
        let mut w = Self { file: std::io::BufWriter::new(file) };
        w.file.write_all(&record(&event(now.as_secs_f64(), 0, Some("brain.Event:2"), &[])))?;
        Ok(w)
    }

    pub fn scalars(&mut self, step: usize, values: &[(&str, f32)]) -> anyhow::Result<()> {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_secs_f64();
        self.file.write_all(&record(&event(now, step as i64, None, values)))?;
        Ok(())
    }

    pub fn flush(&mut self) -> anyhow::Result<()> {
        Ok(self.file.flush()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_records_match_hand_encoding_and_crc32c() {
        assert_eq!(crc32c(b"123456789"), 0xE306_9283, "the CRC-32C check value");
        let e = event(1.0, 5, None, &[("a", 1.0)]);
        let mut want = vec![0x09];
        want.extend_from_slice(&1.0f64.to_le_bytes());
        want.extend_from_slice(&[0x10, 0x05, 0x2a, 0x0a, 0x0a, 0x08, 0x0a, 0x01, b'a', 0x15, 0x00, 0x00, 0x80, 0x3f]);
        assert_eq!(e, want);
        let r = record(&e);
        assert_eq!(&r[..8], &(e.len() as u64).to_le_bytes());
        assert_eq!(r.len(), e.len() + 16);
    }
}
