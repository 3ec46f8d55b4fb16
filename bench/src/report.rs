//! Medians over runs, the printed table and the JSON file.

use serde::Serialize;

/// Median, min and max of one number over the runs, plus every run's value.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Summary {
    pub(crate) median: f64,
    pub(crate) min: f64,
    pub(crate) max: f64,
    pub(crate) runs: Vec<f64>,
}

impl Summary {
    pub(crate) fn of(values: &[f64]) -> Option<Self> {
        if values.is_empty() {
            return None;
        }
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len();
        let median = if n % 2 == 1 {
            sorted[n / 2]
        } else {
            f64::midpoint(sorted[n / 2 - 1], sorted[n / 2])
        };
        Some(Self {
            median,
            min: sorted[0],
            max: sorted[n - 1],
            runs: values.to_vec(),
        })
    }
}

/// One row of the table, for one backend.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Row {
    pub(crate) backend: String,
    pub(crate) workload: String,
    /// What the raw side ran (connections × batch), or why there is none.
    pub(crate) raw_config: String,
    /// What jobq ran.
    pub(crate) jobq_config: String,
    pub(crate) jobs: u64,
    pub(crate) raw_jobs_per_s: Option<Summary>,
    pub(crate) jobq_jobs_per_s: Option<Summary>,
    /// Median jobq / median raw.
    pub(crate) ratio: Option<f64>,
    /// Enqueue → handler start, milliseconds (latency rows only).
    pub(crate) jobq_p50_ms: Option<Summary>,
    pub(crate) jobq_p99_ms: Option<Summary>,
    /// What the target for this row is, in words, and whether it is met.
    pub(crate) target: Option<String>,
    pub(crate) target_met: Option<bool>,
}

/// Everything measured for one backend.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct BackendReport {
    pub(crate) backend: String,
    pub(crate) server_version: String,
    pub(crate) url: String,
    pub(crate) runs: usize,
    pub(crate) quick: bool,
    pub(crate) poll_interval_ms: u64,
    /// `/proc/loadavg` (1-minute) when the backend started and finished.
    pub(crate) load_before: f64,
    pub(crate) load_after: f64,
    pub(crate) seconds: f64,
    pub(crate) rows: Vec<Row>,
}

fn rate(s: Option<&Summary>) -> String {
    s.map_or_else(
        || "—".to_owned(),
        |s| format!("{} ({}–{})", round(s.median), round(s.min), round(s.max)),
    )
}

pub(crate) fn round(x: f64) -> String {
    if x >= 100.0 {
        format!("{x:.0}")
    } else if x >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    }
}

fn ms(s: Option<&Summary>) -> String {
    s.map_or_else(String::new, |s| {
        format!("{} ({}–{})", round(s.median), round(s.min), round(s.max))
    })
}

/// The Markdown table of one backend.
pub(crate) fn table(report: &BackendReport) -> String {
    let mut out = format!(
        "### {} ({}), {} run{}{}, load {:.1} → {:.1}\n\n\
         | workload | raw SQL | jobq | raw jobs/s | jobq jobs/s | jobq/raw | p50 ms | p99 ms | target |\n\
         |---|---|---|---:|---:|---:|---:|---:|---|\n",
        report.backend,
        report.server_version,
        report.runs,
        if report.runs == 1 { "" } else { "s" },
        if report.quick { ", --quick" } else { "" },
        report.load_before,
        report.load_after,
    );
    for row in &report.rows {
        let target = match (&row.target, row.target_met) {
            (Some(t), Some(true)) => format!("✅ {t}"),
            (Some(t), Some(false)) => format!("❌ {t}"),
            (Some(t), None) => t.clone(),
            (None, _) => String::new(),
        };
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            row.workload,
            row.raw_config,
            row.jobq_config,
            rate(row.raw_jobs_per_s.as_ref()),
            rate(row.jobq_jobs_per_s.as_ref()),
            row.ratio.map_or_else(String::new, |r| format!("{r:.2}")),
            ms(row.jobq_p50_ms.as_ref()),
            ms(row.jobq_p99_ms.as_ref()),
            target,
        ));
    }
    out
}

/// The 1-minute load average.
pub(crate) fn load() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|x| x.parse().ok()))
        .unwrap_or(f64::NAN)
}
