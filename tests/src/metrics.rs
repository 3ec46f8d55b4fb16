//! A recorder for the `metrics` facade that keeps every value, for tests of
//! jobq's metrics: [`install`] makes it the process's global recorder (once
//! per test binary; worker tasks run on other threads, so a thread-local
//! recorder would miss them), and [`counter`], [`histogram`] and [`gauge`]
//! read a series by name and labels. Nothing is drained by reading, so tests
//! running side by side (each on its own queue label) do not disturb each other.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use metrics::{
    Counter, Gauge, Histogram, HistogramFn, Key, KeyName, Label, Metadata, Recorder, SharedString,
    Unit,
};

/// One histogram's samples.
#[derive(Debug, Default)]
struct Samples(Mutex<Vec<f64>>);

impl HistogramFn for Samples {
    fn record(&self, value: f64) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(value);
    }
}

/// Every series registered, by key.
#[derive(Debug, Default)]
struct Series {
    counters: HashMap<Key, Arc<AtomicU64>>,
    gauges: HashMap<Key, Arc<AtomicU64>>,
    histograms: HashMap<Key, Arc<Samples>>,
}

/// The recorder [`install`] installs.
#[derive(Debug, Default)]
pub struct TestRecorder {
    series: Mutex<Series>,
}

impl TestRecorder {
    fn series(&self) -> std::sync::MutexGuard<'_, Series> {
        self.series.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Recorder for TestRecorder {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}

    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        let cell = Arc::clone(self.series().counters.entry(key.clone()).or_default());
        Counter::from_arc(cell)
    }

    fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
        let cell = Arc::clone(self.series().gauges.entry(key.clone()).or_default());
        Gauge::from_arc(cell)
    }

    fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
        let cell = Arc::clone(self.series().histograms.entry(key.clone()).or_default());
        Histogram::from_arc(cell)
    }
}

static RECORDER: OnceLock<&'static TestRecorder> = OnceLock::new();

/// Installs the test recorder as the global one (the first call; later
/// calls return the same). Call it before building a worker or enqueuing.
pub fn install() -> &'static TestRecorder {
    RECORDER.get_or_init(|| {
        let recorder: &'static TestRecorder = Box::leak(Box::default());
        metrics::set_global_recorder(recorder).expect("no other global recorder in this binary");
        recorder
    })
}

fn key(name: &str, labels: &[(&str, &str)]) -> Key {
    let labels: Vec<Label> = labels
        .iter()
        .map(|&(k, v)| Label::new(k.to_owned(), v.to_owned()))
        .collect();
    Key::from_parts(name.to_owned(), labels)
}

/// The counter `name` with exactly `labels` (in the order jobq gives them); 0 if never registered.
pub fn counter(name: &str, labels: &[(&str, &str)]) -> u64 {
    install()
        .series()
        .counters
        .get(&key(name, labels))
        .map_or(0, |c| c.load(Ordering::Relaxed))
}

/// The samples of histogram `name` with exactly `labels`.
pub fn histogram(name: &str, labels: &[(&str, &str)]) -> Vec<f64> {
    let cell = install()
        .series()
        .histograms
        .get(&key(name, labels))
        .cloned();
    cell.map(|c| c.0.lock().unwrap_or_else(PoisonError::into_inner).clone())
        .unwrap_or_default()
}

/// The gauge `name` with exactly `labels`, if it was ever set.
pub fn gauge(name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    install()
        .series()
        .gauges
        .get(&key(name, labels))
        .map(|g| f64::from_bits(g.load(Ordering::Relaxed)))
}
