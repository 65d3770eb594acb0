//! `report.json` and the rows' own JSON files: pretty-printed, but each
//! histogram on one line, so a file stays readable row by row.

use std::path::Path;

use serde::ser::Error as _;
use serde::{Serialize, Serializer};
use serde_json::value::RawValue;

use super::Report;
use super::rows::Buckets;
use crate::error::{Context, Error};

impl Report {
    /// The report as pretty-printed JSON, ending in a newline.
    pub fn json(&self) -> Result<String, Error> {
        let json = serde_json::to_string_pretty(self).context("encoding the report as JSON")?;
        Ok(json + "\n")
    }
}

/// Writes `rows` to `path` as a JSON array.
pub fn write_json<T: Serialize>(path: &Path, rows: &[T]) -> Result<(), Error> {
    let json = serde_json::to_string_pretty(rows).context("encoding the rows as JSON")?;
    std::fs::write(path, json + "\n").context(format!("writing {}", path.display()))
}

impl Serialize for Buckets {
    /// `[[ns, count], ...]` per non-empty bucket, where `ns` is the highest
    /// value the bucket holds, written compactly even inside pretty JSON.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let buckets = self.0.iter_recorded();
        let pairs: Vec<(u64, u64)> = buckets
            .map(|b| (b.value_iterated_to(), b.count_at_value()))
            .collect();
        let line = serde_json::to_string(&pairs).map_err(S::Error::custom)?;
        let raw = RawValue::from_string(line).map_err(S::Error::custom)?;
        raw.serialize(serializer)
    }
}
