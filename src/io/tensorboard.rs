//! TensorBoard scalar event files, written directly: each record is
//! `u64 length · u32 masked CRC-32C(length) · Event protobuf · u32 masked CRC-32C(event)`
//! (TFRecord framing), the first event carries `file_version = "brain.Event:2"`, and each
//! scalar is `Event { wall_time = 1, step = 2, summary = 5 { value = 1 { tag = 1,
//! simple_value = 2 } } }`, each histogram `value = 1 { tag = 1, histo = 5 { min = 1, max = 2,
//! num = 3, sum = 4, sum_squares = 5, bucket_limit = 6 (packed), bucket = 7 (packed) } }`.
//! `tensorboard --logdir runs/` reads the files with no conversion.

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

/// A histogram summary: `counts[i]` values fell in `(limits[i-1], limits[i]]` (the first
/// bucket from −∞).
#[derive(Clone, Debug, PartialEq)]
pub struct Histogram {
    pub min: f64,
    pub max: f64,
    pub num: f64,
    pub sum: f64,
    pub sum_squares: f64,
    pub limits: Vec<f64>,
    pub counts: Vec<f64>,
}

impl Histogram {
    /// `buckets` equal-width buckets from the smallest to the largest finite value.
    pub fn of(values: &[f64], buckets: usize) -> Self {
        let v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
        let (min, max) = v.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| (a.min(x), b.max(x)));
        let (min, max) = if v.is_empty() { (0.0, 0.0) } else { (min, max) };
        let n = buckets.max(1);
        let width = (max - min) / n as f64;
        let limits: Vec<f64> = (1..=n).map(|i| if i == n { max } else { min + width * i as f64 }).collect();
        let mut counts = vec![0.0; n];
        for &x in &v {
            let i = if width > 0.0 { (((x - min) / width).ceil() as usize).clamp(1, n) - 1 } else { 0 };
            counts[i] += 1.0;
        }
        Self {
            min,
            max,
            num: v.len() as f64,
            sum: v.iter().sum(),
            sum_squares: v.iter().map(|x| x * x).sum(),
            limits,
            counts,
        }
    }

    fn encode(&self) -> Vec<u8> {
        let mut h = Vec::new();
        for (field, x) in [(1u8, self.min), (2, self.max), (3, self.num), (4, self.sum), (5, self.sum_squares)] {
            h.push((field << 3) | 1);
            h.extend_from_slice(&x.to_le_bytes());
        }
        let packed = |xs: &[f64]| xs.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
        length_delimited(6, &packed(&self.limits), &mut h);
        length_delimited(7, &packed(&self.counts), &mut h);
        h
    }
}

/// One value of a summary.
pub enum Value<'a> {
    Scalar(&'a str, f32),
    Histogram(&'a str, &'a Histogram),
}

/// One `Event` protobuf with `wall_time`, `step` and either a file version or scalars.
pub fn event(wall_time: f64, step: i64, file_version: Option<&str>, scalars: &[(&str, f32)]) -> Vec<u8> {
    let values: Vec<Value<'_>> = scalars.iter().map(|(t, v)| Value::Scalar(t, *v)).collect();
    event_with(wall_time, step, file_version, &values)
}

/// One `Event` protobuf with a file version or summary values of any kind.
pub fn event_with(wall_time: f64, step: i64, file_version: Option<&str>, values: &[Value<'_>]) -> Vec<u8> {
    let mut e = Vec::new();
    e.push(0x09);
    e.extend_from_slice(&wall_time.to_le_bytes());
    e.push(0x10);
    varint(step as u64, &mut e);
    if let Some(v) = file_version {
        length_delimited(3, v.as_bytes(), &mut e);
    }
    if !values.is_empty() {
        let mut summary = Vec::new();
        for value in values {
            let mut v = Vec::new();
            match value {
                Value::Scalar(tag, x) => {
                    length_delimited(1, tag.as_bytes(), &mut v);
                    v.push(0x15);
                    v.extend_from_slice(&x.to_le_bytes());
                }
                Value::Histogram(tag, h) => {
                    length_delimited(1, tag.as_bytes(), &mut v);
                    length_delimited(5, &h.encode(), &mut v);
                }
            }
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

    /// Histogram summaries at `step`.
    pub fn histograms(&mut self, step: usize, values: &[(&str, &Histogram)]) -> anyhow::Result<()> {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_secs_f64();
        let values: Vec<Value<'_>> = values.iter().map(|(t, h)| Value::Histogram(t, h)).collect();
        self.file.write_all(&record(&event_with(now, step as i64, None, &values)))?;
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

    #[test]
    fn histograms_bucket_by_hand() {
        // 0, 1, 2, 3, 4 in 2 buckets of width 2: (−∞, 2] holds 0, 1, 2; (2, 4] holds 3, 4.
        let h = Histogram::of(&[0.0, 1.0, 2.0, 3.0, 4.0, f64::NAN], 2);
        assert_eq!((h.min, h.max, h.num, h.sum, h.sum_squares), (0.0, 4.0, 5.0, 10.0, 30.0));
        assert_eq!((h.limits.clone(), h.counts.clone()), (vec![2.0, 4.0], vec![3.0, 2.0]));
        let enc = h.encode();
        assert_eq!(enc[0], 0x09, "min: field 1, 64-bit");
        assert_eq!(&enc[45..47], &[0x32, 16], "bucket_limit: field 6, packed, two doubles");
        // A constant series is one bucket.
        assert_eq!(Histogram::of(&[3.0, 3.0], 4).counts, vec![2.0, 0.0, 0.0, 0.0]);
    }
}
