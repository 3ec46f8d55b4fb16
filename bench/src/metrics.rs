//! The "metrics on vs off" rows: a global recorder that can be switched, so
//! one process measures jobq with a recorder and without one, alternately.
//!
//! On, it is `metrics-exporter-prometheus`'s recorder (what a service would
//! install), with its upkeep every 5 s as a scraped service runs it; off, it
//! hands out no-op handles, exactly what jobq gets with no recorder
//! installed. A worker takes its handles when it is built, so the switch
//! position at `build()` decides which kind of worker it is.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use metrics::{Counter, Gauge, Histogram, Key, KeyName, Metadata, Recorder, SharedString, Unit};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle, PrometheusRecorder};

struct Switch {
    on: AtomicBool,
    prometheus: PrometheusRecorder,
}

impl Recorder for Switch {
    fn describe_counter(&self, key: KeyName, unit: Option<Unit>, description: SharedString) {
        self.prometheus.describe_counter(key, unit, description);
    }

    fn describe_gauge(&self, key: KeyName, unit: Option<Unit>, description: SharedString) {
        self.prometheus.describe_gauge(key, unit, description);
    }

    fn describe_histogram(&self, key: KeyName, unit: Option<Unit>, description: SharedString) {
        self.prometheus.describe_histogram(key, unit, description);
    }

    fn register_counter(&self, key: &Key, metadata: &Metadata<'_>) -> Counter {
        if self.on.load(Ordering::SeqCst) {
            self.prometheus.register_counter(key, metadata)
        } else {
            Counter::noop()
        }
    }

    fn register_gauge(&self, key: &Key, metadata: &Metadata<'_>) -> Gauge {
        if self.on.load(Ordering::SeqCst) {
            self.prometheus.register_gauge(key, metadata)
        } else {
            Gauge::noop()
        }
    }

    fn register_histogram(&self, key: &Key, metadata: &Metadata<'_>) -> Histogram {
        if self.on.load(Ordering::SeqCst) {
            self.prometheus.register_histogram(key, metadata)
        } else {
            Histogram::noop()
        }
    }
}

static SWITCH: OnceLock<(&'static Switch, PrometheusHandle)> = OnceLock::new();

fn switch() -> &'static (&'static Switch, PrometheusHandle) {
    SWITCH.get_or_init(|| {
        let prometheus = PrometheusBuilder::new()
            .set_buckets_for_metric(
                metrics_exporter_prometheus::Matcher::Prefix("jobq_".into()),
                jobq_runtime::metrics::DURATION_BUCKETS,
            )
            .expect("buckets are not empty")
            .build_recorder();
        let handle = prometheus.handle();
        let switch: &'static Switch = Box::leak(Box::new(Switch {
            on: AtomicBool::new(false),
            prometheus,
        }));
        metrics::set_global_recorder(switch).expect("the bench installs the only recorder");
        let upkeep = handle.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(5));
            loop {
                tick.tick().await;
                upkeep.run_upkeep();
            }
        });
        (switch, handle)
    })
}

/// Turns the recorder on or off for the workers built from now on.
pub(crate) fn set(on: bool) {
    switch().0.on.store(on, Ordering::SeqCst);
}

/// What a scrape would return now (a check that the "on" side recorded).
pub(crate) fn render() -> String {
    switch().1.render()
}
