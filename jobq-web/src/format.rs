//! Small text helpers: durations, times, query strings.

use std::time::Duration;

use chrono::{DateTime, Utc};

/// `4s`, `2m 5s`, `3h 10m`, `2d 4h`: the two largest units.
pub(crate) fn duration(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m {}s", s / 60, s % 60),
        3600..86400 => format!("{}h {}m", s / 3600, s % 3600 / 60),
        _ => format!("{}d {}h", s / 86400, s % 86400 / 3600),
    }
}

/// How long an attempt took: `12 ms` below a second, else as [`duration`].
pub(crate) fn took(d: Duration) -> String {
    if d < Duration::from_secs(1) {
        format!("{} ms", d.as_millis())
    } else {
        duration(d)
    }
}

/// `2026-12-01 20:03:04 UTC`.
pub(crate) fn time(at: DateTime<Utc>) -> String {
    at.format("%Y-%m-%d %H:%M:%S UTC").to_string()
}

/// How long before `now` `at` was: `4s ago`, or `in 2m 5s` for the future.
pub(crate) fn relative(at: DateTime<Utc>, now: DateTime<Utc>) -> String {
    match (now - at).to_std() {
        Ok(ago) => format!("{} ago", duration(ago)),
        Err(_) => format!("in {}", duration((at - now).to_std().unwrap_or_default())),
    }
}

/// Percent-encodes `s` for a query string (all but unreserved characters).
pub(crate) fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `a=1&b=x%20y` from the pairs whose value is not empty.
pub(crate) fn query<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> String {
    pairs
        .into_iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| format!("{k}={}", encode(v)))
        .collect::<Vec<_>>()
        .join("&")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_show_their_two_largest_units() {
        assert_eq!(duration(Duration::from_secs(4)), "4s");
        assert_eq!(duration(Duration::from_secs(125)), "2m 5s");
        assert_eq!(duration(Duration::from_secs(3 * 3600 + 600)), "3h 10m");
        assert_eq!(duration(Duration::from_secs(2 * 86400 + 4 * 3600)), "2d 4h");
    }

    #[test]
    fn query_values_are_percent_encoded_and_empty_ones_left_out() {
        assert_eq!(
            query([("queue", "mail bulk&x"), ("status", ""), ("key", "a/é")]),
            "queue=mail%20bulk%26x&key=a%2F%C3%A9"
        );
    }
}
