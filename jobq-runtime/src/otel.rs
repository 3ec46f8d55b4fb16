//! Trace propagation (feature `otel`, on by default): an enqueue made
//! inside a `tracing` span that carries an OpenTelemetry context stores the
//! W3C trace context (`traceparent`, and `tracestate` when there is one) in
//! the job's metadata, and the attempt's `jobq.job` span, in whatever
//! process runs it, becomes a child of that span: one trace from the
//! request that enqueued the job to its handler.
//!
//! The context is read through `tracing-opentelemetry` (the application's
//! subscriber needs its layer, of the same `opentelemetry` version as
//! jobq's) and written and read with `opentelemetry_sdk`'s W3C
//! propagator, whatever global propagator the application sets. An
//! application without OpenTelemetry stores nothing and pays a look at the
//! current span per enqueue.

use std::collections::HashMap;

use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::TraceContextExt;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// The metadata keys of the W3C trace context.
const KEYS: [&str; 2] = ["traceparent", "tracestate"];

/// The W3C trace context of the current span, as metadata entries; none
/// when there is no current span or it carries no valid OpenTelemetry
/// context.
pub(crate) fn current() -> Vec<(String, String)> {
    let span = tracing::Span::current();
    if span.is_none() {
        return Vec::new();
    }
    let context = span.context();
    if !context.span().span_context().is_valid() {
        return Vec::new();
    }
    let mut carrier: HashMap<String, String> = HashMap::new();
    TraceContextPropagator::new().inject_context(&context, &mut carrier);
    KEYS.iter()
        .filter_map(|key| carrier.remove(*key).map(|value| ((*key).to_owned(), value)))
        .filter(|(_, value)| !value.is_empty())
        .collect()
}

/// Makes `span` (an attempt's `jobq.job` span) a child of the trace its
/// job's metadata (`metadata`, the stored JSON) carries, if it carries one.
pub(crate) fn continue_trace(span: &tracing::Span, metadata: Option<&str>) {
    let Some(text) = metadata.filter(|text| text.contains("traceparent")) else {
        return;
    };
    let Ok(serde_json::Value::Object(map)) = serde_json::from_str(text) else {
        return;
    };
    let carrier: HashMap<String, String> = KEYS
        .iter()
        .filter_map(|key| Some(((*key).to_owned(), map.get(*key)?.as_str()?.to_owned())))
        .collect();
    let context = TraceContextPropagator::new().extract(&carrier);
    if context.span().span_context().is_valid() {
        // An error means the span has no OpenTelemetry data (no layer):
        // nothing to continue.
        let _ = span.set_parent(context);
    }
}
