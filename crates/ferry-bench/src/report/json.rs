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

impl Buckets {
    /// `(ns, count)` per non-empty bucket, in order, where `ns` is the
    /// highest value the bucket holds.
    pub fn pairs(&self) -> Vec<(u64, u64)> {
        let buckets = self.0.iter_recorded();
        buckets
            .map(|b| (b.value_iterated_to(), b.count_at_value()))
            .collect()
    }
}

impl Serialize for Buckets {
    /// `[[ns, count], ...]`, written compactly even inside pretty JSON.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let line = serde_json::to_string(&self.pairs()).map_err(S::Error::custom)?;
        let raw = RawValue::from_string(line).map_err(S::Error::custom)?;
        raw.serialize(serializer)
    }
}

#[cfg(test)]
mod tests {
    use crate::report::rows::tests::row;
    use crate::stats::record;

    #[test]
    fn pingpong_json_keeps_the_first_keys_and_adds_cpu() {
        let json = serde_json::to_value([row("pipe", 12, 4.0)]).unwrap();
        let keys: Vec<&String> = json[0].as_object().unwrap().keys().collect();
        for key in [
            "transport",
            "wait",
            "placement",
            "size",
            "count",
            "p50_us",
            "p99_us",
            "p999_us",
            "max_us",
            "mean_us",
            "cpu_us",
            "capped",
            "runs",
            "histogram_ns",
        ] {
            assert!(keys.iter().any(|k| *k == key), "{key} missing: {keys:?}");
        }
    }

    #[test]
    fn histograms_are_bucket_pairs_on_one_line() {
        let mut row = row("pipe", 12, 4.0);
        record(&mut row.histogram_ns.0, 4000);
        record(&mut row.histogram_ns.0, 9000);
        let json = serde_json::to_string_pretty(&row).unwrap();
        let line = json.lines().find(|l| l.contains("histogram_ns")).unwrap();
        assert_eq!(line.trim(), "\"histogram_ns\": [[4001,2],[9007,1]]");
    }
}
