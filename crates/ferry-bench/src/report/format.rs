//! Numbers as the tables and charts print them: as many digits as a run
//! can tell, and units a reader takes in at a glance.

/// `v` with the decimals of the first `(below, decimals)` step it is
/// below, else with `last` decimals.
fn stepped(v: f64, steps: &[(f64, usize)], last: usize) -> String {
    let decimals = steps
        .iter()
        .find(|(below, _)| v < *below)
        .map_or(last, |s| s.1);
    format!("{v:.decimals$}")
}

/// Microseconds: two decimals below 100, one above.
pub fn format_us(us: f64) -> String {
    stepped(us, &[(100.0, 2)], 1)
}

/// A ratio: three significant digits or so.
pub fn format_ratio(ratio: f64) -> String {
    stepped(ratio, &[(0.1, 3), (10.0, 2), (100.0, 1)], 0)
}

/// GiB/s to three significant digits or so.
pub fn format_gib(gib: f64) -> String {
    stepped(gib, &[(0.01, 4), (1.0, 3)], 2)
}

/// Nanoseconds: three significant digits or so.
pub fn format_ns(ns: f64) -> String {
    stepped(ns, &[(10.0, 2), (1000.0, 1)], 0)
}

/// A rate with a k or M suffix.
pub fn format_rate(per_s: f64) -> String {
    if per_s >= 1e6 {
        format!("{:.2} M", per_s / 1e6)
    } else if per_s >= 1e3 {
        format!("{:.1} k", per_s / 1e3)
    } else {
        format!("{per_s:.0}")
    }
}

/// A tick label: as few digits as the value needs.
pub fn number(v: f64) -> String {
    if v >= 1e6 {
        format!("{}M", number(v / 1e6))
    } else if v >= 1e4 {
        format!("{}k", number(v / 1e3))
    } else if v >= 100.0 || v.fract() == 0.0 {
        format!("{v:.0}")
    } else if v >= 1.0 {
        format!("{v:.1}")
    } else {
        let s = format!("{v:.4}");
        s.trim_end_matches('0').to_string()
    }
}

/// A size in bytes, KiB or MiB.
pub fn bytes(b: f64) -> String {
    if b >= 1_048_576.0 {
        format!("{} MiB", number(b / 1_048_576.0))
    } else if b >= 1024.0 {
        format!("{} KiB", number(b / 1024.0))
    } else {
        format!("{b:.0} B")
    }
}

/// Instructions: whole numbers with thousands separated, and one decimal
/// below a thousand.
pub fn format_count(n: f64) -> String {
    if n.abs() < 1000.0 {
        return format!("{n:.1}");
    }
    let digits = format!("{:.0}", n.abs());
    let mut out = String::from(if n < 0.0 { "-" } else { "" });
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_easily() {
        assert_eq!(format_rate(2_500_000.0), "2.50 M");
        assert_eq!(format_rate(45_600.0), "45.6 k");
        assert_eq!(format_gib(0.0312), "0.031");
        assert_eq!(format_gib(4.567), "4.57");
        assert_eq!(format_ns(1.234), "1.23");
        assert_eq!(format_ns(12_345.6), "12346");
        assert_eq!(format_ratio(0.05), "0.050");
        assert_eq!(format_ratio(123.4), "123");
        assert_eq!(format_count(12.345), "12.3");
        assert_eq!(format_count(-1_234_567.0), "-1,234,567");
        assert_eq!(format_count(100_000.0), "100,000");
    }

    #[test]
    fn tick_labels_are_short() {
        assert_eq!(number(1.0), "1");
        assert_eq!(number(0.2), "0.2");
        assert_eq!(number(2.5), "2.5");
        assert_eq!(number(20_000.0), "20k");
        assert_eq!(bytes(12.0), "12 B");
        assert_eq!(bytes(20_736.0), "20.2 KiB");
        assert_eq!(bytes(1_048_576.0), "1 MiB");
    }
}
